"""``runs.csv``: one row per run of a matrix, written after every run and read by the report and by compare
(each finished row checked against its run folder first: :func:`finished_runs`).

Columns, in order: the cell's axes (``model``, ``preset``, ``tokenizer``, ``dataset``,
``seed``, ``match``, then any other axis of the config), then ``phase``, ``run_id``,
``run_dir``, ``status``, ``error``, ``matrix``, ``config_sha256``, and for finished runs
the flattened result (:meth:`bench.engine.result.RunResult.flat`). The axes are
therefore the columns before ``phase``: :func:`read_runs_table` returns them. Pretrained models
(:mod:`bench.study.pretrained`) follow the trained runs, with match ``pretrained``.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.engine.result import RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import update_text
from bench.run_files import RESULT
from bench.study.config import MatrixConfig
from bench.study.grid import CORE_AXES, is_cell_tokenizer
from bench.study.plan import PlannedRun
from bench.study.pretrained import PRETRAINED, PretrainedRun
from bench.study.run_status import Attempt, RunStatus

RUNS_CSV = "runs.csv"
FIRST_AFTER_AXES = "phase"
REBUILD = "run `bench run-matrix CONFIG` again to rewrite runs.csv from the run folders"


def run_row(run: PlannedRun | PretrainedRun, config: MatrixConfig) -> dict[str, Any]:
    """One runs.csv row: axes, status, and for a finished run every metric, count and provenance field."""
    row: dict[str, Any] = {k: run.cell.get(k) for k in CORE_AXES}
    row.update({k: v for k, v in run.cell.items() if k not in CORE_AXES})
    row.update({FIRST_AFTER_AXES: run.phase or ""}, run_id=run.run_id or "",
               run_dir=run.run_dir.name if run.run_dir else "", status=run.status.value, error=run.problem or "",
               matrix=config.name, config_sha256=config.sha256)
    if run.run_dir is None:
        return row
    record = Attempt.read(run.run_dir)
    if record is not None:
        row["error"] = record.error
    if run.status is RunStatus.DONE:
        row.update(RunResult.read(run.run_dir / RESULT).flat())
    return row


def write_runs_table(chains: list[list[PlannedRun]], config: MatrixConfig, results_dir: Path,
                     pretrained: list[PretrainedRun] = ()) -> Path:
    rows = [run_row(run, config) for chain in chains for run in chain] + [run_row(r, config) for r in pretrained]
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = results_dir / RUNS_CSV
    update_text(path, buffer.getvalue())
    return path


@dataclass
class RunsTable:
    rows: pd.DataFrame  # every run
    axes: list[str]  # the axis columns

    def done(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == RunStatus.DONE.value].copy()


def read_runs_table(results_dir: Path) -> RunsTable:
    path = results_dir / RUNS_CSV
    if not path.is_file():
        raise BenchError(f"{path} does not exist; run `bench run-matrix CONFIG` first (or give its results folder)")
    _check_rows(path)
    rows = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if rows.empty:
        raise BenchError(f"{path} has no runs")
    missing = [c for c in (FIRST_AFTER_AXES, "run_dir", "status", "match") if c not in rows.columns]
    if missing:
        raise BenchError(f"{path} has no {', '.join(map(repr, missing))} column: it is not a runs table of bench "
                         f"run-matrix; run `bench run-matrix CONFIG` again to rewrite it from the run folders")
    known = {status.value for status in RunStatus}
    unknown = rows.loc[~rows["status"].astype(str).isin(known)]
    if not unknown.empty:
        raise BenchError(f"{path}: row {unknown['run_dir'].iloc[0]}: unknown status {unknown['status'].iloc[0]!r} "
                         f"(known: {', '.join(sorted(known))}); run `bench run-matrix CONFIG` again to rewrite it "
                         f"from the run folders")
    named = rows["run_dir"].dropna().astype(str)
    if named.duplicated().any():
        raise BenchError(f"{path} lists run {named[named.duplicated()].iloc[0]} twice (a row is one run, not one more "
                         f"seed); run `bench run-matrix CONFIG` again to rewrite it from the run folders")
    return RunsTable(rows, list(rows.columns[: list(rows.columns).index(FIRST_AFTER_AXES)]))


def finished_runs(results_dir: Path, done: pd.DataFrame) -> dict:
    """Each finished row's run (``FinishedRun``) by folder name, with the result its run folder holds, checked
    before any number is used: the folder is the source of truth. A row whose result is gone, is of another run
    id, or says otherwise than its row is refused in one line; a pretrained model's row with no result is skipped."""
    return {row["run_dir"]: _finished_run(results_dir, row) for _, row in done.iterrows()
            if row["match"] != PRETRAINED or (results_dir / str(row["run_dir"]) / RESULT).is_file()}


