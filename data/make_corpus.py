"""Generate data/corpus.txt: English prose paragraphs from the documentation that ships with installed packages.

The text a tiny base model is pretrained on (training_code/qlora/finetune/pretrain.py) before the QLoRA demo
fine-tunes it on data/instructions.jsonl: docstrings of Python's standard library (PSF License), of the ML
libraries in requirements (scikit-learn BSD-3, PyTorch BSD-3, transformers/peft/datasets Apache-2.0) and the
SageMaker API reference in botocore (Apache-2.0). A real base model has read text like this; none of it is
the instruction data, so the fine-tune has something to add (the data's answers, in its words). Offline and
licence-clean. Run once and commit the output (`.venv/bin/python data/make_corpus.py`); the pretraining reads
the committed file, never this script. Deterministic for the same installed versions (the committed file:
CPython 3.11, scikit-learn 1.9.1, torch 2.13.0, transformers 5.23.0, peft 0.21.2, botocore 1.44.8).
"""

from __future__ import annotations

import gzip
import html
import importlib
import inspect
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus.txt"

# Modules with many prose docstrings; the order is the order of the corpus.
STDLIB = [
    "builtins", "abc", "argparse", "array", "ast", "asyncio", "base64", "bisect", "bz2", "calendar", "cmath",
    "codecs", "collections", "concurrent.futures", "configparser", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email", "enum", "fileinput", "fractions", "functools", "gc", "gettext",
    "glob", "gzip", "hashlib", "heapq", "html", "http.client", "inspect", "io", "ipaddress", "itertools", "json",
    "locale", "logging", "lzma", "math", "multiprocessing", "numbers", "operator", "os", "pathlib", "pickle",
    "queue", "random", "re", "secrets", "shutil", "socket", "sqlite3", "ssl", "statistics", "string", "struct",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "time", "traceback", "typing", "unittest",
    "urllib.parse", "uuid", "warnings", "weakref", "zipfile", "zlib",
]  # fmt: skip
ML_LIBRARIES = [
    "sklearn.linear_model", "sklearn.ensemble", "sklearn.tree", "sklearn.neighbors", "sklearn.svm",
    "sklearn.cluster", "sklearn.decomposition", "sklearn.model_selection", "sklearn.metrics",
    "sklearn.preprocessing", "sklearn.pipeline", "sklearn.feature_extraction.text", "sklearn.neural_network",
    "torch.nn", "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data", "torch.distributed",
    "transformers", "transformers.trainer", "transformers.training_args", "transformers.generation",
    "peft", "datasets",
]  # fmt: skip
BUDGETS = {"stdlib": 130_000, "ml": 130_000, "sagemaker": 60_000}  # bytes per source

PROSE = re.compile(r"^[A-Z][A-Za-z0-9 ,;:'\"().\-/%]+[.]$")
MARKUP = re.compile(r"`+|:[a-z]+:|\*\*?|\[\[|\]\]")


def docstrings(module_name: str) -> Iterator[str]:
    """The module's docstring, then those of its public classes, functions and methods, sorted by name."""
    module = importlib.import_module(module_name)
    yield inspect.getdoc(module) or ""
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or not (inspect.isclass(value) or callable(value)):
            continue
        yield inspect.getdoc(value) or ""
        if inspect.isclass(value):
            for key, member in sorted(vars(value).items()):
                if not key.startswith("_") and callable(member):
                    yield inspect.getdoc(member) or ""


def sagemaker_docs() -> Iterator[str]:
    """The documentation strings of botocore's SageMaker API model, HTML paragraphs as plain text."""
    import botocore

    models = sorted((Path(botocore.__file__).parent / "data" / "sagemaker").glob("*/service-2.json.gz"))
    model = json.loads(gzip.decompress(models[-1].read_bytes()))
    for section in ("operations", "shapes"):
        for _name, item in sorted(model[section].items()):
            for doc in [item.get("documentation", "")] + [
                m.get("documentation", "") for m in item.get("members", {}).values()
            ]:
                for paragraph in re.findall(r"<p>(.*?)</p>", doc, flags=re.S):
                    yield html.unescape(re.sub(r"<[^>]+>", "", paragraph))


def prose_paragraphs(doc: str) -> list[str]:
    """Paragraphs that read as sentences: no code, no tables, no argument lists."""
    kept = []
    for block in re.split(r"\n\s*\n", doc):
        lines = block.splitlines()
        if any(line.startswith((" ", ">>>", "-", "*", "..")) for line in lines):
            continue
        text = re.sub(r"\s+", " ", MARKUP.sub("", " ".join(line.strip() for line in lines))).strip()
        words = text.split()
        alphabetic = sum(word.strip(",.;:()").isalpha() for word in words)
        if len(words) >= 8 and PROSE.match(text) and "()" not in text and alphabetic > 0.75 * len(words):
            kept.append(text)
    return kept


def source_docs(source: str) -> Iterator[str]:
    if source == "sagemaker":
        yield from sagemaker_docs()
        return
    for module_name in STDLIB if source == "stdlib" else ML_LIBRARIES:
        yield from docstrings(module_name)


def corpus() -> list[str]:
    """New paragraphs from each source in turn, up to the source's byte budget."""
    seen: set[str] = set()
    paragraphs = []
    for source, budget in BUDGETS.items():
        size = 0
        for doc in source_docs(source):
            for paragraph in prose_paragraphs(doc):
                if paragraph in seen or size + len(paragraph.encode()) + 2 > budget:
                    continue
                size += len(paragraph.encode()) + 2
                seen.add(paragraph)
                paragraphs.append(paragraph)
    return paragraphs


def main() -> None:
    warnings.simplefilter("ignore")  # deprecation noise from importing many modules
    paragraphs = corpus()
    OUT.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    print(f"{len(paragraphs)} paragraphs, {OUT.stat().st_size} bytes written to {OUT}")


if __name__ == "__main__":
    main()
