"""Mutation score of the config package and the training-job request builder (mutmut, one mutant at a time).

    make mutation                 # this tree -> bench/mutation.json (the `after` entry), ~2 h (2334 mutants)
    python bench/mutation.py --root <tree> --label before --output bench/mutation.json   # another tree, same config

mutmut 2.5.1 rewrites one token of the source at a time (a number moved by one, `<` for `<=`, `and` for `or`, a
string changed, ...) and runs the tests that cover the file; a mutant no test notices "survived". Version 3 only
mutates function bodies, so the class-level `setting(...)` limits this score is about would never be mutated.

The run happens in a temporary copy of the tree (mutmut edits files in place), one process, tests with `-x`. The
tests are the in-process ones: the entry-point cases that start `python app.py` per case and the synth snapshot
are left out (seconds each; the same rules are checked in-process). Survivors are listed with the reason each is
equivalent (REASONS below) or "unexplained".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS_TO_MUTATE = ("stacks/config/", "stacks/shared/job_request.py")
# Tests per mutated path (the first matching prefix wins), in stages: a stage runs only when the one before passed,
# so a mutant the fast stage kills never pays for the next one's collection (tests/synth.py starts jsii, ~2 s).
# Files a tree does not have are dropped (the base tree).
TESTS = {
    "stacks/shared/job_request.py": [["tests/stacks/shared/test_job_request.py"]],
    "stacks/config/": [
        [
            "tests/stacks/config/test_config_bounds.py",
            "tests/stacks/config/test_app_config.py",
            "tests/stacks/config/test_config_reference.py",
            "tests/stacks/config/test_aws_models.py",
            "tests/stacks/config/test_pruning_config.py",
            "tests/stacks/config/test_model_metadata.py",
            "tests/stacks/config/test_serving_properties_environment.py",
        ],
        [
            "tests/stacks/config/test_app_config_errors.py",
            "tests/stacks/config/test_serving_config_errors.py",
            "tests/stacks/config/test_environments.py",
            "tests/stacks/config/test_served_model.py",
            "tests/stacks/config/test_deploy_chain.py",
        ],
    ],
}
# The cases that start app.py as a process, and the one test that synthesizes.
DESELECT = (
    "not malformed_config_fails_with_one_line and not fails_the_entry_point and not synthesized_stacks"
    " and not chain_tool_prints and not deploy_section_changes_no_template"
)
PYTEST = "-x -q -p no:cacheprovider -p xdist.plugin -n 0 --no-header"

# (file, original line, mutated line) -> why no test can tell them apart, or which test kills it now.
REASONS: dict[tuple[str, str, str], str] = {}

HOOKS = """
import json, os
TESTS = json.loads(os.environ.get("MUTATION_TEST_COMMANDS", "{}"))


def pre_mutation(context):
    for prefix, command in TESTS.items():
        if context.filename.startswith(prefix):
            context.config.test_command = command
            return
"""


def copy_tree(root: Path, into: Path) -> None:
    """The tracked and untracked-but-not-ignored files of `root` (its working tree state), and its .venv."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = root / name
        if source.is_symlink() or not source.is_file():
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (into / ".venv").symlink_to((root / ".venv").resolve())


def test_command(copy: Path, stages: list[list[str]]) -> str:
    """One command (mutmut splits it, no shell of its own): pytest per stage, each after the previous one passed.
    Any failure exits 1: mutmut counts only exit status 1 as killed, and a mutant that breaks an import makes
    pytest exit 2 (a collection error)."""
    python = copy / ".venv" / "bin" / "python"
    runs = []
    for stage in stages:
        present = [t for t in stage if (copy / t).exists()]
        if present:
            runs.append(
                f"env -u PYTHONPATH PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest {PYTEST} "
                f"-k {shlex.quote(DESELECT)} {' '.join(present)}"
            )
    return f"sh -c {shlex.quote(' && '.join(runs) + ' || exit 1')}"


