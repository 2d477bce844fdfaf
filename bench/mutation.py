"""Mutation score of the config package and the training-job request builder (mutmut 2.5.1's mutants).

    make mutation                          # every mutant, one per core -> bench/mutation.json's `after` entry
    make mutation-sample SIZE=36 SEED=39   # a seeded sample of the same mutants -> the `sample` entry
    python bench/mutation.py --root <tree> --label before --output bench/mutation.json   # another tree

mutmut 2.5.1 lists every mutant of a file (`list_mutations`: a number moved by one, `<` for `<=`, `and` for `or`, a
string changed, ...) and writes one (`mutate`). Version 3 only mutates function bodies, so the class-level
`setting(...)` limits this score is about would never be mutated. `mutmut run` runs one mutant at a time on one
core; this runner applies the same mutants in `--jobs` copies of the tree at once and runs the tests that cover
the mutated file, in stages, `-x`. A mutant no stage notices "survived"; one whose stage exceeds the timeout is
counted killed, as mutmut counts it. `--progress` keeps each result as it finishes; a rerun with the same file
runs only the mutants it does not hold yet.

The tests are the in-process ones: the entry-point cases that start `python app.py` per case and the synth snapshot
are left out (seconds each; the same rules are checked in-process). Survivors are listed with the reason each is
equivalent (REASONS below) or "unexplained".
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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
PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin", "-n", "0", "--no-header"]
# A stage passes in about 10 s; ten minutes means a mutant that loops (mutmut's rule: ten times the baseline).
STAGE_TIMEOUT_S = 600

# (file, original line, mutated line) -> why no test can tell them apart, or which test kills it now.
# stacks/shared/job_request.py and stacks/config/ except model_lock.py and served_model.py:
REQUEST_AND_CONFIG_REASONS: dict[tuple[str, str, str], str] = {
    (
        "stacks/shared/job_request.py",
        "max_wait_seconds: int | None = None  # set: managed spot training",
        "max_wait_seconds: int & None = None  # set: managed spot training",
    ): "an annotation: `from __future__ import annotations` keeps it a string nobody evaluates",
    (
        "stacks/shared/job_request.py",
        "checkpoint_s3_uri: str | Ref | None = None",
        "checkpoint_s3_uri: str & Ref | None = None",
    ): "an annotation: `from __future__ import annotations` keeps it a string nobody evaluates",
    (
        "stacks/shared/job_request.py",
        "checkpoint_s3_uri: str | Ref | None = None",
        "checkpoint_s3_uri: str | Ref & None = None",
    ): "an annotation: `from __future__ import annotations` keeps it a string nobody evaluates",
    (
        "stacks/shared/job_request.py",
        "environment: Mapping[str, str] | None = None  # the container's environment (None: the image's own)",
        "environment: Mapping[str, str] & None = None  # the container's environment (None: the image's own)",
    ): "an annotation: `from __future__ import annotations` keeps it a string nobody evaluates",
    (
        "stacks/shared/job_request.py",
        "subnet_ids: Sequence[str] = ()",
        "subnet_ids: Sequence[str] = None",
    ): "None and () are both falsy and the field is only ever truth-tested",
    (
        "stacks/shared/job_request.py",
        "security_group_ids: Sequence[str] = ()",
        "security_group_ids: Sequence[str] = None",
    ): "None and () are both falsy and the field is only ever truth-tested",
    (
        "stacks/shared/job_request.py",
        "tags: Mapping[str, str] = field(default_factory=dict)",
        "tags: Mapping[str, str] = None",
    ): "None and {} are both falsy and the field is only ever truth-tested",
    (
        "stacks/shared/job_request.py",
        "container_entrypoint: Sequence[str] = ()  # set: run the image's own program instead of script mode",
        "container_entrypoint: Sequence[str] = None  # set: run the image's own program instead of script mode",
    ): "None and () are both falsy and the field is only ever truth-tested",
    (
        "stacks/shared/job_request.py",
        "container_arguments: Sequence[str] = ()",
        "container_arguments: Sequence[str] = None",
    ): "read only with an entrypoint set, and an entrypoint alone sends ContainerArguments [] (botocore: min 1)",
    (
        "stacks/config/app_config.py",
        "backend = self.serving.backend if self.serving is not None else None",
        "backend = None",
    ): "every backend has a compiled_folder: the line runs only without serving, where backend is None anyway",
    (
        "stacks/config/aws_limits.py",
        "documented_max: int | None = None",
        "documented_max: int & None = None",
    ): "an annotation: `from __future__ import annotations` keeps it a string nobody evaluates",
    (
        "stacks/config/aws_limits.py",
        'rule: str = ""  # a documented rule that is not a range (CloudWatch periods)',
        "rule: str = None  # a documented rule that is not a range (CloudWatch periods)",
    ): '"" and None are both falsy and the field is only ever truth-tested',
    (
        "stacks/config/aws_limits.py",
        'citation: str = ""',
        "citation: str = None",
    ): '"" and None are both falsy and the field is only ever truth-tested',
    (
        "stacks/config/aws_limits.py",
        "@cache",
        '"""The botocore shape `field.path` ends at (a list\'s own shape when the path ends at a list member)."""',
    ): "@cache removed: memoization only, every call returns an equal value",
    (
        "stacks/config/aws_limits.py",
        "@cache",
        '"""(min, max) in the API\'s unit: botocore\'s, narrowed by what AWS documents."""',
    ): "@cache removed: memoization only, every call returns an equal value",
    (
        "stacks/config/aws_models.py",
        "@cache",
        "\"\"\"The service model of `service` (botocore's name: 'sagemaker', 'cloudwatch', 'application-autoscaling', ...).\"\"\"",  # noqa: E501 - the mutant as mutmut writes it
    ): "@cache removed: memoization only, every call returns an equal value",
    (
        "stacks/config/instance_types.py",
        "@cache",
        '"""The enum of `shape` in botocore\'s SageMaker model."""',
    ): "@cache removed: memoization only, every call returns an equal value",
    (
        "stacks/config/deploy.py",
        'known = ", ".join(deployed) or "none"',
        'known = ", ".join(deployed) or "XXnoneXX"',
    ): "unreachable: the loop that reaches it runs only when some environment deploys, so the list is never empty",
    (
        "stacks/config/yaml_file.py",
        "def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:",
        "def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = True) -> dict:",
    ): "deep only changes when nested nodes are built: the same mapping for any document without a recursive alias",
    (
        "stacks/config/pruning.py",
        'if self.search_space == "per_layer" and 1 + 2 * self.num_layers > MAX_TUNED_PARAMETERS:',
        'if self.search_space == "per_layer" and 2 + 2 * self.num_layers > MAX_TUNED_PARAMETERS:',
    ): "1 + 2 x n is odd and the bound (30) even: > 30, >= 30 and 2 + 2 x n > 30 agree for every integer n",
    (
        "stacks/config/pruning.py",
        'if self.search_space == "per_layer" and 1 + 2 * self.num_layers > MAX_TUNED_PARAMETERS:',
        'if self.search_space == "per_layer" and 1 + 2 * self.num_layers >= MAX_TUNED_PARAMETERS:',
    ): "1 + 2 x n is odd and the bound (30) even: > 30, >= 30 and 2 + 2 x n > 30 agree for every integer n",
    (
        "stacks/config/pruning.py",
        'fail(problem.split(" ", 1)[0], f"{problem} ({model}): type the model\'s dimensions")',
        'fail(problem.split(" ", 2)[0], f"{problem} ({model}): type the model\'s dimensions")',
    ): "the first word of a split is the same for any maxsplit of 1 or more",
    (
        "stacks/config/rehearsal.py",
        'aspect: Aspect = setting(hint="backend, model_family or compile_path")',
        'aspect: Aspect = setting(hint="XXbackend, model_family or compile_pathXX")',
    ): "a Literal's errors list its allowed values; the hint is shown for strings and numbers only",
    (
        "stacks/config/schema.py",
        'T = TypeVar("T")',
        'T = TypeVar("XXTXX")',
    ): "a TypeVar's name: only typing's repr shows it",
    (
        "stacks/config/schema.py",
        'T = TypeVar("T")',
        "T = None",
    ): "T appears only in annotations, strings under `from __future__ import annotations`",
    (
        "stacks/config/schema.py",
        "close = difflib.get_close_matches(str(key), fields, n=1)",
        "close = difflib.get_close_matches(str(key), fields, n=2)",
    ): "get_close_matches sorts best first: close[0] is the same for n=1 and n=2",
    (
        "stacks/config/serving.py",
        'return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)',
        'return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "XXXX".join(items)',
    ): "join of at most one item puts no separator in",
    (
        "stacks/config/training.py",
        'fsdp = hyperparameters.get("fsdp", "false")',
        'fsdp = hyperparameters.get("fsdp", "XXfalseXX")',
    ): "parse_bool counts a value train.py rejects as false, and the default is never shown (only a true one is)",
}

