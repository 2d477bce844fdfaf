"""A local model server with a serving container's HTTP contract, for a merged HF model folder.

    python local/servers/llm_endpoint --model-dir DIR [--properties serving.properties] [--set KEY=VALUE ...]
                               [--host 127.0.0.1] [--port 8080]
    python local/servers/llm_endpoint --backend vllm_neuronx --model-dir DIR [--served-model-name NAME]
                               [--batch-size 4] [--sequence-length 2048] [--tensor-parallel-size 2]

--backend lmi_neuronx (the default) is a stand-in for LMI (DJL Serving) NeuronX's contract, below: the LMI
container does not run here. Another backend runs the local server its record names (`serve_cli(args)`):
--backend vllm_neuronx starts real vLLM (.venv-vllm) with the arguments the Hugging Face vLLM Neuron container
derives from the same SM_ON_* values the stack sets (local/servers/vllm_server.py).

GET /ping is 200 once the model is loaded. POST /invocations takes
{"inputs": str | [str], "parameters": {...}, "stream": bool} and answers {"generated_text": ...} (a list of
those for a list input), jsonlines tokens when streaming, or {"error": ..., "code": 424} with HTTP 424.
Settings come from the same serving.properties the endpoint uses: option.max_rolling_batch_size (requests
batched together), option.n_positions (input + output tokens; capped at the model's max_position_embeddings)
and option.dtype. An unrendered template value such as {{n_positions}} counts as unset.

Concurrent requests go to one queue; a single worker takes up to max_rolling_batch_size compatible ones
(same sampling settings), left-pads them, runs one `generate` and hands each its own result: its own
max_new_tokens, stop sequences and finish reason. Standard library only, besides torch and transformers.

One module per concern: settings (serving.properties), request (validation), engine (the model), batcher
(the queue and its worker), http_server (the contract), launcher (the command line, backends from the registry).
"""

from local.servers.llm_endpoint.batcher import Batcher
from local.servers.llm_endpoint.engine import Engine
from local.servers.llm_endpoint.http_server import Handler, LocalEndpointServer, start
from local.servers.llm_endpoint.launcher import main
from local.servers.llm_endpoint.request import Job, RequestError, Sampling, parse_request
from local.servers.llm_endpoint.settings import Settings, load_settings, parse_properties

__all__ = [
    "Batcher",
    "Engine",
    "Handler",
    "Job",
    "LocalEndpointServer",
    "RequestError",
    "Sampling",
    "Settings",
    "load_settings",
    "main",
    "parse_properties",
    "parse_request",
    "start",
]
