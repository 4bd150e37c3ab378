"""User corpora declared in TOML: ``[corpora.NAME]`` with ``train``, ``valid`` and ``test`` paths."""

from __future__ import annotations

import tomllib
from pathlib import Path

from bench.corpora import SPLITS
from bench.errors import BenchError


def read_toml(path: str | Path) -> dict:
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BenchError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"config file {path} is not valid TOML: {exc}") from None


def corpora_from_toml(path: str | Path) -> dict[str, dict[str, Path]]:
    """User corpora of a config file; relative paths are taken from the file's folder."""
    path = Path(path)
    table = read_toml(path).get("corpora", {})
    if not isinstance(table, dict) or not table:
        raise BenchError(f"{path} has no [corpora.NAME] tables; add one with train, valid and test paths")
    corpora = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: corpora.{name} must be a table with train, valid and test paths")
        unknown = sorted(set(entry) - set(SPLITS))
        if unknown:
            raise BenchError(f"{path}: corpora.{name} has unknown keys {unknown}; allowed: {', '.join(SPLITS)}")
        corpora[name] = {split: (path.parent / str(p)) for split, p in entry.items()}
    return corpora
