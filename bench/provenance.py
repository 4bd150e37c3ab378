"""Where a number came from: code version, libraries, machine."""

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
