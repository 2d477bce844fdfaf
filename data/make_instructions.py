"""Generate data/instructions.jsonl: instruction/response pairs about ML and cloud topics, written by us.

Run once and commit the output (`python data/make_instructions.py`); the demo and tests read the committed
file, never this script. Deterministic: the same rows in the same order on every run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "instructions.jsonl"

# topic: (what it is, why it matters, an example, a common pitfall)
TOPICS: dict[str, tuple[str, str, str, str]] = {
    "machine learning": (
        "a field of computer science where programs learn patterns from data instead of following hand-written rules",
        "it turns historical data into models that make predictions or decisions on new data",
        "a spam filter that learns from emails people marked as spam",
        "training on data that does not represent what the model will see in production",
    ),
    "deep learning": (
        "machine learning with neural networks of many layers that learn features directly from raw data",
        "it reaches high accuracy on images, speech and text where manual features fall short",
        "an image classifier built from convolutional layers",
        "needing far more data and compute than a simpler model that would do the job",
    ),
    "a neural network": (
        "a model made of layers of weighted sums followed by non-linear activations, trained by gradient descent",
        "it can approximate complex functions from examples",
        "a small multilayer perceptron that predicts house prices from a few features",
        "forgetting to normalize the inputs, which makes training slow or unstable",
    ),
    "a large language model": (
        "a transformer trained on large amounts of text to predict the next token",
        "one model can answer questions, summarize, translate and write code from a prompt",
        "Llama 2 chat answering a question written between [INST] tags",
        "trusting its answers without checking them, since it can state wrong facts fluently",
    ),
    "a transformer": (
        "a neural network architecture built on self-attention, which lets every token look at every other token",
        "it trains in parallel over a whole sequence and scales well with data and compute",
        "the decoder-only stack behind Llama and GPT models",
        "the quadratic cost of attention on very long inputs",
    ),
    "self-attention": (
        "a layer that mixes information between tokens by weighting each token by its relevance to the others",
        "it captures long-range dependencies without recurrence",
        "a pronoun attending to the noun it refers to",
        "memory that grows with the square of the sequence length",
    ),
    "a tokenizer": (
        "the component that splits text into tokens and maps them to integer ids for the model",
        "the model only ever sees token ids, so the tokenizer defines its vocabulary",
        "byte-level BPE, which never meets an unknown character",
        "serving a model with a different tokenizer than the one it was trained with",
    ),
    "fine-tuning": (
        "continuing the training of a pretrained model on a smaller dataset for a specific task",
        "it adapts a general model to your domain with little data and compute",
        "teaching a chat model the tone and facts of a company's support answers",
        "overfitting a small dataset and losing general abilities",
    ),
    "LoRA": (
        "low-rank adaptation: the base weights stay frozen and small low-rank matrices are trained next to them",
        "it trains a tiny fraction of the parameters and the adapter can be merged back into the base",
        "a rank 64 adapter on every linear layer of a 7B model",
        "a rank so low that the adapter cannot learn the task",
    ),
    "QLoRA": (
        "LoRA on top of a base model quantized to 4-bit NF4, with compute in bf16 or fp16",
        "it fine-tunes a 7B model on a single GPU with about 10 GB of memory",
        "training Llama 2 7B on a g5.2xlarge instance with a 4-bit base",
        "serving the 4-bit base instead of merging the adapter into a full-precision copy",
    ),
    "quantization": (
        "storing weights, and sometimes activations, with fewer bits such as int8 or 4-bit",
        "it cuts memory and can speed up inference",
        "NF4 weights in QLoRA or int8 weights on Inferentia2",
        "a drop in accuracy when outliers are not handled",
    ),
    "overfitting": (
        "when a model learns the training data, noise included, and does worse on new data",
        "a model that overfits looks good in training but fails in production",
        "training loss falling while validation loss rises",
        "judging a model only by its training loss",
    ),
    "regularization": (
        "techniques that discourage a model from fitting noise, such as weight decay, dropout or early stopping",
        "it improves how well a model generalizes to new data",
        "dropout of 0.1 on LoRA layers",
        "so much regularization that the model underfits",
    ),
    "gradient descent": (
        "an optimization method that moves parameters a small step against the gradient of the loss",
        "it is how almost every neural network is trained",
        "AdamW updating weights after each mini-batch",
        "a learning rate so high that the loss diverges",
    ),
    "the learning rate": (
        "the step size an optimizer takes on each update",
        "it is the single most important hyperparameter of training",
        "2e-4 with a short warmup for QLoRA",
        "keeping a learning rate that is too high for full fine-tuning",
    ),
    "a loss function": (
        "a number that measures how far the model's predictions are from the targets",
        "training minimizes it, so it defines what the model learns",
        "cross-entropy over the next token for language models",
        "optimizing a loss that does not match the business metric",
    ),
    "cross-validation": (
        "evaluating a model on several train and validation splits of the same data",
        "it gives a more reliable estimate of performance than a single split",
        "5-fold cross-validation of a gradient boosting model",
        "leaking information between folds through preprocessing fitted on all data",
    ),
    "a confusion matrix": (
        "a table of predicted versus true classes",
        "it shows which classes the model mixes up, not just overall accuracy",
        "counting false positives of a fraud detector",
        "reading accuracy alone on an imbalanced dataset",
    ),
    "precision and recall": (
        "precision is the share of predicted positives that are right; recall is the share of positives found",
        "they expose the trade-off between false alarms and misses",
        "a medical test that favors recall so it misses few patients",
        "reporting one without the other",
    ),
    "feature engineering": (
        "turning raw data into inputs that make patterns easier for a model to learn",
        "good features often matter more than the choice of algorithm",
        "the day of week extracted from a timestamp",
        "features computed with information from the future",
    ),
    "data drift": (
        "a change in the distribution of production inputs compared to the training data",
        "model quality silently degrades when the world changes",
        "new product categories appearing after the model was trained",
        "monitoring only latency and errors, never the inputs",
    ),
    "an embedding": (
        "a dense vector that represents an item such as a word, sentence or product",
        "similar items get nearby vectors, which enables search and clustering",
        "sentence embeddings used for semantic search",
        "comparing embeddings from two different models",
    ),
    "retrieval-augmented generation": (
        "answering with a language model that first retrieves relevant documents and reads them in the prompt",
        "it grounds answers in your own data without retraining",
        "a support bot that searches the product manual before it answers",
        "retrieving too many documents and overflowing the context window",
    ),
    "knowledge distillation": (
        "training a small student model to imitate a larger teacher model",
        "the student is cheaper to serve while keeping much of the quality",
        "distilling a BERT model into a smaller encoder",
        "a student too small to capture what the teacher knows",
    ),
    "neural architecture search": (
        "searching automatically over model structures for the best accuracy and cost trade-off",
        "it finds smaller models that meet a latency or size budget",
        "pruning heads and layers of an encoder and keeping the Pareto-optimal ones",
        "a search so large that it costs more than the savings",
    ),
    "Amazon SageMaker": (
        "the AWS managed service for building, training and deploying machine learning models",
        "it runs training jobs and endpoints without managing servers",
        "a training job that fine-tunes Llama 2 and an endpoint that serves it",
        "leaving endpoints running when nobody uses them",
    ),
    "a SageMaker endpoint": (
        "a managed HTTPS service that hosts a model on one or more instances",
        "applications get predictions with a single InvokeEndpoint call",
        "an ml.inf2.xlarge endpoint running the LMI container",
        "no autoscaling, so traffic spikes cause throttling",
    ),
    "a SageMaker training job": (
        "a managed run that starts instances, runs your training script and saves the model to S3",
        "you pay only while it runs and the infrastructure is reproducible",
        "a QLoRA job on a g5.2xlarge with checkpoints synced to S3",
        "forgetting checkpoints, so a spot interruption loses all progress",
    ),
    "AWS Inferentia2": (
        "an AWS machine learning accelerator built for low-cost, high-throughput inference",
        "it serves large language models at a lower cost per token than many GPUs",
        "Llama 2 7B on an ml.inf2.xlarge with two NeuronCores",
        "sequence lengths and batch sizes that were not compiled ahead of time",
    ),
    "the AWS Neuron SDK": (
        "the compiler, runtime and tools that run models on Inferentia and Trainium",
        "models must be compiled for NeuronCores before they run there",
        "transformers-neuronx compiling Llama for tensor parallel degree 2",
        "compiling at endpoint start-up instead of caching the compiled artifacts",
    ),
    "the LMI container": (
        "the AWS Large Model Inference container built on DJL Serving",
        "it serves large models with rolling batching and streaming without custom server code",
        "serving.properties with option.rolling_batch=auto on Inferentia2",
        "an n_positions smaller than prompt plus generated tokens",
    ),
    "rolling batching": (
        "continuous batching: new requests join a running batch as soon as others finish",
        "it keeps the accelerator busy and raises throughput under load",
        "max_rolling_batch_size=4 on an inf2 endpoint",
        "a batch size larger than the memory allows",
    ),
    "tensor parallelism": (
        "splitting each layer's weights across several devices that compute in parallel",
        "it lets a model larger than one device's memory run with lower latency",
        "tensor_parallel_degree=2 over two NeuronCores",
        "a degree that does not divide the number of attention heads",
    ),
    "Amazon S3": (
        "AWS object storage for any amount of data",
        "it holds datasets, model artifacts and logs durably and cheaply",
        "a versioned, KMS-encrypted bucket for model tarballs",
        "public buckets or missing encryption",
    ),
    "AWS KMS": (
        "the AWS key management service for creating and controlling encryption keys",
        "it encrypts data at rest with keys you control and audit",
        "a customer managed key with rotation for the artifact bucket",
        "key policies that let too many principals decrypt",
    ),
    "IAM": (
        "AWS Identity and Access Management, which decides who can do what on which resource",
        "least privilege limits the damage of a leaked credential",
        "a SageMaker execution role that can only read one S3 prefix",
        "wildcard permissions on every resource",
    ),
    "AWS CDK": (
        "the AWS Cloud Development Kit, which defines infrastructure as code in languages such as Python",
        "stacks are typed, testable and synthesize to CloudFormation",
        "a CDK app with a data stack, a training stack and a serving stack",
        "hard-coding account ids and regions into the stacks",
    ),
    "CloudFormation": (
        "the AWS service that creates and updates resources from templates",
        "deployments are repeatable and roll back on failure",
        "the templates that cdk synth writes to cdk.out",
        "changing a logical id, which replaces the resource",
    ),
    "autoscaling": (
        "adding or removing capacity automatically based on a metric",
        "it matches cost to traffic",
        "scaling an endpoint on invocations per instance",
        "a cooldown so short that capacity flaps",
    ),
    "MLOps": (
        "the practices that take models from experiments to reliable production systems",
        "it makes training, deployment and monitoring repeatable",
        "a pipeline that trains, evaluates, registers and deploys a model",
        "manual steps nobody wrote down",
    ),
    "model monitoring": (
        "watching a deployed model's inputs, outputs, latency and errors",
        "it catches drift and failures before users do",
        "a CloudWatch alarm on p90 model latency",
        "alarms nobody is notified about",
    ),
    "a GPU": (
        "a processor with thousands of cores for parallel arithmetic, used to train and run neural networks",
        "it speeds up the matrix multiplications that dominate deep learning",
        "an NVIDIA A10G in a g5 instance",
        "paying for GPU hours while the data loader is the bottleneck",
    ),
    "mixed precision": (
        "training with 16-bit floats for most operations and 32-bit where precision matters",
        "it halves memory and speeds up training on modern accelerators",
        "bf16 compute for QLoRA",
        "fp16 overflow without loss scaling",
    ),
    "a hyperparameter": (
        "a setting chosen before training, such as the learning rate or batch size",
        "it shapes how and what the model learns",
        "the LoRA rank and alpha",
        "tuning hyperparameters on the test set",
    ),
    "a data scientist": (
        "someone who turns data into insight and models with statistics, programming and domain knowledge",
        "they frame the question, check the data and measure whether a model helps",
        "building a churn model and explaining what drives it",
        "jumping to complex models before understanding the data",
    ),
}

QUESTIONS = {
    "what": ["What is {t}?", "Explain {t}.", "Define {t} in one sentence.", "Can you explain what {t} is?"],
    "why": ["Why does {t} matter?", "Why would I use {t}?"],
    "example": ["Give an example of {t}.", "Show me an example of {t}."],
    "pitfall": ["What is a common mistake with {t}?", "What should I watch out for with {t}?"],
}
SYSTEMS = ["As a data scientist", "As a cloud architect", "As an ML engineer", "You are a helpful assistant"]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def answer(kind: str, topic: str, facts: tuple[str, str, str, str]) -> str:
    what, why, example, pitfall = facts
    subject = _cap(topic)
    if kind == "what":
        return f"{subject} is {what}. It matters because {why}."
    if kind == "why":
        return f"{subject} matters because {why}. For example: {example}."
    if kind == "example":
        return f"An example of {topic} is {example}. {subject} is {what}."
    return f"A common mistake with {topic} is {pitfall}. Remember that {topic} is {what}."


def rows(seed: int = 6) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for topic, facts in TOPICS.items():
        for kind, templates in QUESTIONS.items():
            for template in templates:
                instruction = template.format(t=topic)
                if rng.random() < 0.5:  # the seed's Llama 2 system-prompt style, as the demo prompt uses it
                    instruction = f"<<SYS>>\n{rng.choice(SYSTEMS)}\n<</SYS>>\n{instruction}"
                out.append({"instruction": instruction, "response": answer(kind, topic, facts)})
    return out


def main() -> None:
    data = rows()
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in data), encoding="utf-8")
    print(f"{len(data)} rows written to {OUT}")


if __name__ == "__main__":
    main()