# stacks/config/model_lock.py and stacks/config/served_model.py:
NO_UNCOMPILED_BACKEND = "no shipped backend has compiled_folder None (both name one): the refusal is unreachable"
EVERY_BACKEND_SERVES_COMPILED = "both shipped backends set serves_compiled=True: the isolated-graph rule never runs"
SLASHED_MATCH = "a folder match begins and ends at a '/', so 'XX' around the prefix changes no match"
LOCK_REASONS: dict[tuple[str, str, str], str] = {
    (
        "stacks/config/served_model.py",
        'lock_source, "compiled_prefix", f"{version}: backend {spec.name} serves no compiled model: set it to null"',
        'lock_source, "XXcompiled_prefixXX", f"{version}: backend {spec.name} serves no compiled model: set it to null"',  # noqa: E501
    ): NO_UNCOMPILED_BACKEND,
    (
        "stacks/config/served_model.py",
        'lock_source, "compiled_prefix", f"{version}: backend {spec.name} serves no compiled model: set it to null"',
        'lock_source, "compiled_prefix", f"XX{version}: backend {spec.name} serves no compiled model: set it to nullXX"',  # noqa: E501
    ): NO_UNCOMPILED_BACKEND,
    (
        "stacks/config/served_model.py",
        'if f"/{folder}" not in f"/{compiled}":',
        'if f"/{folder}" not in f"XX/{compiled}XX":',
    ): SLASHED_MATCH,
    (
        "stacks/config/served_model.py",
        "if config.network.isolated and not spec.serves_compiled and not compiled.startswith(lock.model_prefix):",
        "if config.network.isolated and not spec.serves_compiled and  compiled.startswith(lock.model_prefix):",
    ): EVERY_BACKEND_SERVES_COMPILED,
    (
        "stacks/config/served_model.py",
        '"compiled_prefix",',
        '"XXcompiled_prefixXX",',
    ): EVERY_BACKEND_SERVES_COMPILED,
    (
        "stacks/config/served_model.py",
        'f"{version}: {compiled} is not under model_prefix {lock.model_prefix}; with network.isolated: true "',
        'f"XX{version}: {compiled} is not under model_prefix {lock.model_prefix}; with network.isolated: true XX"',
    ): EVERY_BACKEND_SERVES_COMPILED,
    (
        "stacks/config/served_model.py",
        'f"({env}) the container reads only the mounted model prefix: compile the graph under it",',
        'f"XX({env}) the container reads only the mounted model prefix: compile the graph under itXX",',
    ): EVERY_BACKEND_SERVES_COMPILED,
    (
        "stacks/config/served_model.py",
        'DTYPE_OF_AMP = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}',
        'DTYPE_OF_AMP = {"f32": "fp32", "f16": "fp16", "XXbf16XX": "bf16"}',
    ): "the lookup falls back to the amp name itself, which for bf16 is already the LMI dtype",
}

