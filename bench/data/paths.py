"""Where the data folder and the offline mirror are: an argument, else the environment."""

from __future__ import annotations

import os
from pathlib import Path

from bench.errors import BenchError
from bench.fileio import require_folder


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    from bench.ownership import refuse_others_folder

    folder = require_folder(data_dir or os.environ.get("BENCH_DATA_DIR") or "data", "data folder")
    refuse_others_folder(folder, "data folder")  # corpora and caches are written there
    return folder


def resolve_mirror(mirror: str | Path | None = None) -> Path | None:
    value = mirror or os.environ.get("BENCH_DATA_MIRROR")
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise BenchError(f"mirror folder {path} does not exist; pass --mirror DIR with the corpus files or archives")
    return path
