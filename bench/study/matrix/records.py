"""A finished run's records: what a study keeps of a run trained elsewhere (a lent GPU whose run folders do not come
back) so that the matrix skips it and the report reads it, in a folder small enough to commit.

A record is the run folder's ``result.json``, ``spec.json``, ``cell.json``, ``status.json`` and ``log.jsonl``, and
its losses by document (``documents.<split>.json``: bits and bytes of each document of the split, which the
report's intervals resample), never checkpoints, per-token losses or the tokenizer (the same for every run of a
tokenization: it is trained again from the data and must hash as the run's did).

* ``python -m bench.study.matrix.records documents RESULTS``: the losses by document of every finished run of a results
  folder (from its ``token_nll.<split>.npy``), written beside them;
* ``python -m bench.study.matrix.records export RESULTS RECORDS``: the records of its finished runs into RECORDS;
* ``bench run-matrix CONFIG --records RECORDS``: a run not started here whose record is in RECORDS becomes a run
  folder of the results (its tokenizer from the data), so the matrix skips it and the report includes it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from bench.engine.result import RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import write_bytes_atomic, write_text_atomic
from bench.run_files import CELL, LOG, RESULT, SPEC, STATUS, TOKENIZER, document_losses
from bench.study.matrix.runs_table import finished_folders

SPLITS = ("test",)
RECORD_FILES = (RESULT, SPEC, CELL, STATUS, LOG) + tuple(document_losses(split) for split in SPLITS)


def write_document_losses(run_dir: Path, result: RunResult) -> list[Path]:
    """The finished run's losses by document for each split it has per-token losses of; the files written."""
    from bench.study.matrix.finished_run import FinishedRun  # it imports torch

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


def export_records(results_dir: Path, records_dir: Path) -> list[Path]:
    """The record of each finished run of ``results_dir`` in ``records_dir`` (its losses by document written
    first where it has per-token losses); the record folders written. A record already there is kept when it
    is the same run and refused when it is not: no record is replaced."""
    return export_finished(finished_folders(results_dir)[0], records_dir)


def export_finished(finished: list[tuple[Path, RunResult]], records_dir: Path) -> list[Path]:
    """:func:`export_records` of finished runs (folder, result) already found."""
    written = []
    for run_dir, result in finished:
        write_document_losses(run_dir, result)
        target = records_dir / run_dir.name
        if target.exists():
            held = finished_result(target, result.run_id)
            if held is None:
                raise BenchError(f"{target} exists and is not the record of run {result.run_id[:10]}; move it away "
                                 f"or export into another folder")
            continue
        _copy_folder(run_dir, target, [name for name in RECORD_FILES if (run_dir / name).is_file()])
        written.append(target)
    return written


def restore_record(record_dir: Path, run_id: str, run_dir: Path, data_dir: Path) -> bool:
    """Make ``run_dir`` (which must not exist) from the record of ``run_id`` in ``record_dir``, its tokenizer
    trained from the data (through the cache) and checked against the run's; False where the folder holds no
    finished record of that run."""
    result = finished_result(record_dir, run_id)
    if result is None:
        return False
    tokenizer = _checked_tokenizer(record_dir, result, _tokenizer_here(result, data_dir))
    _copy_folder(record_dir, run_dir, [name for name in RECORD_FILES if (record_dir / name).is_file()],
                 extra={TOKENIZER: tokenizer})
    return True


def _tokenizer_here(result: RunResult, data_dir: Path):
    from bench.data.cache import cached_tokenizer

    return cached_tokenizer(result.spec.tokenizer, result.spec.dataset, data_dir)


def _checked_tokenizer(record_dir: Path, result: RunResult, tokenizer) -> bytes:
    """The tokenizer trained here, refused unless it hashes as the run's."""
    if tokenizer.hash != result.tokenizer.hash:
        spec = result.spec
        raise BenchError(f"{record_dir}: the {spec.tokenizer} tokenizer trained here from {spec.dataset} (sha256 "
                         f"{tokenizer.hash[:12]}) is not the run's ({result.tokenizer.hash[:12]}): its data or its "
                         f"tokenizer library differ; use the data it was trained on, or train the run here")
    return tokenizer.to_bytes()


def adopt_records(runs: list, records_dir: Path, data_dir: Path, dry_run: bool) -> int:
    """Each run of a plan (``PlannedRun``) with no folder here whose record is in ``records_dir``: its folder made
    from the record (not in a dry run) and its status done, so that the matrix skips it. Every record's tokenizer
    is checked before any folder is made. How many were."""
    from bench.study.matrix.run_status import RunStatus

    if not records_dir.is_dir():
        raise BenchError(f"--records {records_dir}: no such folder; give the folder of exported records "
                         f"(python -m bench.study.matrix.records export RESULTS RECORDS), or leave --records out")
    found = []
    for run in runs:
        if run.status is not RunStatus.NEW or run.run_dir is None or run.run_dir.exists():
            continue  # a folder here is this machine's own run: never replaced
        result = finished_result(records_dir / run.run_dir.name, run.run_id)
        if result is not None:
            found.append((run, records_dir / run.run_dir.name, result))
    here, tokenizers = {}, {}
    for run, record, result in found:  # every record checked before anything is written
        key = (result.spec.dataset, result.spec.tokenizer)
        if key not in here:
            here[key] = _tokenizer_here(result, data_dir)
        tokenizers[run.run_id] = _checked_tokenizer(record, result, here[key])
    for run, record, _ in found:
        if not dry_run:
            _copy_folder(record, run.run_dir, [name for name in RECORD_FILES if (record / name).is_file()],
                         extra={TOKENIZER: tokenizers[run.run_id]})
        run.status = RunStatus.DONE
    return len(found)


def _copy_folder(source: Path, target: Path, names: list[str], extra: dict[str, bytes] | None = None) -> None:
    """``target`` made whole or not at all: the files are written into a folder of ``.staging/`` beside it (two
    levels down, where no reader of run folders looks), then renamed."""
    if target.exists():
        raise BenchError(f"{target} exists; a record is copied only where there is no folder (move it away first)")
    staging_root = target.parent / ".staging"
    staging_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=staging_root))
    try:
        for name in names:
            shutil.copyfile(source / name, staging / name)
        for name, data in (extra or {}).items():
            write_bytes_atomic(staging / name, data)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.rmdir()  # only when empty


def main(argv: list[str]) -> None:
    usage = "usage: python -m bench.study.matrix.records documents RESULTS | export RESULTS RECORDS"
    if len(argv) != {"documents": 2, "export": 3}.get(argv[0] if argv else None):
        raise SystemExit(usage)
    finished, left_out = finished_folders(Path(argv[1]))
    for line in left_out:  # as the report says them: by name, never exported under the matrix's labels
        print(f"note: {line}", file=sys.stderr)
    if argv[0] == "documents":
        for run_dir, result in finished:
            for path in write_document_losses(run_dir, result):
                print(path)
    else:
        written = export_finished(finished, Path(argv[2]))
        print(f"{len(written)} record(s) written to {argv[2]}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BenchError as exc:
        raise SystemExit(f"error: {exc}") from None
