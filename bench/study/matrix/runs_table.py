"""The index of a matrix's runs, rebuilt from its run folders: the folders are the only source of truth.

Each run folder of a matrix holds ``cell.json`` (written by ``bench run-matrix``: the matrix, its config's sha256,
the run's place in the plan, its cell and phase and run id) beside its ``result.json`` (a finished run) or its
``status.json`` (the outcome of its last attempt). :func:`read_runs_table` reads every run folder that says it is a run
of the current plan; the report and ``bench compare`` read that and nothing else. ``runs.csv`` is the same index
written for users and tools (with the planned runs that have no folder yet): nothing reads it back.

Columns, in order: the cell's axes (``model``, ``preset``, ``tokenizer``, ``dataset``, ``seed``, ``match``, then any
other axis of the config), then ``phase``, ``run_id``, ``run_dir``, ``status``, ``error``, ``matrix``,
``config_sha256``, and for finished runs the flattened result (:meth:`bench.engine.result.RunResult.flat`).
Pretrained models (:mod:`bench.study.matrix.pretrained`) follow the trained runs, with match ``pretrained``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.data.manifest import MANIFEST, corpus_dir
from bench.data.paths import resolve_data_dir
from bench.engine.result import RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import json_text, update_text
from bench.run_files import CELL, OTHER_DATA, SPEC
from bench.study.matrix.config import MatrixConfig
from bench.study.matrix.folder_records import (Inconsistent, matrix_identity, record_problem, summary_lines,
                                               unrecorded_finished)
from bench.study.matrix.grid import CORE_AXES
from bench.study.matrix.plan import PlannedRun
from bench.study.matrix.pretrained import PretrainedRun
from bench.study.matrix.run_status import RunStatus, folder_status

RUNS_CSV = "runs.csv"
FIRST_AFTER_AXES = "phase"
REWRITE = "run `bench run-matrix CONFIG` again to rewrite the run folders' cell.json"


@dataclass
class RunsTable:
    rows: pd.DataFrame  # every run with a folder, in the plan's order
    axes: list[str]  # the axis columns
    runs: dict  # each finished run (``FinishedRun``) by folder name, its numbers its result.json's
    left_out: list[str] = field(default_factory=list)  # one line each: folders whose records disagree, or no cell

    def done(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == RunStatus.DONE.value].copy()


def write_runs_table(chains: list[list[PlannedRun]], config: MatrixConfig, results_dir: Path,
                     pretrained: list[PretrainedRun] = ()) -> Path:
    """Record each planned run's place in the matrix in its folder, forget the folders of runs no longer planned
    (a changed setting is a new run), and write runs.csv from the folders."""
    planned = [run for chain in chains for run in chain] + list(pretrained)
    for position, run in enumerate(planned):
        if run.run_dir is not None and run.run_dir.is_dir():
            try:  # never into a folder made again: its worker may remove a run it had only begun (Ctrl-C)
                update_text(run.run_dir / CELL, json_text(_cell_record(run, config, position)) + "\n",
                            make_folders=False)
            except FileNotFoundError:
                if run.run_dir.is_dir():
                    raise
    current = {run.run_dir.name for run in planned if run.run_dir is not None}
    waiting = {_place(_ordered_cell(run.cell), run.phase or ""): run for run in planned
               if run.run_dir is None or not run.run_dir.is_dir()}  # cells whose run on today's data has no folder
    for path in results_dir.glob(f"*/{CELL}"):
        if path.parent.name in current or path.parent.is_symlink():  # a linked folder is another place's record
            continue
        record = _readable(path)
        if record is not None and record.get("matrix") != config.name:
            continue  # another matrix's run, moved in: not this matrix's record to forget (the report names it)
        successor = waiting.get(_place(record["cell"], record["phase"])) if record else None
        if successor is not None and finished_result(path.parent, record["run_id"]) is not None:
            if isinstance(successor, PlannedRun) and successor.resolved is None and not _corpus_there(successor):
                continue  # another --data-dir, or a corpus not fetched there: nothing says its data changed
            if _data_changed(path.parent, successor):
                why = successor.problem or "its data files changed since it was trained"
                update_text(path, json_text({**record, OTHER_DATA: why.splitlines()[0]}) + "\n")
                continue  # trained on other data than there is now: it keeps its record until a run replaces it
        path.unlink()  # a changed setting is a new run: the old folder is no longer this matrix's
    rows = {row["run_dir"]: row for row in _folder_rows(results_dir)[0]}
    path = results_dir / RUNS_CSV
    update_text(path, _csv_text([rows.get(run.run_dir.name if run.run_dir else None) or _plan_row(run, config)
                                 for run in planned]))
    return path


def read_runs_table(results_dir: Path) -> RunsTable:
    """Every run of the matrix in ``results_dir`` that has a folder, from the folders alone."""
    from bench.study.matrix.finished_run import FinishedRun  # it imports torch

    if not results_dir.is_dir():
        raise BenchError(f"{results_dir} does not exist; run `bench run-matrix CONFIG` first (or give its results "
                         f"folder)")
    found, inconsistent = _folder_rows(results_dir)
    left_out = _left_out(results_dir, inconsistent)
    if not found:
        raise BenchError(f"{results_dir} holds no run of a matrix (no run folder with a {CELL} that agrees with its "
                         f"run{': ' + ' / '.join(left_out) if left_out else ''}); run `bench run-matrix CONFIG` "
                         f"(again, for results of an earlier version), or give its results folder")
    places: dict[tuple, str] = {}
    for row in found:
        place = (json.dumps(row["cell"], sort_keys=True), row["phase"])
        if place in places:  # a folder copied in by hand
            raise BenchError(f"{results_dir}: run folders {places[place]} and {row['run_dir']} are both cell "
                             f"{row['cell']}{' ' + row['phase'] if row['phase'] else ''}; delete the one that is not "
                             f"this matrix's, or {REWRITE}")
        places[place] = row["run_dir"]
    rows = _typed([{k: v for k, v in row.items() if k not in ("cell", "result")} for row in found])
    axes = list(rows.columns[: list(rows.columns).index(FIRST_AFTER_AXES)])
    runs = {row["run_dir"]: FinishedRun(typed, row["result"], results_dir / row["run_dir"])
            for row, typed in zip(found, rows.to_dict("records")) if row["result"] is not None}
    return RunsTable(rows, axes, runs, left_out)


def matrix_notes(results_dir: Path) -> list[str]:
    """What run-matrix says, one line each, about run folders the matrix keeps but does not count as today's."""
    found, inconsistent = _folder_rows(results_dir)
    kept = [row for row in found if OTHER_DATA in row]
    lines = summary_lines(inconsistent, unrecorded_finished(results_dir))
    if kept:
        lines.insert(0, f"{len(kept)} finished run(s) were trained on other data than there is now "
                        f"({kept[0][OTHER_DATA]}): they keep their records, and the report marks them ≠ (trained on "
                        f"other data)")
    return lines