REASONS = {**REQUEST_AND_CONFIG_REASONS, **LOCK_REASONS}


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


def every_mutant(root: Path) -> list[tuple[str, object]]:
    """(file, mutation id) of every mutant mutmut would run, in file and line order."""
    from mutmut import Context, list_mutations

    files = []
    for path in PATHS_TO_MUTATE:
        files += sorted((root / path).rglob("*.py")) if path.endswith("/") else [root / path]
    found = []
    for file in files:
        name = str(file.relative_to(root))
        context = Context(source=file.read_text(encoding="utf-8"), filename=name, dict_synonyms=[])
        found += [(name, mutation_id) for mutation_id in list_mutations(context)]
    return found


def key(name: str, mutation_id) -> str:
    return f"{name}:{mutation_id.line_number + 1}:{mutation_id.index}"


def stages_for(name: str, copy: Path) -> list[list[str]]:
    prefix = next(p for p in TESTS if name.startswith(p))
    return [[t for t in stage if (copy / t).exists()] for stage in TESTS[prefix]]


def killed_by_a_stage(copy: Path, name: str) -> bool:
    """The stages in order, the next one only while the mutant survives. Any failure kills it, a collection error
    (a mutant that breaks an import, exit 2) included."""
    for stage in filter(None, stages_for(name, copy)):
        argv = [str(copy / ".venv/bin/python"), "-m", "pytest", *PYTEST, "-k", DESELECT, *stage]
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"}
        run = subprocess.run(argv, cwd=copy, env=env, capture_output=True, timeout=STAGE_TIMEOUT_S)
        if run.returncode != 0:
            return True
    return False


def run_one(copy: Path, name: str, mutation_id) -> dict:
    """Writes the mutant into `copy`, runs its stages and puts the original back."""
    from mutmut import Context, mutate

    target = copy / name
    original = target.read_text(encoding="utf-8")
    context = Context(source=original, filename=name, mutation_id=mutation_id, dict_synonyms=[])
    mutated, _ = mutate(context)
    target.write_text(mutated, encoding="utf-8")
    try:
        try:
            status = "ok_killed" if killed_by_a_stage(copy, name) else "bad_survived"
        except subprocess.TimeoutExpired:
            status = "bad_timeout"
    finally:
        target.write_text(original, encoding="utf-8")
    number = mutation_id.line_number
    lines = mutated.split("\n")
    return {
        "key": key(name, mutation_id),
        "file": name,
        "line": number + 1,
        "status": status,
        "original": original.split("\n")[number].strip(),
        "mutated": lines[number].strip() if number < len(lines) else "(the line is gone)",
    }


