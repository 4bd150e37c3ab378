"""``bench compare A B``: two runs, or two matrices' results, side by side on the same text.

Two run folders: every comparable metric of their test split, A, B and A - B; the difference in bits per byte
gets a 95% interval from a paired bootstrap over the documents of the text when both runs saved their per-token
losses (one trained model a side: the interval covers the text sample only, and no p-value is given).

Two results folders: each cell they share (the same model, tokenization, data, matching rule and phase), the
seed means of test bits per byte, and A - B with the interval and p-value of one Welch t over seeds (Holm-adjusted
over the cells), as the report computes them. Runs scored on different texts are refused: their numbers do not
compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.run_files import RESULT
from bench.study.run_status import RunStatus
from bench.study.report_tables import interval_text
from bench.study.uncertainty import compare, holm

METRICS = (("bits_per_byte", "bits/byte"), ("bits_per_char", "bits/char"), ("word_perplexity", "word ppl"),
           ("word_perplexity_eos", "word ppl (eos)"), ("token_perplexity", "token ppl (NOT comparable)"))


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
    raise BenchError(f"give two run folders (with result.json) or two results folders (with runs.csv); {a} is a "
                     f"{_kind(a)} and {b} a {_kind(b)}")


def _kind(path: Path) -> str:
    if (path / RESULT).is_file():
        return "run"
    if (path / "runs.csv").is_file():
        return "results"
    if not path.exists():
        raise BenchError(f"{path} does not exist; give a run folder or a matrix's results folder")
    return "folder of neither"


def compare_runs(a: Path, b: Path) -> Compared:
    from bench.engine.result import RunResult
    from bench.study.analysis import FinishedRun

    runs = [FinishedRun({}, RunResult.read(path / RESULT), path) for path in (a, b)]
    tests = [run.result.metrics.get("test") for run in runs]
    if any(t is None for t in tests):
        raise BenchError(f"{a if tests[0] is None else b} has no test-split result; score it with bench eval RUN "
                         f"--split test")
    texts = [run.result.data.splits["test"].sha256 for run in runs]
    if texts[0] != texts[1]:
        raise BenchError(f"{a} and {b} were scored on different test texts (sha256 {texts[0][:12]}... and "
                         f"{texts[1][:12]}...): their numbers do not compare")
    rows = [{"metric": label, "A": getattr(tests[0], key), "B": getattr(tests[1], key),
             "A - B": getattr(tests[0], key) - getattr(tests[1], key)} for key, label in METRICS]
    losses = [run.text_losses("test") for run in runs]
    comparison = compare({0: tests[0].bits_per_byte}, {0: tests[1].bits_per_byte},
                         {0: losses[0]} if losses[0] else None, {0: losses[1]} if losses[1] else None)
    rows[0]["95% interval"] = interval_text(comparison)
    notes = [f"A: {a} ({_describe(runs[0].result)}); B: {b} ({_describe(runs[1].result)})",
             "One trained model a side: " + (f"the interval ({comparison.interval}) covers the sample of text only, "
                                             f"not training noise; no p-value (seeds are the unit of replication)"
                                             if comparison.low is not None else
                                             "no interval (save per-token losses with dump_token_losses = true for "
                                             "one over documents), and no p-value")]
    lossy = [str(p) for p, t in zip((a, b), tests) if not t.lossless]
    if lossy:
        notes.append(f"NOT COMPARABLE: {', '.join(lossy)} scores a lossy tokenization (another, easier text)")
    return Compared(rows, ["metric", "A", "B", "A - B", "95% interval"], notes)


def _describe(result) -> str:
    return f"{result.spec.model}, {result.tokenizer.scheme}, {result.spec.dataset}, seed {result.spec.seed}"


def compare_results(a: Path, b: Path) -> Compared:
    from bench.study.runs_table import read_runs_table

    tables = [read_runs_table(path) for path in (a, b)]
    done = [t.done() for t in tables]
    keys = [k for k in ("model", "preset", "tokenizer", "dataset", "match", "phase") if all(k in d for d in done)]
    for frame in done:
        if "phase" in frame:
            frame["phase"] = frame["phase"].astype(object).where(frame["phase"].notna(), "")
    rows, comparisons = [], []
    for key, side_a in done[0].groupby(keys, sort=True, dropna=False):
        mask = (done[1][keys] == pd.Series(dict(zip(keys, key)))).all(axis=1)
        side_b = done[1][mask]
        if side_b.empty:
            continue
        if set(side_a["data_sha256_test"]) != set(side_b["data_sha256_test"]):
            raise BenchError(f"cell {dict(zip(keys, key))} was scored on different test texts in {a} and {b}: its "
                             f"numbers do not compare")
        values = [dict(zip(side["seed"], side["test_bits_per_byte"].astype(float))) for side in (side_a, side_b)]
        comparison = compare(values[0], values[1])
        comparisons.append(comparison)
        rows.append({**{k: v for k, v in zip(keys, key) if k != "phase" or v},
                     "seeds": f"{len(values[0])} / {len(values[1])}", "A bits/byte": _mean(values[0]),
                     "B bits/byte": _mean(values[1]), "A - B": round(comparison.difference, 4),
                     "95% interval": interval_text(comparison), "p": comparison.p_value, "p (Holm)": None,
                     "note": "" if _lossless(side_a) and _lossless(side_b) else "lossy: another text, NOT comparable"})
    if not rows:
        raise BenchError(f"{a} and {b} share no finished cell (the same model, tokenization, data, matching rule "
                         f"and phase); nothing to compare")
    for row, p in zip(rows, holm([c.p_value for c in comparisons])):
        row["p (Holm)"] = p
    columns = list(rows[0])
    notes = [f"A: {a}; B: {b}. Seed means of test bits per byte; A - B with one Welch t over seeds (its interval "
             "and p-value), p-values Holm-adjusted over the cells; a cell with one seed on a side has none."]
    for side, table in zip("AB", tables):
        stuck = table.rows[table.rows["status"] == RunStatus.NOT_LEARNING.value]
        if not stuck.empty:  # stopped at their unigram floor: not results, and not in the seed means above
            notes.append(f"NOT LEARNING, left out: {side} has {len(stuck)} run(s) stopped at their unigram floor ("
                         f"{', '.join(sorted(stuck['run_dir'].astype(str)))})")
    return Compared(rows, columns, notes)


def _lossless(side: pd.DataFrame) -> bool:
    return bool((side["test_lossless"].astype(str).str.lower() == "true").all())


def _mean(values: dict) -> float:
    return round(sum(values.values()) / len(values), 4)
