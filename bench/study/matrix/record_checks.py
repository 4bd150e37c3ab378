"""What the records commands (bench.study.matrix.records) accept, checked before they write anything.

A **record** of run R is whole when it holds ``result.json``, ``spec.json``, ``cell.json``, ``status.json`` and
``log.jsonl`` as files of its own (no links), all of run R (the checks of bench.study.matrix.folder_records: the same
run id, and the cell the result's spec is), its result and status finished, its log ending at the step the result
ends at, and its losses by document (``documents.<split>.json``, where it has them) summing to the result's: the
bits to its total bits (within float rounding), the bytes to its scored bytes. A matrix adopts only whole records;
export writes only whole ones.

The folders follow bench.ownership's rules: export and documents read a **matrix's results folder**; export writes
into a **folder of records**: new, empty, or holding records alone, neither a run's, a matrix's nor a report's
folder, and inside none, but for the reference folder of the same study (its ``matrix.toml`` the results' own),
which keeps its records in a folder of its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.engine.progress import read_log_lines
from bench.engine.result import DONE, RunResult
from bench.errors import BenchError
from bench.fileio import require_folder, sha256_file
from bench.ownership import enclosing_owner, owner_of
from bench.run_files import CELL, LOG, MATRIX_CONFIG, RESULT, SPEC, STATUS, document_losses
from bench.study.matrix.folder_records import record_problem as cell_problem
from bench.study.matrix.run_status import Attempt
from bench.study.matrix.runs_table import finished_folders

SPLITS = ("test",)
REQUIRED = (RESULT, SPEC, CELL, STATUS, LOG)
RECORD_FILES = REQUIRED + tuple(document_losses(split) for split in SPLITS)


def record_problem(folder: Path, run_id: str) -> str | None:
    """What keeps ``folder`` from being the whole record of run ``run_id``, in a few words; None when it is."""
    if not folder.is_dir():
        return "not a folder"
    if missing := [name for name in REQUIRED if not (folder / name).is_file()]:
        return f"no {', '.join(missing)}"
    if link := next((name for name in RECORD_FILES if (folder / name).is_symlink()), None):
        return f"its {link} is a link (to {(folder / link).readlink()}), not the run's own file"
    try:
        result, status = RunResult.read(folder / RESULT), Attempt.read(folder)
    except BenchError as exc:
        return _statement(exc, folder)
    if result.run_id != run_id:
        return f"its {RESULT} is of run {result.run_id}, not of run {run_id}"
    if result.status != DONE:
        return f"its {RESULT} is of a run that did not finish ({result.status})"
    if status.status != DONE or status.run_id not in ("", run_id):
        return f"its {STATUS} says {status.status} of run {status.run_id or '(not recorded)'}, not done of run {run_id}"
    records = {name: _json(folder / name) for name in (SPEC, CELL)}
    for name, record in records.items():
        if not isinstance(record, dict):
            return f"its {name} is not a readable JSON record"
        if record.get("run_id") != run_id:
            return f"its {name} is of run {record.get('run_id')}, not of run {run_id}"
    return (cell_problem(folder, records[CELL], (None, None)) or _log_problem(folder, result)
            or _documents_problem(folder, result))


def refusal(problems: list[tuple[Path, str]], nothing: str, fix: str) -> BenchError:
    """One line naming each folder that is not a whole record, and what disagrees in it."""
    named = "; ".join(f"{folder} ({problem})" for folder, problem in problems)
    return BenchError(f"{len(problems)} folder(s) not the whole record of their run, {nothing}: {named}; {fix}")


def _log_problem(folder: Path, result: RunResult) -> str | None:
    try:
        lines = read_log_lines(folder / LOG)
    except (OSError, ValueError):
        return f"its {LOG} is not readable text"
    steps = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError:
            return f"its {LOG} line {number} is not JSON"
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            return f"its {LOG} line {number} has no step"
        steps.append(entry["step"])
    if not steps:
        return f"its {LOG} is empty"
    if result.training is not None and max(steps) != result.training.steps:  # the last step is always logged
        return f"its {LOG} ends at step {max(steps)}, its {RESULT} at step {result.training.steps}"
    return None


def _documents_problem(folder: Path, result: RunResult) -> str | None:
    from bench.study.matrix.finished_run import read_document_losses  # it imports torch

    for split in SPLITS:
        try:
            losses = read_document_losses(folder, split)
        except BenchError as exc:
            return _statement(exc, folder)
        if losses is None:
            continue
        name, metrics = document_losses(split), result.metrics.get(split)
        if metrics is None:
            return f"its {name} has no {split} result in its {RESULT} to agree with"
        total_bits = metrics.total_nll_nats / math.log(2)
        if not math.isclose(losses.bits.sum(), total_bits, rel_tol=1e-6):
            return f"its {name} sums to {losses.bits.sum():,.1f} bits, its {RESULT} to {total_bits:,.1f}"
        if losses.bytes.sum() != metrics.n_bytes:
            return f"its {name} sums to {losses.bytes.sum():,.0f} bytes, its {RESULT} scored {metrics.n_bytes:,}"
    return None


def matrix_results(results_dir: Path) -> tuple[list[tuple[Path, RunResult]], list[str]]:
    """The finished runs of a matrix's results folder and what is left out (``finished_folders``); a folder that
    does not exist, that is not a matrix's results folder or that holds no finished run is refused in one line."""
    results_dir = Path(results_dir)
    give = "give the results folder of `bench run-matrix`"
    if not results_dir.is_dir():
        raise BenchError(f"{results_dir} " + ("is not a folder" if results_dir.exists() else "does not exist")
                         + f"; {give}")
    owner = owner_of(results_dir)
    if owner is None or owner.kind != "matrix":
        said = owner.describe() if owner else f"{results_dir} holds no owner.json or runs.csv"
        raise BenchError(f"{said}, not a matrix's results folder; {give}")
    finished, left_out = finished_folders(results_dir)
    if not finished:
        raise BenchError(f"{results_dir} holds no finished run of a matrix"
                         + (f" ({' / '.join(left_out)})" if left_out else "")
                         + "; run `bench run-matrix CONFIG` first, or give the folder its runs finished in")
    return finished, left_out


