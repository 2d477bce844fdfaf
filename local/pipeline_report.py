"""What `make pipeline` tells its user about a run: the versions it registered (gate, metrics, benchmark, lineage,
facts), files inside the jobs' outputs, and where each step ran (the emulator, local processes, stand-ins)."""

from __future__ import annotations

import json
from collections.abc import Callable

from local.emulator import LocalAws
from local.emulator.s3_folders import split_s3


def show_registered(aws: LocalAws, result: dict, say: Callable[[str], None]) -> list[dict]:
    """The model package versions the run registered: status, gate, metrics report and lineage."""
    sagemaker, found = aws.client("sagemaker"), []
    for key in ("model_package_arn", "compiled_model_package_arn"):
        if key not in result:
            continue
        package = sagemaker.describe_model_package(ModelPackageName=result[key])
        metadata = package.get("CustomerMetadataProperties", {})
        say(
            f"registered: {package['ModelPackageArn']} ({package['ModelApprovalStatus']}; gate: "
            f"eval_loss_improvement {metadata.get('eval_loss_improvement')} vs min "
            f"{metadata.get('quality_gate_min_improvement')})"
        )
        container = package.get("InferenceSpecification", {}).get("Containers", [{}])[0]
        say(
            f"  serves: {metadata.get('serving_backend')} {container.get('Image')} from "
            f"{container.get('ModelDataSource', {}).get('S3DataSource', {}).get('S3Uri')}"
        )
        report_uri = package.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics", {}).get("S3Uri")
        say(f"  metrics: {report_uri}: {evaluation_summary(aws, report_uri)}")
        if "benchmark_max_drop_points" in metadata:
            say(
                f"  benchmark: largest drop {metadata['benchmark_max_drop_points']} points vs max "
                f"{metadata.get('quality_gate_max_benchmark_drop')} (scores: {metadata.get('benchmark_scores')})"
            )
        say(
            f"  lineage: {metadata.get('lineage')} (version {metadata.get('lineage_version_id')}), "
            f"{metadata.get('dataset_objects')} object version(s) of {metadata.get('dataset')}, marker version "
            f"{metadata.get('dataset_marker_version_id')}"
        )
        say(
            f"  model: {metadata.get('architecture')}, {metadata.get('parameters')} parameters "
            f"({metadata.get('dtype')}, {metadata.get('size_bytes')} bytes), context {metadata.get('context_length')}, "
            f"{metadata.get('num_attention_heads')} heads / {metadata.get('num_key_value_heads')} KV heads, "
            f"chat template {metadata.get('chat_template')}"
        )
        found.append(package)
    return found


def evaluation_summary(aws: LocalAws, uri: str | None) -> str:
    try:
        report = json.loads(read_object(aws, uri))
    except Exception as err:  # noqa: BLE001 - the report is the training code's; show why it is missing
        return f"no report ({type(err).__name__})"
    parts = [
        f"{side} eval_loss {report.get(side, {}).get('eval_loss')} perplexity {report.get(side, {}).get('perplexity')}"
        for side in ("base", "merged")
    ]
    return "; ".join(parts) + f"; improvement {report.get('eval_loss_improvement')}"


def json_in_tarball(aws: LocalAws, uri: str, file_name: str) -> dict:
    """One JSON file of a job's tarball in S3 (training_report.json in output.tar.gz, where SageMaker packs
    output/data; nas_export.json in the pruned model.tar.gz), or {} when it has none."""
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(read_object(aws, uri))) as archive:
        member = next((m for m in archive.getmembers() if m.name.endswith(file_name)), None)
        return json.loads(archive.extractfile(member).read()) if member else {}


def read_object(aws: LocalAws, uri: str) -> bytes:
    bucket, key = split_s3(uri)
    return aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def where_steps_ran(config, workflow: str, say: Callable[[str], None]) -> None:
    say("where each step ran:")
    say(
        "  SageMaker jobs: local processes run by the SageMaker training toolkit (sagemaker-training + the PyTorch "
        "framework module; .venv stands in for the image)"
    )
    say("  Step Functions, S3, EventBridge, SSM, SNS: the emulator (moto)")
    if workflow == "training":
        say(
            "  CompileForNeuron: "
            + (
                "in the workflow, its image's compiler a stand-in here (local/emulator/: no NEFF is compiled)"
                if config.compiles_for_neuron
                else "off in this environment's config; runs only on AWS (staging)"
            )
        )
        say(
            "  the ml.inf2 endpoint: deployed from the promoted lock, an emulated resource only; the model was "
            "served here by local/servers/llm_endpoint"
        )
