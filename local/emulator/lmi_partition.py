"""Stand-in for the LMI NeuronX image's ahead-of-time `partition` program, where Neuron cannot run.

The job runner starts it in place of the image's `/usr/local/bin/dockerd-entrypoint.sh`, with the job's own
arguments (`partition --model-dir ... --save-mp-checkpoint-path ... --skip-copy`) and environment (`OPTION_*`),
so the compile job's real script runs around it. It reads its settings as DJL 0.30.0's partition.py does
(serving.properties in --model-dir, then every OPTION_<X> as option.<x>, the environment winning, then the
flags), refuses what the real program or the device would refuse, and writes the layout the real partition
writes (djl-serving 0.30.0-dlc, neuron_utils/model_loader.py `partition`, safetensors schema):

    <save path>/config.json        the model's config.json plus its `neuron` section (shape, compiler version)
    <save path>/tokenizer*         the tokenizer files
    <save path>/serving.properties the settings used (partition.py generate_properties_file)
    <save path>/compiled/          NEFFs and presharded weights; here the model's own safetensors, a
                                   STAND-IN file saying so, config.json, and VERSION (`<neuronx-cc>+standin`)

What it cannot do: compile (no neuronx-cc here), load onto NeuronCores, shard the weights per TP rank.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

# transformers-neuronx classes DJL 0.30.0's loader knows (model_loader.py TNXModelLoader.MODEL_TYPE_TO_CLS_LOADER)
LOADABLE = ("opt", "gpt2", "gptj", "gpt_neox", "llama", "mistral", "mixtral", "bloom")
# LMI's dtype names -> the `amp` transformers-neuronx records (tnx_properties.py Dtype member names)
AMP = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
# partition.py generate_properties_file leaves these out of the serving.properties it writes
EXCLUDED = ("option.model_id", "option.save_mp_checkpoint_path", "model_dir", "upload_checkpoints_s3url")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")
# NeuronCores of the training types a partition can run on (SDK trn1-arch.rst: 2 per Trainium chip)
NEURON_CORES = {"ml.trn1.2xlarge": 2, "ml.trn1.32xlarge": 32, "ml.trn1n.32xlarge": 32}


COMPILER_VARIABLE = "LMI_STAND_IN_NEURONX_CC"  # the image's neuronx-cc, which the runner reads from its tag


class PartitionRefused(Exception):
    """What the real program (or the Neuron runtime under it) would fail with."""


def read_properties(model_dir: Path, environ: dict[str, str], args: argparse.Namespace) -> dict[str, str]:
    """serving.properties, then OPTION_* (winning, as properties_manager.py's `|=`), then the flags."""
    properties: dict[str, str] = {}
    file = model_dir / "serving.properties"
    if file.is_file():
        for line in file.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, value = line.split("=", 1)
                properties[key.strip()] = value.strip()
    for key, value in environ.items():
        if key.startswith("OPTION_"):
            name = "option." + key[len("OPTION_") :].lower()
            properties[name if name != "option.entrypoint" else "option.entryPoint"] = value
    for flag, key in (
        ("model_id", "option.model_id"),
        ("engine", "engine"),
        ("save_mp_checkpoint_path", "option.save_mp_checkpoint_path"),
        ("tensor_parallel_degree", "option.tensor_parallel_degree"),
    ):
        if getattr(args, flag):
            properties[key] = getattr(args, flag)
    return properties


def compiled_shape(properties: dict[str, str], model_config: dict, cores: int | None) -> dict:
    """The `neuron` section transformers-neuronx's loader records (model_loader.py update_model_config_to_neuron),
    after the checks the loader and the Neuron runtime make."""
    model_type = model_config.get("model_type")
    if model_type not in LOADABLE:
        raise PartitionRefused(f"Unsupported model: {model_type!r}. Supported architectures: {list(LOADABLE)}")
    tp = int(properties.get("option.tensor_parallel_degree", "1"))
    heads = int(model_config.get("num_attention_heads", 0))
    if heads % tp:
        raise PartitionRefused(f"{heads} attention heads are not divisible by tensor_parallel_degree {tp}")
    if cores is not None and tp > cores:
        raise PartitionRefused(f"tensor_parallel_degree {tp} needs {tp} NeuronCores; the instance has {cores}")
    rolling = properties.get("option.rolling_batch", "auto") != "disable"
    batch = properties.get("option.max_rolling_batch_size" if rolling else "option.batch_size", "1")
    dtype = properties.get("option.dtype", "fp16")
    if dtype not in AMP:
        raise PartitionRefused(f"{dtype} is not a valid value for dtype: {sorted(AMP)}")
    return {
        "auto_cast_type": AMP[dtype],
        "batch_size": int(batch),
        "checkpoint_id": None,
        "checkpoint_revision": None,
        "compiler_type": "neuronx-cc",
        "num_cores": tp,
        "sequence_length": int(properties["option.n_positions"]),
    }


def write_partition(model: Path, save: Path, properties: dict[str, str], neuron: dict) -> None:
    if save.exists():
        shutil.rmtree(save)  # the loader's own rmtree + mkdir (model_loader.py partition)
    compiled = save / "compiled"
    compiled.mkdir(parents=True)
    config = json.loads((model / "config.json").read_text())
    for weights in sorted(model.glob("*.safetensors")) + sorted(model.glob("*.safetensors.index.json")):
        shutil.copy2(weights, compiled / weights.name)
    (compiled / "config.json").write_text(json.dumps({**config, "is_presharded_checkpoint": True}, indent=2))
    (compiled / "VERSION").write_text(f"{neuron['compiler_version']}+standin")
    (compiled / "STAND-IN").write_text(
        "Written by local/emulator/lmi_partition.py: no NEFFs (nothing was compiled) and the model's own "
        "weights instead of per-rank presharded ones.\n"
    )
    (save / "config.json").write_text(json.dumps({**config, "neuron": neuron}, indent=2))
    for name in TOKENIZER_FILES:
        if (model / name).is_file():
            shutil.copy2(model / name, save / name)
    kept = {k: v for k, v in properties.items() if k not in EXCLUDED}
    (save / "serving.properties").write_text("".join(f"{k}={v}\n" for k, v in kept.items()))


def instance_cores(properties_dir: Path) -> int | None:
    """The NeuronCores of the job's instance (resourceconfig.json, as SageMaker writes it), None if unknown."""
    config = properties_dir.parents[1] / "config" / "resourceconfig.json"  # <base>/input/data/<channel>
    if not config.is_file():
        return None
    return NEURON_CORES.get(json.loads(config.read_text()).get("current_instance_type"), 0)


def parser() -> argparse.ArgumentParser:
    """partition.py's own arguments (djl-serving 0.30.0-dlc serving/docker/partition/partition.py main)."""
    p = argparse.ArgumentParser(prog="partition")
    p.add_argument("--model-dir", default="/opt/ml/input/data/training", dest="properties_dir")
    p.add_argument("--model-id")
    p.add_argument("--engine")
    p.add_argument("--save-mp-checkpoint-path")
    p.add_argument("--pipeline-parallel-degree")
    p.add_argument("--tensor-parallel-degree")
    p.add_argument("--skip-copy", action="store_true")
    p.add_argument("--quantization", dest="quantize")
    return p


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("partition", "train"):
        print(f"stand-in: only the image's `partition` program is emulated, got {argv[:1]}", file=sys.stderr)
        return 2
    args = parser().parse_args(argv[1:])
    properties_dir = Path(args.properties_dir)
    properties = read_properties(properties_dir, dict(os.environ if environ is None else environ), args)
    try:
        if "engine" not in properties:
            raise PartitionRefused("KeyError: 'engine' (partition.py reads properties['engine'] after partitioning)")
        save = properties.get("option.save_mp_checkpoint_path")
        if not save:
            raise PartitionRefused("Please specify save_mp_checkpoint_path")
        model = Path(properties.get("option.model_id", properties_dir))
        model_config = json.loads((model / "config.json").read_text())
        neuron = compiled_shape(properties, model_config, instance_cores(properties_dir))
        neuron["compiler_version"] = (os.environ if environ is None else environ)[COMPILER_VARIABLE]
        write_partition(model, Path(save), properties, neuron)
    except (PartitionRefused, FileNotFoundError, KeyError, ValueError) as err:
        print(f"Partitioning was not successful: {err}", file=sys.stderr)
        return 1
    print(f"Partitioning done (stand-in): {neuron}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
