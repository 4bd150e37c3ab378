"""What ``bench reproduce`` may compare: the recorded runs it can check, and reproductions that are other trainings.

A recorded run is checked only where its records agree: a matrix's run folder its ``cell.json`` vouches for
(:mod:`bench.study.matrix.folder_records`), whose ``spec.json`` hashes to its run id and names the spec its
``result.json`` records. A finished run folder left out (records that disagree, a deleted ``cell.json``) and a
run ``runs.csv`` records done whose folder is gone are *unchecked*: named, with why, never dropped in silence.

A reproduction is another training of the same run: never the recorded folder itself, nor a copy of it. A run's
record carries its own start and finish times and its wall time (to the nanosecond), which no training made again
can share; a copy shares them, and its weights with them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from bench.engine.resolve import ResolvedRun
from bench.engine.result import RunResult
from bench.errors import BenchError
from bench.fileio import sha256_file
from bench.ownership import is_reproduction
from bench.provenance import NOT_RECORDED
from bench.run_files import BEST, CELL, RESULT, SPEC

FOLDER = "folder"  # a row's column: the run's folder, where it has one (a reference's runs.csv has none)
RUNS_CSV = "runs.csv"
STAMPS = {"started_at": "start", "finished_at": "finish"}  # a run's recorded times (its provenance), in words


@dataclass(frozen=True)
class Unchecked:
    run: str  # its folder's name (or its run id)
    run_id: str | None  # None: not recorded readably
    why: str

    def line(self) -> str:
        return f"{self.run} ({self.why})"


@dataclass
class Recorded:
    rows: pd.DataFrame  # the finished runs that can be checked, as runs.csv rows (and their FOLDER)
    unchecked: list[Unchecked]


# --------------------------------------------------------------------------------------- reading runs


def recorded_runs(results: Path) -> Recorded:
    """The finished runs of ``results`` (a run folder, a matrix's results, a reference's runs.csv and matrix.toml, a
    folder of ``bench reproduce``), those whose records disagree set apart as unchecked."""
    rows = run_rows(results, "results folder")
    unchecked = _left_out(results, rows) if any(results.glob(f"*/{CELL}")) else []
    problems = {i: run_record_problem(Path(row[FOLDER])) if isinstance(row.get(FOLDER), str) else None
                for i, row in enumerate(rows.to_dict("records"))}
    unchecked += [Unchecked(_name(row), str(row["run_id"]), problems[i])
                  for i, row in enumerate(rows.to_dict("records")) if problems[i]]
    return Recorded(rows.loc[[problems[i] is None for i in range(len(rows))]].copy(), unchecked)


def run_rows(folder: Path, what: str) -> pd.DataFrame:
    """The finished runs of ``folder`` as runs.csv rows with their FOLDER: from a matrix's run folders, or its
    runs.csv alone (a committed reference), or the one run of a run folder, or the runs of an earlier --out."""
    if (folder / RESULT).is_file():
        return rows_of_run_folders([folder], what)
    if any(folder.glob(f"*/{CELL}")):
        from bench.study.matrix.runs_table import read_runs_table

        done = read_runs_table(folder).done()
        return done.assign(**{FOLDER: [str(folder / name) for name in done["run_dir"]]})
    if is_reproduction(folder):  # an earlier --out: bench reproduce's run folders
        return rows_of_run_folders(sorted(path.parent for path in folder.glob(f"*/{RESULT}")), what)
    if (folder / RUNS_CSV).is_file():
        return _reference_rows(folder / RUNS_CSV)
    raise BenchError(f"{folder} holds no recorded run (no result.json, no run folders, no runs.csv); give a run "
                     f"folder or a matrix's results folder")


def rows_of_run_folders(run_dirs: list[Path], what: str) -> pd.DataFrame:
    """Each run folder's finished run as a runs.csv row, its cell from its spec; a pretrained model's score refused."""
    rows = []
    for run_dir in run_dirs:
        result = RunResult.read(run_dir / RESULT)
        if result.spec is None:  # bench eval-hf's score of a model trained elsewhere
            raise BenchError(f"{what} {run_dir} is bench eval-hf's score of the pretrained model "
                             f"{result.pretrained.model_dir}: nothing was trained to reproduce; give a run folder or a "
                             f"matrix's results folder")
        spec = result.spec
        rows.append({"run_id": result.run_id, "run_dir": run_dir.name, "model": spec.model, "preset": spec.preset,
                     "tokenizer": spec.tokenizer, "dataset": spec.dataset, "seed": spec.seed, **result.flat(),
                     FOLDER: str(run_dir)})
    return pd.DataFrame(rows, columns=None if rows else ["run_id", "run_dir", FOLDER])


def _reference_rows(path: Path) -> pd.DataFrame:
    try:
        table = pd.read_csv(path, dtype={"run_id": str})
    except (ValueError, pd.errors.ParserError) as exc:
        raise BenchError(f"{path} is not a readable runs table ({type(exc).__name__}); restore it") from None
    missing = [c for c in ("run_id", "status") if c not in table.columns]
    if missing:
        raise BenchError(f"{path} has no {' or '.join(missing)} column: it is not a runs table of bench run-matrix; "
                         f"restore it")
    return table[table["status"] == "done"].copy()


def run_record_problem(run_dir: Path) -> str | None:
    """What in a finished run folder disagrees with its result.json: another run's files, a spec.json that does not
    hash to its run id, a result.json recording another spec than spec.json (edited)."""
    from bench.study.matrix.folder_records import run_files_problem

    if problem := run_files_problem(run_dir):
        return problem
    result = RunResult.read(run_dir / RESULT)
    if result.spec is None or not (run_dir / SPEC).is_file():
        return None
    try:
        resolved = ResolvedRun.from_json(json.loads((run_dir / SPEC).read_text()))
    except (BenchError, OSError, ValueError, KeyError, TypeError):
        return f"its {SPEC} is unreadable or does not hash to its run id: edited"
    here, there = (replace(spec, out_dir=None, data_dir=None).to_json() for spec in (result.spec, resolved.spec))
    here, there = ({**spec.pop("overrides"), **spec} for spec in (here, there))  # a field or an override: its key
    if differ := [key for key in {**here, **there} if here.get(key) != there.get(key)]:
        return (f"its {RESULT} records another spec than its {SPEC}: "
                + ", ".join(f"{key} {here.get(key)!r}, not {there.get(key)!r}" for key in differ))
    return None


def _left_out(results: Path, rows: pd.DataFrame) -> list[Unchecked]:
    """A matrix's finished run folders its runs table leaves out, and the runs its runs.csv records done whose folder
    is gone."""
    from bench.study.matrix.folder_records import matrix_identity, record_problem

    records = {path.parent: json.loads(path.read_text()) for path in results.glob(f"*/{CELL}")}  # read already
    identity = matrix_identity(results, list(records.values()))
    read = set(rows["run_dir"])
    unchecked = []
    for run_dir in sorted(path.parent for path in results.glob(f"*/{RESULT}") if path.parent.name not in read):
        record = records.get(run_dir)
        why = (record_problem(run_dir, record, identity) or "not finished as its records say" if record is not None
               else f"no {CELL}: not a run of this matrix (its settings changed, or its record was deleted)")
        run_id = (record or {}).get("run_id") or _recorded_run_id(run_dir)
        unchecked.append(Unchecked(run_dir.name, str(run_id) if run_id else None, why))
    known = set(rows["run_id"].astype(str)) | {u.run_id for u in unchecked}
    try:
        table = pd.read_csv(results / RUNS_CSV, dtype={"run_id": str, "run_dir": str}, keep_default_na=False)
        done = table[table["status"] == "done"].to_dict("records")
    except (OSError, ValueError, KeyError, pd.errors.ParserError):
        return unchecked  # runs.csv is written for users: the folders are the record
    return unchecked + [Unchecked(row["run_dir"], row["run_id"], f"its folder is missing, {RUNS_CSV} records it done")
                        for row in done if row["run_dir"] and not (results / row["run_dir"]).is_dir()
                        and row["run_id"] not in known]


def _recorded_run_id(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / RESULT).read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def _name(row: dict) -> str:
    return str(row.get("run_dir") or row["run_id"])


# --------------------------------------------------------------------------------------- what is compared


def check_reproduced_folder(reproduced: Path, results: Path) -> None:
    """``--reproduced`` is another folder than the one checked: neither the same, nor inside it, nor holding it."""
    if not reproduced.is_dir():
        raise BenchError(f"--reproduced {reproduced} does not exist; give the folder of the runs trained again")
    there, here = reproduced.resolve(), results.resolve()
    if there == here:
        raise BenchError("--reproduced is the folder being checked: give the folder of the runs trained again")
    if here in there.parents:
        raise BenchError(f"--reproduced {reproduced} is inside {results}, the folder being checked: its runs are the "
                         f"records themselves; give the folder of the runs trained again")
    if there in here.parents:
        raise BenchError(f"--reproduced {reproduced} holds {results}, the folder being checked; give the folder of the "
                         f"runs trained again")


def reproductions(reproduced: Path, ids: list[str]) -> tuple[pd.DataFrame, list[Unchecked]]:
    """The runs of ``reproduced`` whose records agree (rows), and the chosen runs whose reproduction's do not."""
    rows = run_rows(reproduced, "--reproduced folder")
    unchecked, keep = [], []
    for row in rows.to_dict("records"):
        chosen = str(row["run_id"]) in ids and isinstance(row.get(FOLDER), str)
        problem = run_record_problem(Path(row[FOLDER])) if chosen else None
        keep.append(problem is None)
        if problem:
            unchecked.append(Unchecked(_name(row), str(row["run_id"]), f"its reproduction {row[FOLDER]}: {problem}"))
    return rows.loc[keep].copy(), unchecked


