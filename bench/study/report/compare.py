"""``bench compare A B``: two runs, or two matrices' results, side by side on the same text.

Two run folders: every comparable metric of their test split, A, B and A - B; the difference in bits per byte
gets a 95% interval from a paired bootstrap over the documents of the text when both runs saved their per-token
losses (one trained model a side: the interval covers the text sample only, and no p-value is given).

Two results folders: each cell they share (the same value of every axis but the seed, and the same phase), the
seed means of test bits per byte, and A - B with the interval and p-value of one Welch t over seeds (Holm-adjusted
over the cells), as the report computes them. Runs scored on different texts are refused: their numbers do not
compare. Every number comes from the run folders' own result.json, read as the report reads them
(runs_table.read_runs_table; runs.csv is never read): a result.json whose numbers its own total NLL and counts do
not give is refused. A perplexity that is not finite (one too large
for a float, or of a text without words) is left out and named in a note, never compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.metrics import METRICS, compare_label, shown_metrics
from bench.run_files import CELL, RESULT
from bench.study.matrix.run_status import RunStatus
from bench.study.report.report_tables import interval_text
from bench.study.stats.uncertainty import compare, holm
from tokenizers_study import lossless_on


@dataclass
class Compared:
    rows: list[dict]
    columns: list[str]
    notes: list[str] = field(default_factory=list)


def compare_paths(a: Path, b: Path) -> Compared:
    kinds = {_kind(path) for path in (a, b)}
    if kinds == {"run"}:
        return compare_runs(a, b)
    if kinds == {"results"}:
        return compare_results(a, b)
    raise BenchError(f"give two run folders (with result.json) or two results folders (a matrix's run folders); "
                     f"{a} is a {_kind(a)} and {b} a {_kind(b)}")


def _kind(path: Path) -> str:
    if (path / RESULT).is_file():
        return "run"
    if any(path.glob(f"*/{CELL}")):
        return "results"
    if not path.exists():
        raise BenchError(f"{path} does not exist; give a run folder or a matrix's results folder")
    return "folder of neither"


def compare_runs(a: Path, b: Path) -> Compared:
    from bench.engine.result import RunResult
    from bench.study.matrix.finished_run import FinishedRun

    from bench.study.matrix.folder_records import run_files_problem

    for path in (a, b):
        if (problem := run_files_problem(path)) is not None:
            raise BenchError(f"{path}: {problem}; its result cannot be told to be its own: compare the run's own "
                             f"folder")
    runs = [FinishedRun({}, RunResult.read(path / RESULT), path) for path in (a, b)]
    tests = [run.result.metrics.get("test") for run in runs]
    if any(t is None for t in tests):
        raise BenchError(f"{a if tests[0] is None else b} has no test-split result; score it with bench eval RUN "
                         f"--split test")
    texts = [_test_text(run) for run in runs]
    if texts[0] != texts[1]:
        raise BenchError(f"{a} and {b} were scored on different test texts (sha256 {texts[0][:12]}... and "
                         f"{texts[1][:12]}...): their numbers do not compare")
    losses = [run.text_losses("test") for run in runs]  # bits per byte is finite in every readable result
    comparison = compare({0: tests[0].bits_per_byte}, {0: tests[1].bits_per_byte},
                         {0: losses[0]} if losses[0] else None, {0: losses[1]} if losses[1] else None)
    intervals = {"bits_per_byte": interval_text(comparison)}  # by metric key: the only metric with one
    rows, odd = [], []
    for metric in shown_metrics():
        pair = [getattr(t, metric.key) for t in tests]
        if all(_finite(v) for v in pair):
            rows.append({"metric": compare_label(metric), "A": pair[0], "B": pair[1], "A - B": pair[0] - pair[1],
                         **({"95% interval": intervals[metric.key]} if metric.key in intervals else {})})
        else:
            odd.append(f"{compare_label(metric)} (A {pair[0]}, B {pair[1]})")
    notes = [f"A: {a} ({_describe(runs[0].result)}); B: {b} ({_describe(runs[1].result)})",
             "One trained model a side: " + (f"the interval ({comparison.interval}) covers the sample of text only, "
                                             f"not training noise; no p-value (seeds are the unit of replication)"
                                             if comparison.low is not None else
                                             f"no interval over seeds and no p-value; none over the text either: "
                                             f"{_no_text_interval((a, b), runs, losses)}")]
    if odd:
        notes.append(f"NOT A NUMBER, left out: {'; '.join(odd)}: a value that is not a finite number has no "
                     f"difference to show")
    lossy = [str(path) for path, run, test in zip((a, b), runs, tests)
             if not lossless_on(run.result.tokenizer.scheme, test.lossless)]
    if lossy:
        notes.append(f"NOT COMPARABLE: {', '.join(lossy)} scores a lossy tokenization (another, easier text)")
    return Compared(rows, ["metric", "A", "B", "A - B", "95% interval"], notes)


def _no_text_interval(paths: tuple[Path, Path], runs: list, losses: list) -> str:
    """Why two runs' losses give no interval over the documents of their (one) test text."""
    from bench.data.documents import MIN_RESAMPLED, document_starts
    from bench.study.matrix.finished_run import read_document_losses

    unsaved = [str(path) for path, run in zip(paths, runs)
               if run.token_nll("test") is None and read_document_losses(run.run_dir, "test") is None]
    if unsaved:
        return f"no per-token losses were saved for {' and '.join(unsaved)} (dump_token_losses = true saves them)"
    starts, kind = document_starts(runs[0].split_data("test").read_text())
    if len(starts) < MIN_RESAMPLED:
        return (f"the test text has {len(starts)} {kind}{'s' if len(starts) > 1 else ''}, fewer than the "
                f"{MIN_RESAMPLED} a bootstrap needs")
    unmatched = [str(path) for path, text in zip(paths, losses) if text is None]
    return f"the per-token losses of {' and '.join(unmatched)} do not give the test text back (a lossy tokenization)"


