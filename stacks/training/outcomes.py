"""How a training execution ends and what it records, in the names the workflow, the local pipeline and the
tools share (no CDK: local/pipeline.py reads them without starting the jsii kernel)."""

from __future__ import annotations

MODEL_REJECTED = "ModelRejected"  # the error of a run whose version the quality gate registered Rejected
MARKER_VERSION_KEY = "dataset_marker_version_id"  # the execution input field the Training rule sets from the event
NO_MARKER_VERSION = "absent"  # recorded for a run started without a marker event (tools/start_training.py)