def check_records_folder(records_dir: Path, results_dir: Path) -> None:
    """A folder export may write records of ``results_dir`` into (see the module's docstring), or a one-line refusal."""
    records_dir = require_folder(records_dir, "records folder")
    hint = "give a new folder, or one that `bench records export` wrote"
    owner = owner_of(records_dir)
    if owner is not None:
        raise BenchError(f"{owner.describe()}, not a folder of records; {hint}")
    inside = records_dir.resolve()
    if inside == results_dir.resolve() or results_dir.resolve() in inside.parents:
        raise BenchError(f"records folder {records_dir} is inside the results folder {results_dir}; {hint}, outside it")
    above = enclosing_owner(records_dir)
    if above is not None and not (above.kind == "matrix" and _same_study(above.folder, results_dir)):
        own = f" (a study's reference folder takes the records of its own {MATRIX_CONFIG} only)" \
            if above.kind == "matrix" else ""
        raise BenchError(f"records folder {records_dir} would be written inside another command's folder: "
                         f"{above.describe()}{own}; {hint}, outside it")
    if records_dir.is_dir():
        others = sorted(p.name for p in records_dir.iterdir()
                        if not p.name.startswith(".") and not (p / RESULT).is_file())
        if others:
            shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
            raise BenchError(f"{records_dir} already holds other files ({shown}) and is not a folder of records; "
                             f"{hint}")


def _same_study(folder: Path, results_dir: Path) -> bool:
    """Whether ``folder`` (a study's reference: its runs.csv and matrix.toml) is of the config the results ran."""
    configs = [folder / MATRIX_CONFIG, results_dir / MATRIX_CONFIG]
    return all(config.is_file() for config in configs) and len({sha256_file(config) for config in configs}) == 1


def _statement(exc: BenchError, folder: Path) -> str:
    """A reader's refusal as what disagrees in the record: its statement, without the fix (said once, for all)."""
    return str(exc).partition("; ")[0].replace(f"{folder}/", "its ")


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