def _describe(result) -> str:
    seed = f", seed {result.spec.seed}" if result.spec is not None else ""  # a pretrained model has none
    return f"{result.model.name}, {result.tokenizer.scheme}, {result.data.corpus}{seed}"


def _test_text(run) -> str:
    """The sha256 of the text a run's test numbers were scored on."""
    split = run.result.data.splits.get("test")
    if split is None:  # a result with test metrics records its test text: this one is damaged
        raise BenchError(f"{run.run_dir / RESULT} has test metrics but no record of the test text they were scored "
                         f"on; it is damaged: delete it and run the run again")
    return split.sha256


def _finite(value) -> bool:
    """A number to compare: a diverged or damaged result may give nan, inf or no number at all."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def compare_results(a: Path, b: Path) -> Compared:
    from bench.study.matrix.runs_table import FIRST_AFTER_AXES, read_runs_table

    tables = [read_runs_table(path) for path in (a, b)]
    keys = [k for k in tables[0].axes if k != "seed" and k in tables[1].axes] + [FIRST_AFTER_AXES]
    notes = [f"A: {a}; B: {b}. Seed means of test bits per byte; A - B with one Welch t over seeds (its interval "
             "and p-value), p-values Holm-adjusted over the cells; a cell with one seed on a side has none."]
    notes += [f"{side}: {line}" for side, table in zip("AB", tables) for line in table.left_out]
    # every number from the runs' own result.json (table.runs), as the report reads them
    cells = [_cells(side, path, table, keys, notes) for side, path, table in zip("AB", (a, b), tables)]
    rows, comparisons, bits_per_byte = [], [], METRICS["bits_per_byte"].label
    for key, side_a in cells[0].items():
        side_b = cells[1].get(key)
        if side_b is None:
            continue
        if {_test_text(r) for r in side_a.values()} != {_test_text(r) for r in side_b.values()}:
            raise BenchError(f"cell {dict(zip(keys, key))} was scored on different test texts in {a} and {b}: its "
                             f"numbers do not compare")
        values = [{seed: run.result.metrics["test"].bits_per_byte for seed, run in side.items()}
                  for side in (side_a, side_b)]
        comparison = compare(values[0], values[1])
        comparisons.append(comparison)
        lossless = all(lossless_on(run.result.tokenizer.scheme, run.result.metrics["test"].lossless)
                       for side in (side_a, side_b) for run in side.values())
        rows.append({**{k: v for k, v in zip(keys, key) if k != FIRST_AFTER_AXES or v},
                     "seeds": f"{len(values[0])} / {len(values[1])}", f"A {bits_per_byte}": _mean(values[0]),
                     f"B {bits_per_byte}": _mean(values[1]), "A - B": round(comparison.difference, 4),
                     "95% interval": interval_text(comparison), "p": comparison.p_value, "p (Holm)": None,
                     "note": "" if lossless else "lossy: another text, NOT comparable"})
    if not rows:
        raise BenchError(f"{a} and {b} share no finished cell (the same value of every axis but the seed, and the "
                         f"same phase); nothing to compare" + "".join(f". {note}" for note in notes[1:]))
    for row, p in zip(rows, holm([c.p_value for c in comparisons])):
        row["p (Holm)"] = p
    return Compared(rows, list(rows[0]), notes)


def _cells(side: str, path: Path, table, keys: list[str], notes: list[str]) -> dict[tuple, dict]:
    """One side's runs by cell (its axes but the seed, and its phase), each cell's by seed; the runs that are no
    result left out and named in ``notes``."""
    cells: dict[tuple, dict] = {}
    unscored = []
    for name, run in sorted(table.runs.items()):
        test = run.result.metrics.get("test")
        if test is None:
            unscored.append(name)
            continue
        key = tuple("" if pd.isna(run.row[k]) else run.row[k] for k in keys)
        cell, seed = cells.setdefault(key, {}), run.result.spec.seed if run.result.spec is not None else None
        if seed in cell:  # an axis of this side's matrix that the other lacks
            raise BenchError(f"{path}: {cell[seed].run_dir.name} and {name} are both seed {seed} of cell "
                             f"{dict(zip(keys, key))}; compare the results of matrices with the same axes")
        cell[seed] = run
    if unscored:
        notes.append(f"NOT SCORED ON TEST, left out: {side} has {len(unscored)} finished run(s) with no test-split "
                     f"result ({', '.join(unscored)}); score them with bench eval RUN --split test")
    stuck = table.rows[table.rows["status"] == RunStatus.NOT_LEARNING.value]
    if not stuck.empty:  # stopped at their unigram floor: not results, and not in the seed means above
        notes.append(f"NOT LEARNING, left out: {side} has {len(stuck)} run(s) stopped at their unigram floor ("
                     f"{', '.join(sorted(stuck['run_dir'].astype(str)))})")
    return cells


def _mean(values: dict) -> float:
    return round(sum(values.values()) / len(values), 4)