def run_mutmut(copy: Path, commands: dict[str, str], paths: tuple[str, ...]) -> float:
    (copy / "mutmut_config.py").write_text(HOOKS, encoding="utf-8")
    union = [sorted({t for stages in TESTS.values() for stage in stages for t in stage})]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
        "MUTATION_TEST_COMMANDS": json.dumps(commands),
    }
    argv = [
        sys.executable,
        "-m",
        "mutmut",
        "run",
        "--paths-to-mutate",
        ",".join(paths),
        "--tests-dir",
        "tests/",
        "--runner",
        test_command(copy, union),
        "--simple-output",
        "--no-progress",
    ]
    start = time.perf_counter()
    subprocess.run(argv, cwd=copy, env=env, check=False)
    return time.perf_counter() - start


def results(copy: Path, root: Path) -> list[dict]:
    """Every mutant of the run in `copy`: file, line number, status, the original and mutated line (the sources read
    from `root`: mutmut edits the copy's in place while it runs)."""
    from mutmut import Context, RelativeMutationID, mutate

    rows = sqlite3.connect(copy / ".mutmut-cache").execute(
        "SELECT s.filename, l.line, l.line_number, m.`index`, m.status FROM Mutant m "
        "JOIN Line l ON m.line = l.id JOIN SourceFile s ON l.sourcefile = s.id ORDER BY s.filename, l.line_number"
    )
    found = []
    for filename, line, number, index, status in rows:
        source = (root / filename).read_text(encoding="utf-8")
        context = Context(
            source=source, filename=filename, mutation_id=RelativeMutationID(line, index, number), dict_synonyms=[]
        )
        mutated, _ = mutate(context)
        lines = mutated.split("\n")
        mutated_line = lines[number] if number < len(lines) else "(the line is gone)"
        found.append(
            {
                "file": filename,
                "line": number + 1,
                "status": status,
                "original": line.strip(),
                "mutated": mutated_line.strip(),
            }
        )
    return found


def summary(mutants: list[dict], seconds: float, commands: dict[str, str], paths: tuple[str, ...]) -> dict:
    count = {s: sum(m["status"] == s for m in mutants) for s in sorted({m["status"] for m in mutants})}
    killed = sum(count.get(s, 0) for s in ("ok_killed", "ok_suspicious", "bad_timeout"))
    survivors = []
    for m in mutants:
        if m["status"] != "bad_survived":
            continue
        reason = REASONS.get((m["file"], m["original"], m["mutated"]), "unexplained")
        survivors.append({**{k: m[k] for k in ("file", "line", "original", "mutated")}, "reason": reason})
    return {
        "mutmut": "2.5.1",
        "paths": list(paths),
        "test_commands": commands,
        "generated": len(mutants),
        "killed": killed,
        "survived": count.get("bad_survived", 0),
        "statuses": count,
        "score_percent": round(100 * killed / len(mutants), 1) if mutants else None,
        "seconds": round(seconds),
        "survivors": survivors,
    }


def record(entry: dict, output: Path | None, label: str) -> None:
    """Prints the entry without its survivors and stores it as `label` in `output`, keeping the other entries."""
    print(json.dumps({k: v for k, v in entry.items() if k != "survivors"}, indent=2))
    if output:
        recorded = json.loads(output.read_text()) if output.exists() else {}
        recorded[label] = entry
        output.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to mutate (default: this one)")
    parser.add_argument("--label", default="after", help="the entry of --output to write (before, after)")
    parser.add_argument("--output", type=Path, help="JSON file to update with this run's entry")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    parser.add_argument("--paths", nargs="+", default=PATHS_TO_MUTATE, help="what to mutate (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        copy = args.keep or Path(tmp)
        copy.mkdir(parents=True, exist_ok=True)
        copy_tree(args.root.resolve(), copy)
        commands = {prefix: test_command(copy, tests) for prefix, tests in TESTS.items()}
        paths = tuple(args.paths)
        seconds = run_mutmut(copy, commands, paths)
        shown = {p: c.replace(str(copy), "<copy>") for p, c in commands.items()}
        entry = summary(results(copy, args.root.resolve()), seconds, shown, paths)
    entry["source"] = subprocess.run(
        ["git", "-C", str(args.root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    record(entry, args.output, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
