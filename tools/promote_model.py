#!/usr/bin/env python3
"""Promote an approved model package version: write its S3 prefix as `serving.model_prefix` in config/<env>.yaml.

    python tools/promote_model.py --env prod --package-arn arn:aws:sagemaker:...:model-package/<group>/<n>

The registry's approval is a person's decision; the config change is the deploy, reviewed as a one-line diff
(GitOps). Refused, with one line saying why: a package that is not Approved, one registered for another serving
backend or image than the environment's, or a prefix the environment's config then rejects (e.g. vllm_neuronx
needs the compiled package version). Nothing is written when it refuses.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ConfigError, load_config  # noqa: E402
from stacks.image_table import image_uris  # noqa: E402

_PREFIX_LINE = re.compile(r"^(?P<lead>\s+model_prefix:\s*)(?P<value>\S+)(?P<rest>.*)$")


class Refused(Exception):
    """The package cannot be promoted to this environment; the message says why and what to do."""


def model_prefix(package: dict, config) -> str:
    """The bucket key of the package's model, after the checks that make it servable by `config`."""
    arn = package["ModelPackageArn"]
    status = package.get("ModelApprovalStatus")
    if status != "Approved":
        raise Refused(f"{arn} is {status}: approve it in the model registry first (a person's decision)")
    serving = config.serving
    if serving is None:
        raise Refused(f"config/{config.env_name}.yaml has no serving section to promote into")
    backend = package.get("CustomerMetadataProperties", {}).get("serving_backend")
    if backend != serving.backend:
        raise Refused(f"{arn} was registered for serving backend {backend}; {config.env_name} serves {serving.backend}")
    containers = package.get("InferenceSpecification", {}).get("Containers", [])
    if len(containers) != 1:
        raise Refused(f"{arn} has {len(containers)} containers; expected the one serving container")
    image = containers[0].get("Image")
    allowed = (serving.image_uri,) if serving.image_uri else image_uris(serving.image_name)
    if image not in allowed:
        raise Refused(f"{arn} runs image {image}; {config.env_name} serves {serving.image_name} ({', '.join(allowed)})")
    source = containers[0].get("ModelDataSource", {}).get("S3DataSource", {})
    if source.get("S3DataType") != "S3Prefix" or source.get("CompressionType") != "None":
        raise Refused(f"{arn} does not point at an uncompressed S3 prefix ({source})")
    match = re.fullmatch(r"s3://[^/]+/(models/.+/)", source.get("S3Uri", ""))
    if not match:
        raise Refused(f"{arn}: model {source.get('S3Uri')!r} is not a folder under the artifact bucket's models/")
    return match.group(1)


def rewrite(text: str, prefix: str) -> tuple[str, str]:
    """(new text, old prefix): the `model_prefix:` line of the `serving:` section, nothing else."""
    lines = text.split("\n")
    start = lines.index("serving:")
    for i in range(start + 1, len(lines)):
        if lines[i] and not lines[i].startswith((" ", "#")):
            break  # the next top-level section
        found = _PREFIX_LINE.match(lines[i])
        if found:
            lines[i] = f"{found['lead']}{prefix}{found['rest']}"
            return "\n".join(lines), found["value"]
    raise Refused("config has no serving.model_prefix line to change")


def promote(package: dict, env: str, config_dir: Path) -> tuple[str, str]:
    """Write the change, check the environment still loads, else restore; (old, new) prefix."""
    config = load_config(env, config_dir)
    prefix = model_prefix(package, config)
    path = config_dir / f"{env}.yaml"
    original = path.read_text()
    text, old = rewrite(original, prefix)
    path.write_text(text)
    try:
        load_config(env, config_dir)
    except ConfigError as err:
        path.write_text(original)
        raise Refused(f"{package['ModelPackageArn']}: {err}") from None
    return old, prefix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="config/<env>.yaml to change")
    parser.add_argument("--package-arn", required=True, help="an Approved model package version")
    parser.add_argument("--config-dir", type=Path, default=ROOT / "config")
    parser.add_argument("--endpoint-url", help="the emulator's URL (make deploy KEEP=1); default: AWS")
    parser.add_argument("--region", help="default: the AWS configuration's")
    args = parser.parse_args(argv)
    import boto3

    sagemaker = boto3.client("sagemaker", endpoint_url=args.endpoint_url, region_name=args.region)
    package = sagemaker.describe_model_package(ModelPackageName=args.package_arn)
    try:
        old, new = promote(package, args.env, args.config_dir)
    except Refused as err:
        print(f"promote_model: refused: {err}", file=sys.stderr)
        return 2
    if old == new:
        print(f"config/{args.env}.yaml: serving.model_prefix is already {new}")
    else:
        print(
            f"config/{args.env}.yaml: serving.model_prefix: {old} -> {new}\n"
            "commit it and open the review; the deploy pipeline rolls the endpoint out"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
