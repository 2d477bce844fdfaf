"""Exports the pruned sub-network and the unpruned model the same way: the export step of the pruning stack.

- pruned: ``export_subnetwork.py`` with the given choice (e.g. --max-error-increase) into --output-dir
  ($SM_MODEL_DIR, which SageMaker packs as the job's model.tar.gz);
- base: the full network (the largest configuration) through the same export code, so both endpoints serve
  the same format with the same handler; packed as model.tar.gz into --base-output-dir and, with
  --base-output-s3-uri, uploaded there.

Flags it does not know go to the pruned export (e.g. --quantize, --data-dir); in the job --data-dir defaults to
$SM_CHANNEL_TRAINING, so with --quantize dynamic_int8 the pruned export re-measures the int8 model's error.

    python export_models.py --model-dir out/supernet --pareto-file out/pareto/pareto.json \\
        --max-error-increase 0.01 --output-dir out/pruned --base-output-dir out/base
"""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
from pathlib import Path

import export_subnetwork
from pruning.cli import read_json, settings_from, settings_parser
from pruning.search_space import ModelDims, largest_config
from pruning.settings import ExportModelsSettings


def parse_args(argv=None) -> tuple[ExportModelsSettings, list[str]]:
    parser = settings_parser(ExportModelsSettings, __doc__)
    known, rest = parser.parse_known_args(argv)
    return settings_from(known, ExportModelsSettings), rest


def base_front(model_dir: str, folder: Path) -> Path:
    """A one-entry front holding the full network, for export_subnetwork's --index 0."""
    config = read_json(Path(model_dir) / "config.json")
    dims = ModelDims(config["num_hidden_layers"], config["num_attention_heads"], config["intermediate_size"])
    path = folder / "pareto.json"
    path.write_text(json.dumps({"pareto": [{"subnet": largest_config(dims).to_dict()}]}))
    return path


def pack(folder: Path, archive: Path, compresslevel: int = 9) -> Path:
    """model.tar.gz with the model files at its root (what the HF inference container expects)."""
    with tarfile.open(archive, "w:gz", compresslevel=compresslevel) as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return archive


def main(argv=None, *, s3=None, compresslevel: int = 9) -> int:
    """``compresslevel``: gzip level of the base model.tar.gz (9, tarfile's own; the float32 weights shrink by
    about 8 %, so a caller that only reads the archive back may pass 0 and skip the compression work)."""
    args, rest = parse_args(argv)
    if not args.model_dir:
        raise SystemExit("--model-dir (or SM_CHANNEL_MODEL) is required")
    code = ["--inference-code-dir", args.inference_code_dir] if args.inference_code_dir else []
    export_subnetwork.main(["--model-dir", args.model_dir, *code, *rest])

    work = Path(tempfile.mkdtemp(prefix="export-base-"))
    base_dir = Path(args.base_output_dir) if args.base_output_dir else work / "base"
    export_subnetwork.main(
        [
            "--model-dir",
            args.model_dir,
            "--pareto-file",
            str(base_front(args.model_dir, work)),
            "--index",
            "0",
            "--output-dir",
            str(base_dir),
            *code,
        ]
    )
    archive = pack(base_dir, work / "model.tar.gz", compresslevel)
    if args.base_output_s3_uri:
        if s3 is None:
            import boto3

            s3 = boto3.client("s3")
        bucket, _, key = args.base_output_s3_uri.removeprefix("s3://").partition("/")
        s3.upload_file(str(archive), bucket, key)
        print(f"uploaded the unpruned model to {args.base_output_s3_uri}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