def refuse_copies(recorded: pd.DataFrame, new: pd.DataFrame, ids: list[str], fix: str) -> None:
    """Refuse, in one line naming the run and ending with ``fix``, a reproduction that is the recorded training
    itself (a copy)."""
    new_by_id = {str(row["run_id"]): row for row in new.to_dict("records")}
    copies = []
    for row in recorded[recorded["run_id"].astype(str).isin(ids)].to_dict("records"):
        other = new_by_id.get(str(row["run_id"]))
        if other is not None and (why := same_training(row, other)):
            copies.append((_name(row), other.get(FOLDER), why))
    if copies:
        name, folder, why = copies[0]
        more = f" (and {len(copies) - 1} more run(s) alike)" if len(copies) > 1 else ""
        raise BenchError(f"{name}: {folder or 'its reproduction'} is a copy of the recorded run, not another training "
                         f"({why}){more}; {fix}")


def same_training(recorded: dict, new: dict) -> str | None:
    """What says a reproduction is the recorded training itself: the same wall time to the nanosecond, the same
    start time (where no wall time tells them apart), or the same finish time and the same weights."""
    same = [key for key in STAMPS if _stamp(recorded.get(key)) and
            _stamp(recorded.get(key)) == _stamp(new.get(key))]
    walls = [_seconds(recorded.get("wall_seconds")), _seconds(new.get("wall_seconds"))]
    both_timed = None not in walls
    if both_timed and math.isclose(*walls, rel_tol=1e-12):  # a float parsed from runs.csv may differ by an ulp
        return ", ".join([f"the same {STAMPS[key]} time {_stamp(recorded.get(key))}" for key in same]
                         + [f"the same wall time {walls[0]:.9g} s"])
    if "started_at" in same and not both_timed:
        return f"the same start time {_stamp(recorded.get('started_at'))}"
    if "finished_at" in same and _same_weights(recorded.get(FOLDER), new.get(FOLDER)):
        return f"the same finish time {_stamp(recorded.get('finished_at'))} and the same {BEST} (sha256)"
    return None


def _same_weights(one, other) -> bool:
    paths = [Path(folder) / BEST for folder in (one, other) if isinstance(folder, str)]
    return len(paths) == 2 and all(p.is_file() for p in paths) and sha256_file(paths[0]) == sha256_file(paths[1])


def _stamp(value) -> str | None:
    return value if isinstance(value, str) and value and value != NOT_RECORDED else None


def _seconds(value) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None
