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


def machine() -> dict:
    return {"platform": platform.platform(), "processor": platform.machine(), "python": sys.version.split()[0]}


def comparability(tokenizer: str, lossy_splits: list[str], data_status: dict[str, str | None]
                  ) -> tuple[bool, list[str]]:
    """Whether a result compares with other runs' (and published ones), and the reasons why not.

    ``data_status`` maps each split the result depends on to its data status (official,
    unverified, user), or None where the result does not record it. Lossy tokenization,
    unverified or unrecorded data make a result not comparable; a user corpus only earns a note.
    """
    notes = []
    if lossy_splits:
        notes.append(f"lossy tokenization: {tokenizer} cannot give back {', '.join(lossy_splits)} "
                     f"(unknown words become <unk>, or the text is normalised); bits per byte/char and word "
                     f"perplexity are not comparable with lossless schemes")
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
