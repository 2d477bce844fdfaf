"""Peak memory and library versions for the training report."""

from __future__ import annotations

import platform
import resource
import sys
from importlib import metadata

REPORTED_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "bitsandbytes",
    "accelerate",
    "datasets",
    "trl",
    "safetensors",
    "tokenizers",
)


def peak_rss_gb() -> float:
    """High-water mark of this process's resident memory (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def peak_gpu_gb() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / 1024**3


def peak_gpu_reserved_gb() -> float | None:
    """What the caching allocator held at its peak: the figure that decides whether a job fits a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_reserved() / 1024**3


def peak_memory_gb() -> float:
    """GPU peak when training on a GPU, else the process's peak RSS."""
    gpu = peak_gpu_gb()
    return gpu if gpu is not None else peak_rss_gb()


def versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for package in REPORTED_PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found