def _cell_record(run: PlannedRun | PretrainedRun, config: MatrixConfig, position: int) -> dict:
    return {"matrix": config.name, "config_sha256": config.sha256, "position": position,
            "cell": _ordered_cell(run.cell), "phase": run.phase or "", "run_id": run.run_id}


def _ordered_cell(cell: dict) -> dict:
    return {**{k: cell.get(k) for k in CORE_AXES}, **{k: v for k, v in cell.items() if k not in CORE_AXES}}


def _plan_row(run: PlannedRun | PretrainedRun, config: MatrixConfig) -> dict[str, Any]:
    """The row of a planned run with no folder yet (new, or its data missing)."""
    return {**_ordered_cell(run.cell), FIRST_AFTER_AXES: run.phase or "", "run_id": run.run_id or "", "run_dir": "",
            "status": run.status.value, "error": run.problem or "", "matrix": config.name,
            "config_sha256": config.sha256}


def finished_folders(results_dir: Path) -> tuple[list[tuple[Path, RunResult]], list[str]]:
    """Each finished run of the matrix in ``results_dir`` as (its folder, its RunResult), in the plan's order; and
    what is left out, in the report's words (folders whose records disagree, finished ones not the matrix's)."""
    found, inconsistent = _folder_rows(results_dir)
    return ([(results_dir / row["run_dir"], row["result"]) for row in found if row["result"] is not None],
            _left_out(results_dir, inconsistent))


