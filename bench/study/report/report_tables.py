"""The report's tables as rows: the main table (means over seeds with their intervals, the text's interval,
the unigram floor), the comparisons between tokenizations, the closed vocabularies and the matching rules."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from bench.engine.learning import clearly_below
from bench.metrics import METRICS, shown_metrics
from bench.study.matrix.finished_run import FinishedRun
from bench.study.stats.convergence import last_doubling, trend_cell
from bench.study.report.figures import tokenizer_order
from bench.study.report.flags import gave_text_back
from bench.study.stats.uncertainty import Comparison, compare, document_interval, holm, seed_interval, seeds_needed
from tokenizers_study import FAMILIES, is_closed_vocabulary


TEXT_INTERVAL = f"{METRICS['bits_per_byte'].label}, text 95%"  # the main table's column of the text's interval


def main_columns(text_interval: bool) -> list[str]:
    """The main table's metric columns, the text's interval beside bits per byte where there is one."""
    columns = []
    for metric in shown_metrics():
        columns.append(metric.label)
        if metric.key == "bits_per_byte" and text_interval:
            columns.append(TEXT_INTERVAL)
    return columns


def main_table(done: pd.DataFrame, axes: list[str], floors: dict, runs: dict[str, FinishedRun]) -> list[dict]:
    """One row per cell (all axes but the seed): means over seeds with Student-t intervals, an interval over
    the documents of the text for bits per byte, and the unigram floor."""
    keys = [a for a in axes if a != "seed"] + ["phase"]
    rows = []
    for key, group in done.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key))
        row["seeds"] = len(group)
        for metric in shown_metrics():
            column = f"test_{metric.key}"
            values = [v for v in group[column].tolist() if not math.isnan(v)] or [math.nan]
            if metric.perplexity:  # the perplexity of the mean loss, its interval from the loss's
                mean, half = seed_interval(np.log(values))
                row[metric.label] = _ppl_with_ci(mean, half)
                mean = math.exp(mean)
            else:
                mean, half = seed_interval(values)
                row[metric.label] = _with_ci(mean, half)
            row["_" + column] = mean
        row["last doubling"] = trend_cell([last_doubling(runs[d].log) for d in group["run_dir"]])
        text = [runs[d].text_losses() for d in group["run_dir"]]
        if all(t is not None for t in text):
            low, high = document_interval(text)
            row[TEXT_INTERVAL] = f"[{low:.4f}, {high:.4f}]"
        floor = floors.get((row["dataset"], row["tokenizer"]))
        if floor is not None:
            row["unigram floor bits/char"] = round(floor["bits_per_char"], 4)
            gain = 1 - row["_test_bits_per_char"] / floor["bits_per_char"]
            clear = clearly_below(row["_test_bits_per_char"], floor["bits_per_char"])
            row["below floor"] = f"{100 * gain:.0f}%" + ("" if clear else " (NOT clearly below)")
        row["flags"] = "".join(sorted(set("".join(group["flags"]))))
        rows.append(row)
    return rows


def pretrained_rows(pretrained: pd.DataFrame) -> list[dict]:
    """One row per pretrained model and dataset: one model, so no interval over seeds."""
    rows = []
    for _, run in pretrained.iterrows():
        row = {k: run[k] for k in ("model", "preset", "tokenizer", "dataset", "match", "flags")}
        row.update({m.label: _with_ci(run[f"test_{m.key}"], None) for m in shown_metrics()}, seeds="pretrained",
                   phase="")
        rows.append(row)
    return rows


def _with_ci(mean: float, half: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    digits = 4 if abs(mean) < 100 else 1
    text = f"{mean:,.{digits}f}"
    return text + (f" ± {half:,.{digits}f}" if half is not None else "")


def _ppl_with_ci(log_mean: float, log_half: float | None) -> str:
    """A perplexity from the mean log perplexity (the mean loss) over seeds, with the interval of the mean loss
    carried through exp: asymmetric, never negative."""
    if math.isnan(log_mean):
        return "-"
    text = _with_ci(math.exp(log_mean), None)
    if log_half is None:
        return text
    return f"{text} [{_with_ci(math.exp(log_mean - log_half), None)}, {_with_ci(math.exp(log_mean + log_half), None)}]"


def paired_rows(done: pd.DataFrame, axes: list[str], runs: dict[str, FinishedRun]) -> list[dict]:
    """Every pair of tokenizations of the same model, data, matching rule and phase: the difference in test
    bits per byte with its interval, and a p-value (Holm-adjusted over all the pairs) where seeds allow one."""
    group_keys = [a for a in axes if a not in ("seed", "tokenizer")] + ["phase"]
    rows, comparisons = [], []
    comparable = done[done["lossless_bool"]]  # the runs of a group share their text; lossy ones are left out
    for key, group in comparable.groupby(group_keys, sort=False, dropna=False):
        context = {k: v for k, v in zip(group_keys, key) if k != "phase" or (isinstance(v, str) and v)}
        tokenizers = sorted(group["tokenizer"].unique(), key=tokenizer_order)
        for a, b in itertools.combinations(tokenizers, 2):
            sides = [group[group["tokenizer"] == t] for t in (a, b)]
            values = [dict(zip(side["seed"], side["test_bits_per_byte"])) for side in sides]
            texts = [{seed: runs[d].text_losses() for seed, d in zip(side["seed"], side["run_dir"])} for side in sides]
            texts = [t if all(v is not None for v in t.values()) else None for t in texts]
            comparison = compare(values[0], values[1], texts[0], texts[1])
            comparisons.append(comparison)
            rows.append({**context, "A": a, "B": b, "seeds": f"{len(values[0])} / {len(values[1])}",
                         "A - B bits/byte": round(comparison.difference, 4),
                         "95% interval": interval_text(comparison), "interval over": comparison.interval or "-",
                         "p": comparison.p_value, "p (Holm)": None,
                         "test": comparison.test or "none: one seed on a side"})
    for row, p in zip(rows, holm([c.p_value for c in comparisons])):
        row["p (Holm)"] = p
    return rows


def power_line(done: pd.DataFrame, axes: list[str], effect: float = 0.01) -> str | None:
    """How many seeds a comparison needs to detect ``effect`` bits per byte, from the seed spread observed in the
    cells with two or more seeds (their pooled standard deviation); None without such a cell."""
    keys = [a for a in axes if a != "seed"] + ["phase"]
    spreads = [(len(g) - 1, g["test_bits_per_byte"].var(ddof=1))
               for _, g in done[done["lossless_bool"]].groupby(keys, dropna=False) if len(g) >= 2]
    if not spreads:
        return None
    pooled = math.sqrt(sum(df * var for df, var in spreads) / sum(df for df, _ in spreads))
    needed = seeds_needed(pooled, effect)
    return (f"Power: the seed standard deviation of test bits per byte, pooled over the {len(spreads)} cell(s) with "
            f"two or more seeds, is {pooled:.4f}; to detect a difference of {effect} bits per byte between two "
            f"tokenizations (two-sided t-test, alpha 0.05, power 0.8) a study needs "
            + (f"**{needed} seeds per tokenization**." if needed else "more than 1,000 seeds per tokenization."))


def interval_text(comparison: Comparison) -> str:
    """A comparison's 95% interval as the tables show it, '-' where there is none."""
    if comparison.low is None:
        return "-"
    return f"[{comparison.low:.4f}, {comparison.high:.4f}]"


