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
