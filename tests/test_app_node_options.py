"""app.py's jsii kernel option: added to whatever NODE_OPTIONS holds, never over a pool size the user set."""

from __future__ import annotations

from app import KERNEL_NODE_OPTION, kernel_node_options


def test_the_option_is_added_after_the_users_options():
    environ = {"NODE_OPTIONS": "--max-http-header-size=16384"}
    kernel_node_options(environ)
    assert environ["NODE_OPTIONS"] == f"--max-http-header-size=16384 {KERNEL_NODE_OPTION}"
    kernel_node_options(environ)
    assert environ["NODE_OPTIONS"].count("--v8-pool-size") == 1, "a second call adds nothing"


def test_a_pool_size_the_user_set_is_kept():
    environ = {"NODE_OPTIONS": "--v8-pool-size=4"}
    kernel_node_options(environ)
    assert environ == {"NODE_OPTIONS": "--v8-pool-size=4"}


def test_without_node_options_the_option_is_all():
    environ: dict = {}
    kernel_node_options(environ)
    assert environ == {"NODE_OPTIONS": KERNEL_NODE_OPTION}
