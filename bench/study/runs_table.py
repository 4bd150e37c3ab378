"""The index of a matrix's runs, rebuilt from its run folders: the folders are the only source of truth.

Each run folder of a matrix holds ``cell.json`` (written by ``bench run-matrix``: the matrix, its config's sha256,
the run's place in the plan, its cell and phase and run id) beside its ``result.json`` (a finished run) or its
``status.json`` (the outcome of its last attempt). :func:`read_runs_table` reads every run folder that says it is a run
of the current plan; the report and ``bench compare`` read that and nothing else. ``runs.csv`` is the same index
written for users and tools (with the planned runs that have no folder yet): nothing reads it back.

Columns, in order: the cell's axes (``model``, ``preset``, ``tokenizer``, ``dataset``, ``seed``, ``match``, then any
other axis of the config), then ``phase``, ``run_id``, ``run_dir``, ``status``, ``error``, ``matrix``,
``config_sha256``, and for finished runs the flattened result (:meth:`bench.engine.result.RunResult.flat`).
Pretrained models (:mod:`bench.study.pretrained`) follow the trained runs, with match ``pretrained``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.fileio import json_text, update_text
from bench.run_files import CELL
from bench.study.config import MatrixConfig
from bench.study.grid import CORE_AXES
from bench.study.plan import PlannedRun
from bench.study.pretrained import PretrainedRun
from bench.study.run_status import RunStatus, folder_status

RUNS_CSV = "runs.csv"
FIRST_AFTER_AXES = "phase"
REWRITE = "run `bench run-matrix CONFIG` again to rewrite the run folders' cell.json"


@dataclass
class RunsTable:
    rows: pd.DataFrame  # every run with a folder, in the plan's order
    axes: list[str]  # the axis columns
    runs: dict  # each finished run (``FinishedRun``) by folder name, its numbers its result.json's

    def done(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == RunStatus.DONE.value].copy()


def write_runs_table(chains: list[list[PlannedRun]], config: MatrixConfig, results_dir: Path,
                     pretrained: list[PretrainedRun] = ()) -> Path:
    """Record each planned run's place in the matrix in its folder, forget the folders of runs no longer planned
    (a changed setting is a new run), and write runs.csv from the folders."""
    planned = [run for chain in chains for run in chain] + list(pretrained)
    for position, run in enumerate(planned):
        if run.run_dir is not None and run.run_dir.is_dir():
            update_text(run.run_dir / CELL, json_text(_cell_record(run, config, position)) + "\n")
    current = {run.run_dir.name for run in planned if run.run_dir is not None}
    for record in results_dir.glob(f"*/{CELL}"):
        if record.parent.name not in current:
            record.unlink()
    rows = {row["run_dir"]: row for row in _folder_rows(results_dir)}
    path = results_dir / RUNS_CSV
    update_text(path, _csv_text([rows.get(run.run_dir.name if run.run_dir else None) or _plan_row(run, config)
                                 for run in planned]))
    return path


def read_runs_table(results_dir: Path) -> RunsTable:
    """Every run of the matrix in ``results_dir`` that has a folder, from the folders alone."""
    from bench.study.analysis import FinishedRun  # it imports torch

    if not results_dir.is_dir():
        raise BenchError(f"{results_dir} does not exist; run `bench run-matrix CONFIG` first (or give its results "
                         f"folder)")
    found = _folder_rows(results_dir)
    if not found:
        raise BenchError(f"{results_dir} holds no run of a matrix (no run folder with {CELL}); run `bench run-matrix "
                         f"CONFIG` (again, for results of an earlier version), or give its results folder")
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
    return RunsTable(rows, axes, runs)


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


def _folder_rows(results_dir: Path) -> list[dict[str, Any]]:
    """One row per run folder with a cell record, in the plan's order; a finished run's row has its flattened
    result, and its ``result`` (None for others) and ``cell`` besides."""
    rows = []
    for path in results_dir.glob(f"*/{CELL}"):
        try:
            record = json.loads(path.read_text())
            cell, phase, run_id, position = record["cell"], record["phase"], record["run_id"], int(record["position"])
            matrix, config_sha256 = record["matrix"], record["config_sha256"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{path} is not a readable cell record ({type(exc).__name__}: {exc}); {REWRITE}") from None
        run_dir = path.parent
        status, error, result = folder_status(run_dir, run_id)
        row = {**cell, FIRST_AFTER_AXES: phase, "run_id": run_id, "run_dir": run_dir.name, "status": status.value,
               "error": error, "matrix": matrix, "config_sha256": config_sha256}
        row.update(result.flat() if result else {})
        rows.append((position, run_dir.name, {**row, "cell": cell, "result": result}))
    return [row for _, _, row in sorted(rows, key=lambda entry: entry[:2])]


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