def _finished_run(results_dir: Path, row: pd.Series):
    from bench.study.analysis import FinishedRun  # it imports torch

    path = results_dir / RUNS_CSV
    if pd.isna(row["run_dir"]):  # an empty cell: no folder to read the run from
        raise BenchError(f"{path}: a row is done but names no run folder (run_dir is empty); {REBUILD}")
    run_dir = results_dir / str(row["run_dir"])  # run folders are named relative to the results folder
    if not (run_dir / RESULT).is_file():
        raise BenchError(f"runs.csv lists {row['run_dir']} as done but {run_dir / RESULT} does not exist; {REBUILD}")
    run_id = "" if pd.isna(row.get("run_id")) else str(row["run_id"])
    result = finished_result(run_dir, run_id)
    if result is None:
        raise BenchError(f"{path}: row {row['run_dir']}: {run_dir / RESULT} is not the finished result of run id "
                         f"{run_id or '(none given)'}; {REBUILD}")
    expected = result_columns(result, row.get("match") == PRETRAINED)
    check_row(dict(row), expected, path)
    # a column the row lacks (a runs.csv edited or of an older version) is the result's
    return FinishedRun({**expected, **dict(row)}, result, run_dir)


def result_columns(result: RunResult, pretrained: bool) -> dict:
    """The columns of a finished row that its result gives: every number and name, and the seed."""
    columns = result.flat()
    if not pretrained:  # a pretrained model's row names it by its folder and has no seed
        columns.update(seed=result.spec.seed, model=result.spec.model, tokenizer=result.spec.tokenizer)
    return columns


def check_row(row: dict, expected: dict, path: Path) -> None:
    """A finished row must say what its run folder's result.json says (``expected``, :func:`result_columns`: the
    folder is the source of truth); the run id is :func:`finished_result`'s. Refused in one line, naming the row."""
    for key, want in expected.items():
        if key not in row or want is None or (isinstance(want, str) and not want) or (
                isinstance(want, float) and math.isnan(want)):
            continue
        have = row[key]
        if key == "tokenizer":  # a pretrained tokenizer's path: the row has it as the config writes it
            same = is_cell_tokenizer(str(want), str(have))
        elif isinstance(want, bool) or not isinstance(want, (int, float)):
            same = str(have).lower() == str(want).lower()
        else:
            try:
                same = math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=1e-12)
            except (TypeError, ValueError):
                same = False
        if not same:
            raise BenchError(f"{path}: row {row.get('run_dir')}: {key} is {have!r} but its result.json says {want!r}; "
                             f"{REBUILD}")


def _check_rows(path: Path) -> None:
    """Refuse a runs.csv whose rows do not all have the header's fields (a torn or edited file)."""
    rebuild = "run `bench run-matrix CONFIG` again to rewrite it from the run folders"
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise BenchError(f"{path} is not a readable CSV file ({exc}); {rebuild}") from None
    if not rows:
        raise BenchError(f"{path} is empty; {rebuild}")
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(rows[0]):
            raise BenchError(f"{path} line {number} has {len(row)} fields where the header has {len(rows[0])}: "
                             f"the file is torn; {rebuild}")
