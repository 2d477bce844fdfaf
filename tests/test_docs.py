"""The README and every docs/ page name only paths, make targets and scripts that exist; the README stays a map.

Whoever moves a file finds every page that still names the old place in one failing message, page by page.

What counts, on README.md and docs/*.md (SECURITY.md and the bench READMEs too: their text follows the same convention):

- A repository path is a whitespace-separated token (in prose, `code spans` or code blocks; quotes, brackets and
  trailing punctuation stripped) with a ``/`` whose first segment is a top-level entry of the repository that git
  keeps (an entry of the root that .gitignore does not match): ``stacks/serving/stack.py``, ``local/emulator/``,
  ``config/dev.yaml``. Its text is relative to the repository root, on every page. Not paths: tokens with a
  placeholder or glob (``<``, ``>``, ``*``, ``?``, ``{``, ``$``, ``...``), URLs (``://``), absolute paths (the emulated
  ``/opt/ml``), and tokens whose first segment is no top-level entry: S3 keys (``models/<job>/lineage.json``,
  ``datasets/``), build outputs (``build/``, ``cdk.out/``), paths inside a job's folder (``sample_data/``).
- A make target is the first word after ``make`` in a code span or a code block that is not an option or a
  ``NAME=value`` assignment; it must be a rule of the Makefile (variables in rule names expanded).
- A script is the first argument of ``python``/``python3``/``<venv>/bin/python`` that is not an option
  (``-m``, ``-c``); it must be a file, relative to the repository root or to where a ``cd`` earlier in the same code
  block went. Shell comments (`` #`` to the end of a code line) are no commands.
- A relative markdown link or image target (no scheme, not ``#`` alone) resolves from the page's folder, as GitHub
  resolves it; its ``#anchor``, when there is one, is a heading of the target page (GitHub's slugs).
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 250
PAGES = [
    README,
    ROOT / "SECURITY.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "bench").glob("README*.md")),
]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
LINK_TARGET = re.compile(r"\]\([^)\s]+\)")
NOT_A_PATH = re.compile(r"[<>*?{}$]|\.\.\.|://")
STRIP = "`'\"()[],;:.!|=" + "\u00b7"
MAKE = re.compile(r"(?:^|[\s;&|(`])make\s+([^\s;&|)`]+(?:\s+[^\s;&|)`]+)*)")
SHELL_COMMENT = re.compile(r"(^|\s)#.*$")
CD = re.compile(r"\s*cd\s+(\S+)")
PYTHON = re.compile(r"(?:^|[\s;&|(`\"'])(?:\S*/)?python3?\s+(\S+)")


def _ignored(name: str) -> bool:
    patterns = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()]
    return name == ".git" or any(p and not p.startswith("#") and fnmatch.fnmatch(name, p) for p in patterns)


TOP_LEVEL = {p.name for p in ROOT.iterdir() if not _ignored(p.name)}


def _page(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _code(text: str) -> list[str | None]:
    """The page's code: each code span, and each line of a fenced or indented code block without its shell
    comment; None where a block starts or ends (a `cd` in a block holds until then)."""
    chunks, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            chunks.append(None)
        elif fenced or line.startswith("    ") and not line.lstrip().startswith(("-", "|")):
            chunks.append(SHELL_COMMENT.sub("", line))
        else:
            chunks.extend(CODE_SPAN.findall(line))
    return chunks


def repository_paths(text: str) -> set[str]:
    """Every token of the page that names a repository path (see the module docstring)."""
    found = set()
    for raw in re.split(
        r"[\s`]+", LINK_TARGET.sub("]", text)
    ):  # link targets are relative to their page: checked below
        token = raw.strip(STRIP)
        if "/" not in token or NOT_A_PATH.search(token) or token.startswith("/"):
            continue
        if token.split("/", 1)[0] in TOP_LEVEL:
            found.add(token)
    return found


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_]+)\s*[:?]?=\s*(.*)$", text, flags=re.M))
    targets = set()
    for line in text.splitlines():
        rule = re.match(r"^([^\s#:=][^:=]*?):(?!=)", line)
        if rule:
            names = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m[1], m[0]), rule[1])
            names = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m[1], m[0]), names)
            targets.update(names.split())
    return targets - {".PHONY"}


def make_targets(text: str) -> set[str]:
    """The target of every `make ...` command in the page's code."""
    found = set()
    for chunk in filter(None, _code(text)):
        for args in MAKE.findall(chunk):
            words = [w for w in args.split() if "=" not in w and not w.startswith("-")]
            if words and not NOT_A_PATH.search(words[0]) and not words[0].startswith(("[", '"')):
                found.add(words[0])
    return found


