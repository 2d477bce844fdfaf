"""The registry's lineage states: where the dataset came from, written beside the model before it is registered.

Apart from the gate and the package (registry.py) because a lineage answers another question (what exactly was
this model trained on, by which code) and grows with it. ModelRegistration extends this construct, so the states
keep its scope (their ids, and so the templates, do not depend on where the code lives) and use its task helper
(`_task`: a CallAwsService that notifies on failure).
"""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from ..shared.bucket_layout import DATASETS_PREFIX, MODELS_PREFIX
from .outcomes import MARKER_VERSION_KEY, NO_MARKER_VERSION
from .state_paths import APPROVAL, RUN, TRAIN_DATA, TRAINING

LINEAGE_FILE = "lineage.json"
MAX_LISTED_VERSIONS = 500  # keeps the listing well under Step Functions' 256 KiB state payload


class LineageStates(Construct):
    """`MarkerVersion?` -> `DatasetPrefix?` -> `ListDatasetVersions` -> `LineageManifest` -> `WriteLineage`; the
    subclass (ModelRegistration) sets these attributes and provides `_task`."""

    _bucket: str
    _base_model: str  # the base model's S3 URI, or a JSONPath to its hub id
    _code_hash: str
    _task: Callable[..., tasks.CallAwsService]

    def _marker_version(self, next_state: sfn.IChainable) -> sfn.Choice:
        """`MarkerVersion?`: the `_READY` marker's S3 version id the Training rule passed, else `absent`."""
        given = sfn.Condition.and_(
            sfn.Condition.is_present(f"$.{MARKER_VERSION_KEY}"),
            sfn.Condition.is_string(f"$.{MARKER_VERSION_KEY}"),
            sfn.Condition.not_(sfn.Condition.string_equals(f"$.{MARKER_VERSION_KEY}", "")),
        )
        known = sfn.Pass(
            self, "DatasetMarkerVersion", parameters={"version_id.$": f"$.{MARKER_VERSION_KEY}"}, result_path="$.marker"
        )
        unknown = sfn.Pass(
            self, "NoDatasetMarkerVersion", parameters={"version_id": NO_MARKER_VERSION}, result_path="$.marker"
        )
        known.next(next_state)
        unknown.next(next_state)
        return sfn.Choice(self, "MarkerVersion").when(given, known).otherwise(unknown)

    def _lineage(self, next_state: sfn.IChainable) -> sfn.IChainable:
        """Every current object version under the dataset's folder (`datasets/<name>/`; a file directly under
        datasets/: that key), into the manifest."""
        datasets = f"s3://{self._bucket}/{DATASETS_PREFIX}"
        parts = f"States.StringSplit({TRAIN_DATA}, '/')"
        # The name's index is the part count of `s3://<bucket>/datasets`, however StringSplit treats `//`.
        name = f"States.ArrayGetItem({parts}, States.ArrayLength(States.StringSplit('{datasets.rstrip('/')}', '/')))"

        def prefix(construct_id: str, pattern: str) -> sfn.Pass:
            return sfn.Pass(
                self,
                construct_id,
                parameters={"prefix.$": f"States.Format('{pattern}', {name})"},
                result_path="$.lineage",
            )

        folder, file = (
            prefix("DatasetFolderPrefix", f"{DATASETS_PREFIX}{{}}/"),
            prefix("DatasetFilePrefix", f"{DATASETS_PREFIX}{{}}"),
        )
        listing = self._task(
            "ListDatasetVersions",
            "s3",
            "listObjectVersions",
            {
                "Bucket": self._bucket,
                "Prefix": sfn.JsonPath.string_at("$.lineage.prefix"),
                "MaxKeys": MAX_LISTED_VERSIONS,
            },
            {"objects.$": "$.Versions[?(@.IsLatest == true)]", "truncated.$": "$.IsTruncated", "prefix.$": "$.Prefix"},
            "$.lineage",
            [f"arn:aws:s3:::{self._bucket}"],
        )
        body, write = self._lineage_manifest()
        folder.next(listing)
        file.next(listing)
        listing.next(body).next(write).next(next_state)
        return (
            sfn.Choice(self, "DatasetPrefix")
            .when(sfn.Condition.string_matches(TRAIN_DATA, f"{datasets}*/*"), folder)
            .otherwise(file)
        )

    def _lineage_manifest(self) -> tuple[sfn.Pass, tasks.CallAwsService]:
        """(`LineageManifest`, `WriteLineage`): the run's full lineage as JSON beside the model, where the
        package's metadata (256 characters a value) can only name it."""
        manifest = {
            "training_job": sfn.JsonPath.string_at(TRAINING.job_name),
            "model": sfn.JsonPath.string_at(TRAINING.model_s3_uri),
            "dataset": sfn.JsonPath.string_at(TRAIN_DATA),
            "dataset_prefix": sfn.JsonPath.string_at("$.lineage.prefix"),
            "dataset_objects": sfn.JsonPath.object_at("$.lineage.objects"),
            "dataset_listing_truncated": sfn.JsonPath.object_at("$.lineage.truncated"),
            "dataset_marker_version_id": sfn.JsonPath.string_at("$.marker.version_id"),
            "hyperparameters": sfn.JsonPath.object_at(RUN.hyperparameters),
            "base_model_source": self._base_model_value(),
            "code_asset_hash": self._code_hash,
            "evaluation": sfn.JsonPath.object_at(APPROVAL),
            "model_facts": sfn.JsonPath.object_at("$.model.facts"),
        }
        body = sfn.Pass(
            self,
            "LineageManifest",
            parameters={"manifest": manifest, "objects.$": "$.lineage.objects"},
            result_path="$.lineage_manifest",
        )
        write = self._task(
            "WriteLineage",
            "s3",
            "putObject",
            {
                "Bucket": self._bucket,
                "Key": sfn.JsonPath.format(
                    f"{MODELS_PREFIX}{{}}/{LINEAGE_FILE}", sfn.JsonPath.string_at(TRAINING.job_name)
                ),
                "Body": sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.lineage_manifest.manifest")),
                "ContentType": "application/json",
            },
            {"version_id.$": "$.VersionId"},
            "$.lineage_object",
            [f"arn:aws:s3:::{self._bucket}/{MODELS_PREFIX}*/{LINEAGE_FILE}"],
        )
        return body, write

    def _base_model_value(self) -> str:
        return sfn.JsonPath.string_at(self._base_model) if self._base_model.startswith("$.") else self._base_model
