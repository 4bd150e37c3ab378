"""An exported folder (``bench export``, bench.export) read back as a checkpoint's payload: its weights from
``model.safetensors``, its run's configuration, tokenizer and data records from ``bench_run.json`` and
``bench_tokenizer.json``. ``bench eval`` then checks the data it scores against those records, and ``init_from``
starts from the weights, as from the run's own ``best.pt``."""

from __future__ import annotations

import json
from pathlib import Path

from bench.errors import BenchError

EXPORT_FORMAT = 1
WEIGHTS = "model.safetensors"
PROVENANCE = "bench_run.json"
BENCH_TOKENIZER = "bench_tokenizer.json"
PREFIX = "model."  # the family's module inside the transformers model (BenchForCausalLM.model)


def is_export(folder: Path) -> bool:
    return folder.is_dir() and (folder / PROVENANCE).is_file()


def export_payload(folder: Path) -> dict:
    """The checkpoint payload an exported folder stands for; a folder missing a part, or whose weights are not
    those it recorded, is refused in one line."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bench.fileio import sha256_file

    try:
        provenance = json.loads((folder / PROVENANCE).read_text())
        tokenizer = (folder / BENCH_TOKENIZER).read_text(encoding="ascii")
        recorded = provenance["weights"]["sha256"]
        if sha256_file(folder / WEIGHTS) != recorded:
            raise ValueError(f"{WEIGHTS} is not the file {PROVENANCE} records (sha256 {recorded[:12]}...)")
        weights = load_file(str(folder / WEIGHTS))
        if provenance.get("format") != EXPORT_FORMAT:
            raise ValueError(f"format {provenance.get('format')!r}, not {EXPORT_FORMAT}")
        payload = {"resolved": provenance["resolved"], "tokenizer": tokenizer, "data": provenance.get("data", {}),
                   "run_id": provenance.get("run_id")}
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BenchError(f"{folder} is not a readable exported folder ({type(exc).__name__}: {problem}); export the "
                         f"run again (bench export RUN OUT)") from None
    if foreign := [name for name in weights if not name.startswith(PREFIX)]:
        raise BenchError(f"{folder / WEIGHTS} holds {foreign[0]}, not a tensor of the exported model ({PREFIX}...); "
                         f"export the run again")
    return {**payload, "model": {name.removeprefix(PREFIX): tensor for name, tensor in weights.items()}}
