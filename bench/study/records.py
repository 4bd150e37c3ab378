"""A finished run's small records: what a study keeps of a run trained elsewhere (a lent GPU whose run folders do
not come back) so that the matrix skips it and the report reads it. They are its ``result.json``, ``spec.json``,
``cell.json`` and ``log.jsonl``, its ``tokenizer.json``, and its losses by document (``documents.<split>.json``:
bits and bytes per document of the split), never checkpoints or per-token losses.

``python -m bench.study.records RESULTS`` writes the document losses of every finished run of a results folder
(from its ``token_nll.<split>.npy``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from bench.engine.result import RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import write_text_atomic
from bench.run_files import document_losses
from bench.study.uncertainty import TextLosses

SPLITS = ("test",)


def write_document_losses(run_dir: Path, result: RunResult) -> list[Path]:
    """The finished run's losses by document for each split it has per-token losses of; the files written."""
    from bench.study.analysis import FinishedRun  # it imports torch

    run = FinishedRun({}, result, run_dir)
    written = []
    for split in SPLITS:
        losses = run.text_losses(split)
        if losses is None:
            continue
        path = run_dir / document_losses(split)
        write_text_atomic(path, json.dumps({"bits": losses.bits.tolist(), "bytes": losses.bytes.tolist()}) + "\n")
        written.append(path)
    return written


def read_document_losses(run_dir: Path, split: str) -> TextLosses | None:
    """The run's losses by document of ``split`` from its record, or None where it has none."""
    path = run_dir / document_losses(split)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        bits, sizes = np.asarray(record["bits"], dtype=np.float64), np.asarray(record["bytes"], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} is not a readable record of losses by document ({type(exc).__name__}); restore "
                         f"it, or delete it and evaluate the run again with --dump-token-losses") from None
    if bits.shape != sizes.shape or bits.ndim != 1:
        raise BenchError(f"{path}: its bits and bytes are not one number per document each; restore it")
    return TextLosses(bits, sizes)


def main(results_dir: str) -> None:
    for cell in sorted(Path(results_dir).glob("*/cell.json")):
        run_dir = cell.parent
        record = json.loads(cell.read_text())
        result = finished_result(run_dir, record["run_id"])
        for path in write_document_losses(run_dir, result) if result else []:
            print(path)


if __name__ == "__main__":
    main(sys.argv[1])