def python_scripts(text: str) -> set[str]:
    """The script of every `python <file>` command in the page's code, relative to the root (after a `cd` in
    the same code block, relative to where it went)."""
    found, cwd = set(), "."
    for chunk in _code(text):
        if chunk is None:
            cwd = "."
            continue
        for command in re.split(r"&&|\|\||;", chunk):
            if cd := CD.match(command):
                cwd = os.path.normpath(os.path.join(cwd, cd[1]))
            for arg in PYTHON.findall(command):
                arg = arg.strip("`'\")")
                if not arg.startswith("-") and not NOT_A_PATH.search(arg):
                    found.add(os.path.normpath(os.path.join(cwd, arg)))
    return found


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text, fenced, found = path.read_text(), False, set()
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(_slug(line.lstrip("#")))
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve()
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    return broken


def _missing(names_of, exists) -> dict[str, list[str]]:
    """Per page, the names it gives that do not exist: all of them, so one run lists every fix."""
    missing = {}
    for page in PAGES:
        if gone := sorted(name for name in names_of(page) if not exists(name)):
            missing[_page(page)] = gone
    return missing


def _report(missing: dict[str, list[str]], what: str) -> str:
    lines = [f"{what} that do not exist (fix them all in one go):"]
    lines += [f"  {page}: {', '.join(names)}" for page, names in sorted(missing.items())]
    return "\n".join(lines)


def test_named_paths_exist():
    missing = _missing(lambda page: repository_paths(page.read_text()), lambda path: (ROOT / path).exists())
    assert not missing, _report(missing, "repository paths named by the docs")


def test_make_targets_exist():
    missing = _missing(lambda page: make_targets(page.read_text()), _makefile_targets().__contains__)
    assert not missing, _report(missing, "make targets named by the docs (not rules of the Makefile)")


def test_python_scripts_exist():
    missing = _missing(lambda page: python_scripts(page.read_text()), lambda script: (ROOT / script).is_file())
    assert not missing, _report(missing, "scripts of `python <file>` commands in the docs")


def test_relative_links_resolve():
    missing = _missing(broken_links, lambda _broken: False)
    assert not missing, _report(missing, "relative links in the docs")


def test_readme_is_a_map():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md: {len(lines)} lines; move reference material to docs/"
    linked = {target.partition("#")[0] for target in LINK.findall(README.read_text())}
    unlinked = [_page(p) for p in PAGES if p != README and _page(p) not in linked]
    assert not unlinked, f"README.md links no page of: {', '.join(unlinked)}"


def test_the_checks_see_what_they_check():
    """Each extractor finds its kind on the README (a silent regex would pass every page) and skips look-alikes."""
    text = README.read_text()
    assert repository_paths(text) and make_targets(text) and python_scripts(text) and LINK.findall(text)
    look_alikes = "`models/<job>/lineage.json` s3://b/datasets/x `config/*.yaml` /opt/ml/model build/x `sample_data/`"
    assert repository_paths(look_alikes) == set()
    assert make_targets("```\nmake deploy ENV=local KEEP=1\nmake .venv-vllm/.installed\n```") == {
        "deploy",
        ".venv-vllm/.installed",
    }
    assert python_scripts("`python -m vllm.x` `.venv/bin/python bench/qlora_memory.py --steps 2`") == {
        "bench/qlora_memory.py"
    }
    assert python_scripts("```\nexport A=1; cd training_code/nas && ../../.venv/bin/python train.py\n```") == {
        "training_code/nas/train.py"
    }
    assert _slug("Isolated mode (no internet; on in prod)") == "isolated-mode-no-internet-on-in-prod"