def _left_out(results_dir: Path, inconsistent: list[Inconsistent]) -> list[str]:
    return summary_lines(inconsistent, unrecorded_finished(results_dir))


def _folder_rows(results_dir: Path) -> tuple[list[dict[str, Any]], list[Inconsistent]]:
    """One row per run folder with a cell record that agrees with the run's own records, in the plan's order (a
    finished run's row has its flattened result, and its ``result`` (None for others) and ``cell`` besides); and
    the folders whose records disagree."""
    records = {}
    for path in results_dir.glob(f"*/{CELL}"):
        try:
            record = json.loads(path.read_text())
            record["position"] = int(record["position"])
            if missing := [k for k in ("cell", "phase", "run_id", "matrix", "config_sha256") if k not in record]:
                raise KeyError(missing[0])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{path} is not a readable cell record ({type(exc).__name__}: {exc}); {REWRITE}") from None
        records[path.parent] = record
    identity = matrix_identity(results_dir, list(records.values()))
    rows, inconsistent = [], []
    for run_dir, record in records.items():
        if (problem := record_problem(run_dir, record, identity)) is not None:
            inconsistent.append(Inconsistent(run_dir.name, problem))
            continue
        status, error, result = folder_status(run_dir, record["run_id"])
        row = {**record["cell"], FIRST_AFTER_AXES: record["phase"], "run_id": record["run_id"],
               "run_dir": run_dir.name, "status": status.value, "error": error, "matrix": record["matrix"],
               "config_sha256": record["config_sha256"], **({OTHER_DATA: record[OTHER_DATA]} if OTHER_DATA in record
                                                            else {})}
        row.update(result.flat() if result else {})
        rows.append((record["position"], run_dir.name, {**row, "cell": record["cell"], "result": result}))
    return ([row for _, _, row in sorted(rows, key=lambda entry: entry[:2])],
            sorted(inconsistent, key=lambda entry: entry.run_dir))


def _data_changed(run_dir: Path, successor: PlannedRun | PretrainedRun) -> bool:
    """Whether the run planned for a finished run's cell differs from it by its data (files changed, or not there
    as recorded), not by a setting."""
    if not isinstance(successor, PlannedRun):
        return False  # a pretrained model is scored again on any data: its folder is named by what it scores
    if successor.resolved is None:
        return True  # its corpus is there (see _corpus_there) but no longer as recorded
    try:
        recorded = json.loads((run_dir / SPEC).read_text())["data"]["split_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return recorded != successor.resolved.data.split_sha256


def _corpus_there(run: PlannedRun) -> bool:
    """Whether the data folder the run is planned on holds its corpus (a manifest, readable or not)."""
    data_dir = resolve_data_dir(run.spec.data_dir)
    return (corpus_dir(data_dir, run.spec.dataset) / MANIFEST).exists()


def _readable(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
        return record if isinstance(record, dict) and {"cell", "phase", "run_id"} <= set(record) else None
    except (OSError, ValueError):
        return None


def _place(cell: dict, phase: str) -> str:
    return json.dumps([cell, phase], sort_keys=True, default=str)


def _csv_text(rows: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns and k not in ("cell", "result")]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _typed(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a table, each column typed as runs.csv types it for a user's tools (empty cells missing),
    so that the report and compare print what they printed when they read runs.csv."""
    return pd.read_csv(io.StringIO(_csv_text(rows)), keep_default_na=False, na_values=[""])
