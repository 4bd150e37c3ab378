"""Checking a file against its official size and checksums."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from bench.data.corpora import FileCheck
from bench.fileio import crc32_file, sha256_file


@dataclass
class CheckResult:
    ok: bool
    size: int
    sha256: str
    how: str  # what was compared, e.g. "size+sha256"
    problem: str | None = None


def check_file(path: Path, expected: FileCheck | None, label: str) -> CheckResult:
    """Compare a file with its official size and checksums."""
    size = path.stat().st_size
    sha = sha256_file(path)
    if expected is None or not expected.has_checksum():
        return CheckResult(
            False, size, sha, "", f"{label}: no official checksum is recorded for this file, so it cannot be verified"
        )
    actual = {"size": size, "sha256": sha}
    compared = ["size"]
    mismatches = []
    if size != expected.size:
        mismatches.append("size")
    for algo in ("sha256", "crc32", "md5"):
        want = getattr(expected, algo)
        if want is None:
            continue
        if algo not in actual:
            actual[algo] = crc32_file(path) if algo == "crc32" else _md5_file(path)
        compared.append(algo)
        if actual[algo] != want:
            mismatches.append(algo)
    if not mismatches:
        return CheckResult(True, size, sha, "+".join(compared))
    want_text = ", ".join(
        f"{k} {getattr(expected, k):,}" if k == "size" else f"{k} {getattr(expected, k)}" for k in compared
    )
    got_text = ", ".join(f"{k} {actual[k]:,}" if k == "size" else f"{k} {actual[k]}" for k in compared)
    if "sha256" not in compared:
        got_text += f" (sha256 {sha})"
    return CheckResult(
        False,
        size,
        sha,
        "+".join(compared),
        f"{label} is not the official file: expected {want_text}; got {got_text}",
    )


def _md5_file(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def text_problem(data: bytes) -> str | None:
    """Why these bytes cannot be a corpus split, or None: no text at all (empty or only whitespace), or not text
    (NUL bytes, or more than 1% of the bytes outside valid UTF-8, as in a binary file)."""
    if not data.strip():
        return f"holds no text ({len(data):,} bytes of whitespace)" if data else "is empty"
    nul = data.count(0)
    try:
        data.decode("utf-8")
        invalid = 0
    except UnicodeDecodeError:
        invalid = sum(0xDC80 <= ord(c) <= 0xDCFF for c in data.decode("utf-8", "surrogateescape"))
    if nul or invalid > 0.01 * len(data):
        return (f"is not text ({invalid:,} of {len(data):,} bytes are not valid UTF-8, {nul:,} NUL bytes); a corpus "
                f"split must be a text file")
    return None


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file of text, or None: missing, a folder, or not a regular file (a device,
    a pipe)."""
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a folder"
    if not path.is_file():
        return "is not a regular file (a device, a pipe or a socket)"
    return None
