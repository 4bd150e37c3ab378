"""Does a result reproduce here, and how close does it come? ``bench reproduce RESULTS``.

The recorded runs of a results folder (a matrix's run folders, a ``bench train`` run folder, or a committed
reference that keeps only ``runs.csv`` and ``matrix.toml``, its runs planned again and matched by run id) are
trained again from their recorded resolved configuration into a folder of their own, never into the folder
checked; or, with ``reproduced``, runs already trained elsewhere (the demo's) are compared without training.

For each run and metric: the recorded value, the new one, their absolute and relative difference,
"bit-identical" where they are, and where the study has several seeds of that run's cell, the difference in
units of the seeds' standard deviation. A difference beyond the tolerance (a quarter of that standard deviation
where it is known, else :data:`RELATIVE_TOLERANCE`) fails the check, as do data that hash otherwise than the
runs recorded (refused before anything is trained). What differs between the two machines is named.

Only what was compared is vouched for: a recorded run that cannot be checked (its records disagree, its folder is
gone) is named and fails the check, and a "reproduction" that is the record itself (the folder checked, a copy of
it) is refused (:mod:`bench.study.matrix.reproduce_checks`). The folder trained into is claimed as every command
claims its output (:mod:`bench.ownership`): new, or this results folder's reproduction from before.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from bench.engine.resolve import ResolvedRun
from bench.engine.result import finished_result
from bench.errors import BenchError
from bench.metrics import METRICS, shown_metrics
from bench.ownership import claim_reproduction_folder, record_reproduction_owner
from bench.provenance import NOT_RECORDED
from bench.run_files import MATRIX_CONFIG, RESULT, SPEC
from bench.study.matrix.reproduce_checks import (FOLDER, Recorded, Unchecked, check_reproduced_folder, recorded_runs,
                                                 refuse_copies, reproductions, rows_of_run_folders)

RELATIVE_TOLERANCE = 0.01  # where the seeds' spread of a cell is not known
SEED_SHARE = 0.25  # of the seeds' standard deviation, where it is known
# What a reproduction compares: the total NLL and every metric the tables show (bench.metrics).
COMPARED = ("total_nll_nats", *(metric.key for metric in shown_metrics()))
CELL_COLUMNS = ("model", "preset", "tokenizer", "dataset", "match", "phase")  # a cell: a run but for its seed
PROVENANCE = ("device", "device_name", "cpu_model", "cpu_extensions", "torch_cpu_capability", "torch", "threads")


@dataclass
class Difference:
    run: str
    metric: str
    recorded: float
    new: float
    seed_sd: float | None  # the recorded cell's standard deviation over seeds, where it has two or more
    perplexity: bool = False  # compared as its logarithm

    @property
    def absolute(self) -> float:
        return self.new - self.recorded

    @property
    def relative(self) -> float:
        """|new - recorded| / |recorded|; for a perplexity, of its logarithm (bits per word or token: the
        quantity that is compared, where exp would turn a 0.3% difference in bits into 1.3%)."""
        if self.perplexity and self.recorded > 1 and self.new > 1:
            return abs(math.log(self.new) - math.log(self.recorded)) / math.log(self.recorded)
        return abs(self.absolute) / max(abs(self.recorded), 1e-300)

    @property
    def in_seed_sds(self) -> float | None:
        return abs(self.absolute) / self.seed_sd if self.seed_sd else None

    @property
    def within(self) -> bool:
        if math.isnan(self.recorded) or math.isnan(self.new):  # a number on one side only
            return False
        if self.seed_sd:
            return abs(self.absolute) <= SEED_SHARE * self.seed_sd
        return self.relative <= RELATIVE_TOLERANCE

    def row(self) -> dict:
        identical = self.new == self.recorded
        return {"run": self.run, "metric": self.metric, "recorded": f"{self.recorded:.10g}", "new": f"{self.new:.10g}",
                "difference": f"{self.absolute:+.3g}", "relative": f"{self.relative:.2g}",
                "seed sd": "-" if self.in_seed_sds is None else f"{self.in_seed_sds:.2f}",
                "verdict": "bit-identical" if identical else "within tolerance" if self.within else
                "NaN or missing on one side" if math.isnan(self.recorded) or math.isnan(self.new) else "EXCEEDS"}


@dataclass
class Reproduction:
    differences: list[Difference]
    machines: list[str]  # what differs between the recorded runs' machines and this one
    compared: list[str] = field(default_factory=list)  # the recorded runs compared with a reproduction
    missing: list[str] = field(default_factory=list)  # recorded runs with no reproduction to compare
    unchecked: list[Unchecked] = field(default_factory=list)  # recorded runs that could not be checked, and why

    @property
    def ok(self) -> bool:
        return self.problem() is None

    def problem(self) -> str | None:
        """Why the reproduction does not vouch for the chosen runs, in one line (None: it does)."""
        exceeding = sum(not d.within for d in self.differences)
        parts = [f"{exceeding} difference(s) beyond the tolerance (the table shows them; --brief hides it)"
                 ] if exceeding else []
        if self.missing:
            parts.append(f"{len(self.missing)} recorded run(s) not reproduced: {', '.join(self.missing)} (none in "
                         f"the reproduced folder, or its training failed: see its status.json and error.txt)")
        if self.unchecked:
            parts.append(f"{len(self.unchecked)} recorded run(s) not checked: {self._unchecked_text()}; restore "
                         f"their records (or move their folders out) and run bench reproduce again")
        if not parts and not self.compared:
            parts.append("nothing compared")
        return "; ".join(parts) or None

    def summary(self) -> str:
        """One line; "all within tolerance" only where every chosen run was compared."""
        identical = [r for r in self.compared if all(d.new == d.recorded for d in self.differences if d.run == r)]
        worst = max((d for d in self.differences if not math.isnan(d.relative)), key=lambda d: d.relative,
                    default=None)
        whole = not self.missing and not self.unchecked
        chosen = len(self.compared) + len(self.missing) + len(self.unchecked)
        line = (f"{len(self.compared)} runs" if whole else f"{len(self.compared)} of {chosen} recorded runs compared")
        line += f"; {len(identical)} bit-identical" if self.compared else ""
        if worst is not None and worst.relative > 0:
            line += f"; the largest relative difference {worst.relative:.2g} ({worst.run}, {worst.metric})"
        if self.missing:
            line += f"; {len(self.missing)} not reproduced: {', '.join(self.missing)}"
        if self.unchecked:
            line += f"; {len(self.unchecked)} not checked: {self._unchecked_text()}"
        exceeding = sum(not d.within for d in self.differences)
        if exceeding:
            return line + f"; {exceeding} difference(s) beyond the tolerance"
        if not self.compared:
            return line + "; nothing compared"
        return line + ("; all within tolerance" if whole else f"; the {len(self.compared)} compared within tolerance")

    def _unchecked_text(self) -> str:
        return "; ".join(entry.line() for entry in self.unchecked)


# --------------------------------------------------------------------------------------- comparing


def seed_spread(rows: pd.DataFrame, column: str) -> dict[str, float]:
    """Each run id's cell's standard deviation of ``column`` over its seeds (cells with two or more seeds); a cell
    is every axis of the runs table (the columns before ``phase``, the config's own axes too) but the seed."""
    axes = list(rows.columns[: list(rows.columns).index("phase") + 1]) if "phase" in rows.columns else []
    keys = [c for c in axes or CELL_COLUMNS if c in rows.columns and c not in ("seed", "run_id")]
    spread = {}
    for _, group in rows.groupby(keys, dropna=False) if keys else []:
        values = [float(v) for v in group[column] if pd.notna(v)]
        if len(values) >= 2 and statistics.stdev(values) > 0:
            for run_id in group["run_id"]:
                spread[run_id] = statistics.stdev(values)
    return spread


def compare(recorded: pd.DataFrame, new: pd.DataFrame, runs: list[str] | None = None) -> Reproduction:
    """The recorded runs (``runs``: their ids, else all) against their reproductions, by run id."""
    new_by_id = {row["run_id"]: row for row in new.to_dict("records")}
    chosen = recorded if runs is None else recorded[recorded["run_id"].isin(runs)]
    columns = {f"{split}_{key}": key in METRICS and METRICS[key].perplexity for split in ("valid", "test")
               for key in COMPARED if f"{split}_{key}" in recorded.columns}
    spreads = {column: seed_spread(recorded, column) for column in columns}
    differences, compared, missing, machines = [], [], [], set()
    for row in chosen.to_dict("records"):
        name = str(row.get("run_dir") or row["run_id"])
        other = new_by_id.get(row["run_id"])
        if other is None:
            missing.append(name)
            continue
        compared.append(name)
        for column, perplexity in columns.items():
            if pd.notna(row.get(column)) or pd.notna(other.get(column)):  # one side missing or NaN: a difference
                differences.append(Difference(name, column, _number(row.get(column)), _number(other.get(column)),
                                              spreads[column].get(row["run_id"]), perplexity))
        for key in PROVENANCE:
            was, now = _text(row.get(key)), _text(other.get(key))
            if was != now:
                machines.add(f"{key}: {was} -> {now}")
    return Reproduction(differences, sorted(machines), compared, missing)


def _number(value) -> float:
    return float(value) if value is not None and pd.notna(value) else math.nan


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_RECORDED
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------------------- training again


def recorded_configs(results: Path, rows: pd.DataFrame, data_dir: Path) -> dict[str, ResolvedRun]:
    """Each recorded run's resolved configuration by run id: its spec.json, or (a reference with runs.csv and
    matrix.toml alone) the matrix planned again, its runs matched by run id."""
    configs = {}
    for row in rows.to_dict("records"):
        folder = Path(row[FOLDER]) if isinstance(row.get(FOLDER), str) else None
        if folder is not None and (folder / SPEC).is_file():
            configs[row["run_id"]] = ResolvedRun.from_json(json.loads((folder / SPEC).read_text()))
    if len(configs) < len(rows):
        configs.update(_planned_configs(results, rows, data_dir))
    return configs


def _planned_configs(results: Path, rows: pd.DataFrame, data_dir: Path) -> dict[str, ResolvedRun]:
    from bench.study.matrix.config import register_corpora
    from bench.study.matrix.grid import load_config
    from bench.study.matrix.plan import plan

    config_path = results / MATRIX_CONFIG
    if not config_path.is_file():
        return {}
    config = load_config(config_path, with_plugins=False)  # a copy: its plug-in paths were relative to the original
    register_corpora(config, data_dir)
    _check_split_hashes(rows, data_dir)  # before planning trains any tokenizer
    return {run.run_id: run.resolved for chain in plan(config, results / ".planned", data_dir) for run in chain
            if run.resolved is not None}


def _check_split_hashes(rows: pd.DataFrame, data_dir: Path) -> None:
    """The splits a runs table records against the files here."""
    from bench.data.store import open_split

    for split in ("train", "valid", "test"):
        column = f"data_sha256_{split}"
        if column not in rows.columns:
            continue
        for dataset, sha in {(r["dataset"], r[column]) for r in rows.to_dict("records") if pd.notna(r[column])}:
            _same_split(dataset, split, sha, open_split(dataset, split, data_dir).sha256)


def _same_split(dataset: str, split: str, recorded: str, here: str) -> None:
    if here != recorded:
        raise BenchError(f"the {dataset} {split} split here (sha256 {here[:12]}) is not the one the recorded runs used "
                         f"({recorded[:12]}): a reproduction needs the same data; fetch it again (bench data fetch) or "
                         f"give its --data-dir")


def check_data(configs: dict[str, ResolvedRun], data_dir: Path) -> None:
    """Refuse, before anything is trained, data that hash otherwise than the recorded runs' (their splits, then
    their tokenizer trained here)."""
    from bench.data.facts import load_data_facts
    from bench.data.store import open_split

    for resolved in configs.values():
        for split, sha in resolved.data.split_sha256.items():
            _same_split(resolved.spec.dataset, split, sha, open_split(resolved.spec.dataset, split, data_dir).sha256)
    for dataset, scheme in sorted({(r.spec.dataset, r.spec.tokenizer) for r in configs.values()}):
        here = load_data_facts(dataset, scheme, data_dir).tokenizer_hash
        there = {r.data.tokenizer_hash for r in configs.values() if (r.spec.dataset, r.spec.tokenizer) == (dataset,
                                                                                                          scheme)}
        if there - {None, here}:
            raise BenchError(f"the {scheme} tokenizer trained here from {dataset} (sha256 {str(here)[:12]}) is not the "
                             f"recorded runs' ({', '.join(str(t)[:12] for t in there)}); a reproduction needs the same "
                             f"tokenizer library and data")


def train_again(configs: list[ResolvedRun], out: Path, data_dir: Path, jobs: int, threads: int | None,
                show_progress: bool) -> pd.DataFrame:
    """Train each configuration in ``out``/<its folder name> (resuming one already there), ``threads`` CPU threads
    each; their result rows."""
    from bench.plugins import for_other_processes
    from bench.study.matrix.execute import cpu_threads_per_run, finished_chains
    from bench.study.matrix.plan import PlannedRun
    from bench.study.matrix.run_status import RunStatus

    todo = []
    for resolved in configs:
        moved = resolved.with_spec(out_dir=str(out / Path(resolved.spec.out_dir or resolved.run_id()).name),
                                   data_dir=str(data_dir))
        todo.append([PlannedRun({}, None, moved.spec, moved, RunStatus.NEW)])
    plugins = for_other_processes() if jobs > 1 else []
    for _ in finished_chains(todo, jobs, show_progress, cpu_threads_per_run(jobs, threads), plugins):
        pass
    rows = []
    for [run] in todo:
        result = finished_result(run.run_dir, run.run_id)
        if result is not None:
            rows.append({"run_id": result.run_id, "run_dir": run.run_dir.name, **result.flat(),
                         FOLDER: str(run.run_dir)})
    return pd.DataFrame(rows, columns=["run_id"] if not rows else None)


def reproduce(results: Path, first: int | None, run_ids: list[str], out: Path | None, reproduced: Path | None,
              jobs: int, data_dir: Path | None, threads: int | None = None, show_progress: bool = True
              ) -> Reproduction:
    """``bench reproduce``: the chosen recorded runs of ``results`` trained again in ``out`` (or already in
    ``reproduced``), compared with what was recorded; ``threads`` per run (default: as many as the runs recorded,
    where they agree: a CPU's sums depend on them). Recorded runs that cannot be checked are named in the outcome;
    a reproduction that is no other training than the record (the folder checked, a copy of it) is refused."""
    from bench.fileio import require_folder

    from bench.engine.hardware.device import check_threads

    results = require_folder(results, "results folder")
    if not results.is_dir():
        raise BenchError(f"{results} does not exist; give a results folder or a run folder")
    if first is not None and first < 1:
        raise BenchError(f"--runs {first}: give a number of runs of at least 1")
    if jobs < 1:
        raise BenchError(f"--jobs {jobs}: give at least 1")
    if out is not None and reproduced is not None:
        raise BenchError("--out and --reproduced: give one (--out trains the runs again there, --reproduced compares "
                         "runs trained again before)")
    check_threads(threads, "--threads")
    if reproduced is not None:
        check_reproduced_folder(require_folder(reproduced, "--reproduced folder"), results)
    recorded = recorded_runs(results)
    ids, unchecked = _chosen(recorded, first, run_ids, results)
    if not ids and not unchecked:
        raise BenchError(f"{results} records no finished run to reproduce; give a folder whose runs are done")
    if reproduced is not None:
        new, not_read = reproductions(reproduced, ids)
        refuse_copies(recorded.rows, new, ids, f"compare with runs trained again (bench reproduce {results} --out DIR "
                                               f"trains them)")
        return replace(compare(recorded.rows, new, ids), unchecked=unchecked + not_read)
    out = require_folder(out or Path("reproductions") / results.resolve().name, "--out folder")
    if out.resolve() == results.resolve() or results.resolve() in out.resolve().parents:
        raise BenchError(f"--out {out} would train into {results}, the folder being checked; choose another folder")
    claim_reproduction_folder(out, results)
    new = _train_chosen(results, recorded.rows, ids, out, jobs, data_dir, threads, show_progress)
    return replace(compare(recorded.rows, new, ids), unchecked=unchecked)


def _train_chosen(results: Path, rows: pd.DataFrame, ids: list[str], out: Path, jobs: int, data_dir: Path | None,
                  threads: int | None, show_progress: bool) -> pd.DataFrame:
    """The chosen runs trained again in ``out`` (those there already finished: checked to be no copies); their rows."""
    from bench.data.paths import resolve_data_dir

    if not ids:
        return pd.DataFrame(columns=["run_id"])
    data = resolve_data_dir(data_dir)
    configs = recorded_configs(results, rows, data)
    unplanned = [i for i in ids if i not in configs]
    if unplanned:
        why = ("matrix.toml plans other runs: the code, the config or the data changed since"
               if (results / MATRIX_CONFIG).is_file() else f"no matrix.toml in {results} to plan them from")
        raise BenchError(f"recorded run(s) {', '.join(i[:10] for i in unplanned)} have no configuration that resolves "
                         f"to their run id here (no spec.json, and {why}); reproduce them at the commit, with the data, "
                         f"that made them")
    phased = [i[:10] for i in ids if configs[i].train.init_from]
    if phased:
        raise BenchError(f"run(s) {', '.join(phased)} start from another run's weights (a phase of a matrix); bench "
                         f"reproduce trains single runs: reproduce the whole matrix with bench run-matrix instead")
    targets = [out.resolve() / Path(configs[i].spec.out_dir or i).name for i in ids]
    if any(t == results.resolve() or results.resolve() in t.parents for t in targets):
        raise BenchError(f"--out {out} would train into {results}, the folder being checked; choose another folder")
    check_data({i: configs[i] for i in ids}, data)
    if finished := [t for t in targets if (t / RESULT).is_file()]:  # reused as they are: no copies of the records
        refuse_copies(rows, rows_of_run_folders(finished, "--out folder"), ids, f"move it out of {out}: a run "
                      f"found finished there is not trained again")
    if threads is None and "threads" in rows:  # as the recorded runs, where they agree: a CPU's sums depend on it
        recorded = {_text(t) for t in rows.loc[rows["run_id"].isin(ids), "threads"]}
        agreed = recorded.pop() if len(recorded) == 1 else ""
        threads = int(agreed) if agreed.isdigit() else None
    record_reproduction_owner(out, results)
    return train_again([configs[i] for i in ids], out, data, jobs, threads, show_progress)


def _chosen(recorded: Recorded, first: int | None, run_ids: list[str],
            results: Path) -> tuple[list[str], list[Unchecked]]:
    """The chosen runs that can be checked, by run id, and the chosen ones that cannot (all of them, unless --run
    names runs)."""
    checkable = [str(i) for i in recorded.rows["run_id"]]
    if not run_ids:
        return (checkable[:first] if first else checkable), recorded.unchecked
    known = list(dict.fromkeys(checkable + [u.run_id for u in recorded.unchecked if u.run_id]))
    chosen = []
    for wanted in run_ids:
        found = [i for i in known if i.startswith(wanted)]
        if len(found) != 1:
            raise BenchError(f"--run {wanted}: {'no' if not found else len(found)} recorded run(s) of {results} "
                             f"match; give a longer prefix of a run id from its runs.csv")
        chosen.append(found[0])
    chosen = chosen[:first] if first else chosen
    return [i for i in chosen if i in checkable], [u for u in recorded.unchecked if u.run_id in chosen]
