"""A finished run's records: what a study keeps of a run trained elsewhere (a lent GPU whose run folders do not come
back) so that the matrix skips it and the report reads it, in a folder small enough to commit.

A record is the run folder's ``result.json``, ``spec.json``, ``cell.json``, ``status.json`` and ``log.jsonl``, and
its losses by document (``documents.<split>.json``: bits and bytes of each document of the split, which the
report's intervals resample), never checkpoints, per-token losses or the tokenizer (the same for every run of a
tokenization: it is trained again from the data and must hash as the run's did). Only whole records are written
and adopted (bench.study.matrix.record_checks).

* ``bench records documents RESULTS``: the losses by document of every finished run of a results folder (from its
  ``token_nll.<split>.npy``), written beside them;
* ``bench records export RESULTS RECORDS``: the records of its finished runs into RECORDS;
* ``bench run-matrix CONFIG --records RECORDS``: a run not started here whose record is in RECORDS becomes a run
  folder of the results (its tokenizer from the data), so the matrix skips it and the report includes it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.engine.result import RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import give_plain_modes, write_bytes_atomic, write_text_atomic
from bench.run_files import TOKENIZER, document_losses
from bench.study.matrix.record_checks import (RECORD_FILES, SPLITS, check_records_folder, matrix_results,
                                              record_problem, refusal)

EXPORT = "bench records export RESULTS RECORDS"


@dataclass(frozen=True)
class Written:
    """What a records command wrote, and the run folders it left out (in the report's words: one line each)."""

    paths: list[Path]
    left_out: list[str]


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


def write_documents(results_dir: Path) -> Written:
    """``bench records documents``: the losses by document of each finished run of a matrix's results folder,
    written beside its per-token losses."""
    finished, left_out = matrix_results(Path(results_dir))
    return Written([path for run_dir, result in finished for path in write_document_losses(run_dir, result)],
                   left_out)


def export_records(results_dir: Path, records_dir: Path) -> Written:
    """``bench records export``: the record of each finished run of a matrix's ``results_dir`` in ``records_dir``
    (its losses by document written first where it has per-token losses). A record already there is kept when it
    is the whole record of the same run and refused when it is not; a run folder that is not a whole record is
    refused by name: no record is replaced, and none is written unless all are whole."""
    results_dir, records_dir = Path(results_dir), Path(records_dir)
    finished, left_out = matrix_results(results_dir)
    check_records_folder(records_dir, results_dir)
    todo = []
    for run_dir, result in finished:
        target = records_dir / run_dir.name
        if not (target.exists() or target.is_symlink()):
            todo.append((run_dir, result))
        elif (problem := record_problem(target, result.run_id)) is not None:
            raise BenchError(f"{target} exists and is not the whole record of run {result.run_id[:10]} ({problem}); "
                             f"move it away or export into another folder")
    for run_dir, result in todo:
        write_document_losses(run_dir, result)
    if problems := [(run_dir, p) for run_dir, result in todo if (p := record_problem(run_dir, result.run_id))]:
        raise refusal(problems, "no record written", f"restore them, or move them out of {results_dir} to export "
                                                     f"the others")
    for run_dir, _ in todo:
        _copy_folder(run_dir, records_dir / run_dir.name, _record_files(run_dir))
    return Written([records_dir / run_dir.name for run_dir, _ in todo], left_out)


def adopt_records(runs: list, records_dir: Path, data_dir: Path, dry_run: bool) -> int:
    """Each run of a plan (``PlannedRun``) with no folder here whose record is in ``records_dir``: its folder made
    from the record (not in a dry run) and its status done, so that the matrix skips it. Every record is checked
    whole, and its tokenizer against the data, before any folder is made: a record that is not whole is refused
    by name and nothing is adopted. How many were."""
    from bench.study.matrix.run_status import RunStatus

    if not records_dir.is_dir():
        raise BenchError(f"--records {records_dir}: no such folder; give the folder of exported records "
                         f"({EXPORT}), or leave --records out")
    found = []
    for run in runs:
        if run.status is not RunStatus.NEW or run.run_dir is None or run.run_dir.exists():
            continue  # a folder here is this machine's own run: never replaced
        record = records_dir / run.run_dir.name
        if record.exists() or record.is_symlink():
            found.append((run, record))
    if problems := [(record, p) for run, record in found if (p := record_problem(record, run.run_id))]:
        raise refusal(problems, "no run adopted", f"export them again from the results they were trained in "
                                                  f"({EXPORT}), or move them out of {records_dir} to train those "
                                                  f"runs here")
    here, tokenizers = {}, {}
    for run, record in found:  # every tokenizer checked before anything is written
        result = finished_result(record, run.run_id)
        key = (result.spec.dataset, result.spec.tokenizer)
        if key not in here:
            here[key] = _tokenizer_here(result, data_dir)
        tokenizers[run.run_id] = _checked_tokenizer(record, result, here[key])
    for run, record in found:
        if not dry_run:
            _copy_folder(record, run.run_dir, _record_files(record), extra={TOKENIZER: tokenizers[run.run_id]})
        run.status = RunStatus.DONE
    return len(found)


def _record_files(folder: Path) -> list[str]:
    return [name for name in RECORD_FILES if (folder / name).is_file()]


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
        give_plain_modes(staging)  # a record to commit or share, not a private folder
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.rmdir()  # only when empty
