"""`make deploy TARGET=local` end to end on the session's synthesized dev app."""

from __future__ import annotations

from local import deploy as deploy_local


def test_deploys_every_stack_and_reports_wiring(assemblies, capsys):
    code = deploy_local.main(["--cdk-out", assemblies["dev"].directory])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("EMULATION: deploying")
    for stack in assemblies["dev"].stacks:
        assert f"{stack.stack_name}: CREATE_COMPLETE" in out
    assert "wiring: OK" in out
    assert "not modelled by the emulator (skipped)" in out


def test_missing_assembly_is_one_line(tmp_path, capsys):
    assert deploy_local.main(["--cdk-out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run `make synth` first" in err[0]
