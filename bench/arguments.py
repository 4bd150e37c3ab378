"""Arguments as the functions the command line calls receive them from Python (bench.api, lm-eval's model, a
script): checked as the command line's parser checks its options, so that a wrong type or value is a BenchError in
one line and never a TypeError or AttributeError from deep inside, nor a value silently replaced by a default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.errors import BenchError


def path_argument(value: Any, name: str) -> Path:
    """A file or folder given as a str or a Path."""
    if isinstance(value, Path) or (isinstance(value, str) and value.strip()):
        return Path(value)
    raise BenchError(f"{name} must be a path (a str or a pathlib.Path), not {value!r}")


def optional_path(value: Any, name: str) -> Path | None:
    return None if value is None else path_argument(value, name)


def count_argument(value: Any, name: str) -> int | None:
    """None (the run's own setting) or a whole number of at least 1: 0 is refused, never read as "not given"."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchError(f"{name} must be a whole number of at least 1 (or None for the run's own), not {value!r}")
    return value


def flag_argument(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise BenchError(f"{name} must be True or False, not {value!r}")
    return value


def text_argument(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise BenchError(f"{name} must be a str, not {value!r}")
    return value


def instance_argument(value: Any, kind: type, name: str, example: str) -> Any:
    if not isinstance(value, kind):
        article = "an" if kind.__name__[0].lower() in "aeiou" else "a"
        raise BenchError(f"{name} must be {article} {kind.__name__}, not {type(value).__name__} "
                         f"({str(value)[:60]!r}); e.g. {example}")
    return value
