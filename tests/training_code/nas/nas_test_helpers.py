"""Paths and small helpers shared by the NAS tests (imported by name: conftest is not importable)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NAS_DIR = REPO / "training_code" / "nas"
HANDLER_DIR = REPO / "serving_artifacts" / "encoder_classifier" / "code"


class RecordedSageMaker:
    """Answers the two SageMaker calls of the selection step from a recording; pages by NextToken."""

    def __init__(self, recording: dict) -> None:
        self.recording = recording
        self.described: list[str] = []

    def list_training_jobs_for_hyper_parameter_tuning_job(self, **request):
        assert request["HyperParameterTuningJobName"] == self.recording["tuning_job_name"]
        pages = self.recording["list_pages"]
        return pages[1] if request.get("NextToken") == "page-2" else pages[0]

    def describe_training_job(self, TrainingJobName):  # noqa: N803 - boto3's keyword
        self.described.append(TrainingJobName)
        return self.recording["describe"][TrainingJobName]


def supernet_folder(model_dir: Path, folder: Path, metadata: dict | None) -> Path:
    """``model_dir``'s files linked into ``folder``, with ``metadata`` as its nas_supernet.json."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    for path in model_dir.iterdir():
        if path.is_file() and path.name != "nas_supernet.json":
            (folder / path.name).symlink_to(path)
    if metadata is not None:
        (folder / "nas_supernet.json").write_text(json.dumps(metadata))
    return folder
