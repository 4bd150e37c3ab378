"""Where a number came from (code version, libraries, machine) and whether it compares with others."""

from __future__ import annotations

import platform
import subprocess
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

_LIBRARIES = ("torch", "numpy", "tokenizers", "sentencepiece", "pandas", "scipy")


@lru_cache(maxsize=1)
def git_commit() -> dict:
    """The commit of the toolkit's checkout and whether it had uncommitted changes."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit or "unknown", "dirty": bool(status) if status is not None else None}


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            continue
    return versions


# The vector extensions that decide which kernels torch and oneDNN run on a CPU (and so the last bits of a sum).
VECTOR_EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                     "avx512_fp16", "amx_tile", "amx_bf16", "asimd", "sve")
NOT_RECORDED = "not recorded"  # what an older result, made before a field was recorded, says of it


@lru_cache(maxsize=1)
def machine() -> dict:
    """The machine a number came from: the OS's platform, the CPU model from the OS (``platform.processor()``
    gives only ``x86_64``), its vector extensions and torch's CPU capability (the kernels it dispatches to)."""
    import torch

    model, flags = _cpu_info()
    return {"platform": platform.platform(), "processor": platform.machine(), "python": sys.version.split()[0],
            "cpu_model": model, "cpu_extensions": " ".join(f for f in VECTOR_EXTENSIONS if f in flags),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


def _cpu_info(text: str | None = None) -> tuple[str, set[str]]:
    """The CPU's model name and feature flags: from /proc/cpuinfo (or ``text``) on Linux, sysctl on macOS; else
    unknown."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor's
    model = fields.get("model name") or fields.get("Model") or fields.get("Hardware")
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    if model is None and sys.platform == "darwin":
        try:
            model = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                   timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            model = None
    return model or "unknown", flags


def comparability(tokenizer: str, gives_back: dict[str, bool], data_status: dict[str, str | None]
                  ) -> tuple[bool, list[str]]:
    """Whether a result compares with other runs' (and published ones), and the reasons why not.

    ``gives_back`` says for each scored split whether decoding gave its text back (measured); the one rule of
    "lossy" (tokenizers_study.lossless_on) decides from it and the scheme's trait. ``data_status`` maps each split
    the result depends on to its data status (official, unverified, user), or None where the result does not
    record it. Lossy tokenization, unverified or unrecorded data make a result not comparable; a user corpus only
    earns a note.
    """
    from tokenizers_study import is_closed_vocabulary, lossless_on

    notes = []
    lossy = [split for split, back in gives_back.items() if not lossless_on(tokenizer, back)]
    if is_closed_vocabulary(tokenizer):
        notes.append(f"lossy tokenization: {tokenizer} is a closed vocabulary (words outside it become <unk>), "
                     f"never compared with lossless schemes, also on a text it covers; bits per byte/char and "
                     f"word perplexity are not comparable with theirs")
    elif lossy:
        notes.append(f"lossy tokenization: {tokenizer} cannot give back {', '.join(lossy)} (the text is "
                     f"normalised); bits per byte/char and word perplexity are not comparable with lossless "
                     f"schemes")
    unverified = [s for s, status in data_status.items() if status == "unverified"]
    if "train" in unverified:  # the weights and the tokenizer come from it, whatever split is scored
        notes.append("unverified data: trained on a train split that is not the official file")
    others = [s for s in unverified if s != "train"]
    if others:
        notes.append(f"unverified data: {', '.join(others)} not the official file(s)")
    unrecorded = [s for s, status in data_status.items() if status is None]
    if unrecorded:
        notes.append(f"unrecorded data: the result does not record which {', '.join(unrecorded)} file it used")
    comparable = not notes
    if "user" in data_status.values():
        notes.append("user corpus: compare only with runs on the same files (no official reference)")
    return comparable, notes
