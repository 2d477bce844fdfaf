"""The jsii kernel's node options (stacks/jsii_kernel.py): added to whatever NODE_OPTIONS holds, never over
one the user set, and in force in a real node (the preload's flag is checked on a hot WebAssembly function,
against a run without it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stacks import jsii_kernel
from stacks.jsii_kernel import KERNEL_NODE_OPTIONS, kernel_node_option_table, kernel_node_options, node_options_quoted
from stacks.paths import KERNEL_PRELOAD

ALL_OPTIONS = " ".join(KERNEL_NODE_OPTIONS.values())
NODE = shutil.which("node")

# (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)), called until V8's
# dynamic tiering would have compiled it with TurboFan; %IsLiftoffFunction says which compiler's code runs.
HOT_WASM_FUNCTION = """
const bytes = new Uint8Array([0,97,115,109,1,0,0,0,1,7,1,96,2,127,127,1,127,3,2,1,0,7,7,1,3,97,100,100,0,0,10,9,1,
  7,0,32,0,32,1,106,11]);
const { add } = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports;
let sum = 0;
const start = Date.now();
while (Date.now() - start < 400) { for (let i = 0; i < 1e5; i++) sum = add(sum, 1) | 0; }
console.log(JSON.stringify({ liftoff: %IsLiftoffFunction(add) }));
"""


def test_the_options_are_added_after_the_users_options():
    environ = {"NODE_OPTIONS": "--max-http-header-size=16384"}
    kernel_node_options(environ)
    assert environ["NODE_OPTIONS"] == f"--max-http-header-size=16384 {ALL_OPTIONS}"
    kernel_node_options(environ)
    assert environ["NODE_OPTIONS"] == f"--max-http-header-size=16384 {ALL_OPTIONS}", "a second call adds nothing"


def test_a_preload_path_node_must_unescape_is_still_added_once(monkeypatch):
    odd = Path('/opt/a b"c\\d/kernel_preload.cjs')
    monkeypatch.setattr(jsii_kernel, "KERNEL_NODE_OPTIONS", kernel_node_option_table(odd))
    environ: dict = {}
    kernel_node_options(environ)
    kernel_node_options(environ)
    assert environ == {"NODE_OPTIONS": '--v8-pool-size=0 --require "/opt/a b\\"c\\\\d/kernel_preload.cjs"'}


def test_a_pool_size_the_user_set_is_kept_and_the_preload_still_added():
    environ = {"NODE_OPTIONS": "--v8-pool-size=4"}
    kernel_node_options(environ)
    assert environ == {"NODE_OPTIONS": f"--v8-pool-size=4 --require {node_options_quoted(str(KERNEL_PRELOAD))}"}


def test_without_node_options_the_options_are_all():
    environ: dict = {}
    kernel_node_options(environ)
    assert environ == {"NODE_OPTIONS": ALL_OPTIONS}


def _node(script: Path, node_options: str | None, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "NODE_OPTIONS"}
    if node_options is not None:
        env["NODE_OPTIONS"] = node_options
    done = subprocess.run([NODE, str(script), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "unrecognized flag" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_preload_path_with_a_space_a_quote_and_a_backslash_reaches_node_whole(tmp_path):
    odd = tmp_path / 'a b"c\\d'
    odd.mkdir()
    preload = odd / "preload.cjs"
    preload.write_text("globalThis.preloaded = __filename;\n", encoding="utf-8")
    script = tmp_path / "main.js"
    script.write_text("console.log(JSON.stringify(globalThis.preloaded));\n", encoding="utf-8")
    assert json.loads(_node(script, f"--require {node_options_quoted(str(preload))}")) == str(preload)


# What the jsii runtime does (jsii-runtime.js): the process node starts spawns the kernel as a child with its own
# execArgv; the kernel's code (here the hot function) runs in that child.
JSII_RUNTIME_LIKE = """
const { spawnSync } = require("node:child_process");
const child = spawnSync(process.execPath, [...process.execArgv, "--allow-natives-syntax", process.argv[2]]);
process.stdout.write(child.stdout);
process.stderr.write(child.stderr);
process.exitCode = child.status;
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_with_the_kernel_options_a_hot_wasm_function_stays_on_liftoff_and_without_them_tiers_up(tmp_path):
    script = tmp_path / "hot_wasm.js"
    script.write_text(HOT_WASM_FUNCTION, encoding="utf-8")
    runtime = tmp_path / "runtime.js"
    runtime.write_text(JSII_RUNTIME_LIKE, encoding="utf-8")
    environ: dict = {}
    kernel_node_options(environ)
    assert json.loads(_node(runtime, environ["NODE_OPTIONS"], str(script))) == {"liftoff": True}
    assert json.loads(_node(runtime, None, str(script))) == {"liftoff": False}, "the control run"
