"""``runs.csv``: one row per run of a matrix, written after every run and read by the report.

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

from bench.engine.result import RunResult
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


def check_row(row: dict, result: RunResult, path: Path) -> None:
    """A finished row must say what its run folder's result.json says (the folder is the source of truth): every
    number and name the result gives, the seed and the run id. Refused in one line, naming the row."""
    expected = {**result.flat(), "run_id": result.run_id}
    if row.get("match") != PRETRAINED:  # a pretrained model's row names it by its folder and has no seed
        expected.update(seed=result.spec.seed, model=result.spec.model, tokenizer=result.spec.tokenizer)
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
                             f"run `bench run-matrix CONFIG` again to rewrite runs.csv from the run folders")


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
