"""Node options for the jsii kernel, the node process that importing aws_cdk starts (standard library only).

The kernel runs single-use code on every synth (the constructs, aws-cdk-lib's WebAssembly template validator),
so two options pay for themselves (bench/synth_time.py, in README.md's benchmark table):
- `--v8-pool-size=0`: V8's worker threads spent more CPU compiling and collecting that code in the background
  than they saved;
- the preload (kernel_preload.cjs) keeps WebAssembly on V8's baseline compiler: node's exit waited ~1.1 s for a
  background TurboFan compile of the validator's hottest function.
They must be in NODE_OPTIONS before aws_cdk is imported; app.py's main() and tests/conftest.py add them.
"""

from __future__ import annotations

from pathlib import Path

from stacks.paths import KERNEL_PRELOAD


def node_options_quoted(value: str) -> str:
    """`value` as one NODE_OPTIONS word: double-quoted, `\\` and `"` escaped (node's own parsing rules)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kernel_node_option_table(preload: Path) -> dict[str, str]:
    """Option by the text that shows it is set; the preload's key is its quoted path, the very word added."""
    preload_word = node_options_quoted(str(preload))
    return {"--v8-pool-size": "--v8-pool-size=0", preload_word: f"--require {preload_word}"}


KERNEL_NODE_OPTIONS = kernel_node_option_table(KERNEL_PRELOAD)


def kernel_node_options(environ: dict) -> None:
    """Add each of KERNEL_NODE_OPTIONS to NODE_OPTIONS (which the jsii kernel inherits) unless its key is there,
    so an option the user set wins."""
    options = environ.get("NODE_OPTIONS", "")
    added = [option for key, option in KERNEL_NODE_OPTIONS.items() if key not in options]
    if added:
        environ["NODE_OPTIONS"] = " ".join([options, *added]).strip()