def already_run(progress: Path | None, root: Path) -> dict[str, dict]:
    """The results a previous run kept, refused when a line they name has changed since."""
    if not progress or not progress.exists():
        return {}
    rows = [json.loads(line) for line in progress.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        line = (root / row["file"]).read_text(encoding="utf-8").split("\n")[row["line"] - 1].strip()
        if line != row["original"]:
            raise SystemExit(f"{progress}: {row['file']}:{row['line']} changed since that run; use a new file")
    return {row["key"]: row for row in rows}


def run_all(root: Path, mutants: list, jobs: int, progress: Path | None, *, recheck: bool = False) -> list[dict]:
    """Every mutant in `mutants`, `jobs` at a time, each job in a copy of its own; with `recheck`, the survivors
    of the progress file run again (after a test was added for them)."""
    done = already_run(progress, root)
    if recheck:
        done = {k: row for k, row in done.items() if row["status"] != "bad_survived"}
    todo = [m for m in mutants if key(*m) not in done]
    print(f"{len(mutants)} mutants, {len(done)} already run, {len(todo)} to run on {jobs} jobs", flush=True)
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        copies: queue.Queue[Path] = queue.Queue()
        for n in range(jobs):
            copy_tree(root, Path(tmp) / str(n))
            copies.put(Path(tmp) / str(n))

        def in_a_free_copy(mutant) -> dict:
            copy = copies.get()
            try:
                row = run_one(copy, *mutant)
            finally:
                copies.put(copy)
            if progress:
                with progress.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(row) + "\n")
            return row

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            ran = {row["key"]: row for row in pool.map(in_a_free_copy, todo)}
    return [done.get(key(*m)) or ran[key(*m)] for m in mutants]


def summary(rows: list[dict], population: list, method: str, seconds: float, jobs: int) -> dict:
    killed = sum(r["status"] != "bad_survived" for r in rows)
    files = sorted({p[0] for p in population})
    return {
        "mutmut": "2.5.1",
        "method": method,
        "paths": list(PATHS_TO_MUTATE),
        "tests": TESTS,
        "population": len(population),
        "per_file_population": {f: sum(p[0] == f for p in population) for f in files},
        "generated": len(rows),
        "killed": killed,
        "timeouts": sum(r["status"] == "bad_timeout" for r in rows),
        "survived": len(rows) - killed,
        "score_percent": round(100 * killed / len(rows), 1) if rows else None,
        "seconds": round(seconds),
        "jobs": jobs,
        "per_file": {
            f: {"run": sum(r["file"] == f for r in rows), "survived": sum(r["file"] == f for r in survivors(rows))}
            for f in sorted({r["file"] for r in rows})
        },
        "survivors": [
            {**{k: r[k] for k in ("file", "line", "original", "mutated")}, "reason": reason(r)} for r in survivors(rows)
        ],
    }


def survivors(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "bad_survived"]


def reason(row: dict) -> str:
    return REASONS.get((row["file"], row["original"], row["mutated"]), "unexplained")


def record(entry: dict, output: Path | None, label: str) -> None:
    """Prints the entry without its survivors and stores it as `label` in `output`, keeping the other entries."""
    print(json.dumps({k: v for k, v in entry.items() if k not in ("survivors", "tests")}, indent=2))
    if output:
        recorded = json.loads(output.read_text()) if output.exists() else {}
        recorded[label] = entry
        output.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to mutate (default: this one)")
    parser.add_argument("--label", default="after", help="the entry of --output to write (before, after, sample)")
    parser.add_argument("--output", type=Path, help="JSON file to update with this run's entry")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy")
    parser.add_argument("--size", type=int, help="run a seeded sample of this many mutants instead of all")
    parser.add_argument("--seed", type=int, default=39, help="the sample's random.Random seed")
    parser.add_argument("--progress", type=Path, help="results as they finish (JSON lines); a rerun resumes from it")
    parser.add_argument("--files", nargs="+", help="only the mutants of these files (paths from the root)")
    parser.add_argument("--recheck-survivors", action="store_true", help="run the progress file's survivors again")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    population = every_mutant(root)
    method = f"every mutant of {len(population)}"
    chosen = population
    if args.size is not None:
        picked = random.Random(args.seed).sample(range(len(population)), min(args.size, len(population)))
        chosen = [population[i] for i in sorted(picked)]
        method = f"random.Random({args.seed}).sample of {len(chosen)} from all {len(population)} mutants"
    if args.files:
        chosen = [m for m in chosen if m[0] in args.files]
    start = time.perf_counter()
    rows = run_all(root, chosen, args.jobs, args.progress, recheck=args.recheck_survivors)
    entry = summary(rows, population, method, time.perf_counter() - start, args.jobs)
    entry["source"] = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    record(entry, args.output, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