def closed_forms() -> str:
    """How the closed vocabularies are written: "word:N", from the schemes' traits."""
    return " or ".join(cls.form() for cls in FAMILIES.values() if not cls.lossless_scheme)


def covering_closed_vocabularies(done: pd.DataFrame) -> list[str]:
    """The closed vocabularies whose decoding gave the test text back: not compared all the same."""
    closed = done[done["tokenizer"].map(is_closed_vocabulary)]
    return sorted({row["tokenizer"] for _, row in closed.iterrows() if gave_text_back(row)})


def closed_vocabulary_rows(done: pd.DataFrame, unk: dict) -> list[dict]:
    """Each closed-vocabulary run (its scheme's class says so) beside the best open-vocabulary run on the same
    text."""
    rows = []
    for _, r in done[done["tokenizer"].map(is_closed_vocabulary)].iterrows():
        same_text = done[(done["model"] == r["model"]) & (done["dataset"] == r["dataset"]) &
                         (done["match"] == r["match"]) & (done["seed"] == r["seed"]) & done["lossless_bool"]]
        best_open = same_text.loc[same_text["test_word_perplexity"].idxmin()] if not same_text.empty else None
        share = unk.get(r["run_dir"], {})
        rows.append({"model": r["model"], "closed": r["tokenizer"], "closed word ppl": r["test_word_perplexity"],
                     "<unk> share of tokens": share.get("unk_token_share"),
                     "<unk> share of NLL": share.get("unk_nll_share"),
                     "best open-vocabulary run": None if best_open is None else best_open["tokenizer"],
                     "its word ppl": None if best_open is None else best_open["test_word_perplexity"],
                     "words lost": f"{r['tokenizer']} decodes OOV words as <unk>"})
    return rows


def matching_rows(done: pd.DataFrame) -> list[dict]:
    """Bits per character and rank of each tokenization under each matching rule, per model and dataset."""
    rows = []
    for (model, dataset), group in done.groupby(["model", "dataset"]):
        pivot = group.groupby(["tokenizer", "match"])["test_bits_per_char"].mean().unstack("match").dropna()
        if pivot.shape[1] < 2 or pivot.empty:
            continue
        for tokenizer, values in pivot.iterrows():
            row = {"model": model, "dataset": dataset, "tokenizer": tokenizer}
            for rule in pivot.columns:
                row[f"bits/char (equal {rule})"] = round(values[rule], 4)
                row[f"rank (equal {rule})"] = int(pivot[rule].rank().loc[tokenizer])
            rows.append(row)
    return rows


def marginal_rows(runs: dict[str, FinishedRun]) -> list[dict]:
    """The likelihood over all segmentations of each run that has one, beside the main table's number."""
    return [{"model": run.row["model"], "tokenizer": run.row["tokenizer"], "seed": run.row["seed"],
             "lines": m["lines"], "draws per line": m["draws_per_line"],
             "main table bits/byte": round(float(run.row["test_bits_per_byte"]), 5),
             "canonical, these lines": round(m["canonical_bits_per_byte"], 5),
             "marginal, these lines": f"{m['marginal_bits_per_byte']:.5f} ± {m['marginal_se']:.5f}",
             "gap": f"{100 * m['relative_gap']:.3f}%"}
            for run in runs.values() if (m := run.marginal("test"))]
