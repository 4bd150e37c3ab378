"""The report's tables as rows: the main table (mean and 95% interval over seeds, unigram
floor) and the paired comparisons between tokenizations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from bench.study import analysis
from bench.study.figures import tokenizer_order


def main_table(done: pd.DataFrame, axes: list[str], floors: dict) -> list[dict]:
    keys = [a for a in axes if a != "seed"] + ["phase"]
    rows = []
    for key, group in done.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key))
        row["seeds"] = len(group)
        for metric, label in (("test_bits_per_byte", "bits/byte"), ("test_bits_per_char", "bits/char"),
                              ("test_word_perplexity", "word ppl"), ("test_word_perplexity_eos", "word ppl (eos)"),
                              ("test_token_perplexity", "token ppl")):
            mean, half, _ = analysis.mean_ci(group[metric].tolist())
            row[label] = _with_ci(mean, half)
            row["_" + metric] = mean
        floor = floors.get((row["dataset"], row["tokenizer"]))
        if floor is not None:
            row["unigram floor bits/char"] = round(floor["bits_per_char"], 4)
            gain = 1 - row["_test_bits_per_char"] / floor["bits_per_char"]
            row["below floor"] = f"{100 * gain:.0f}%" + ("" if gain >= 0.1 else " (NOT clearly below)")
        row["flags"] = "".join(sorted(set("".join(group["flags"]))))
        rows.append(row)
    return rows


def _with_ci(mean: float, half: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    digits = 4 if abs(mean) < 100 else 1
    text = f"{mean:,.{digits}f}"
    return text + (f" ± {half:,.{digits}f}" if half is not None else "")


def paired_rows(done: pd.DataFrame, axes: list[str], runs: dict[str, analysis.RunData]) -> list[dict]:
    """Paired comparisons between tokenizations of the same model, data and matching rule."""
    group_keys = [a for a in axes if a not in ("seed", "tokenizer")] + ["phase"]
    blocks: dict[str, np.ndarray | None] = {}  # a run takes part in several pairs

    def block_bits(run_dir: str) -> np.ndarray | None:
        if run_dir not in blocks:
            blocks[run_dir] = analysis.block_bits(runs[run_dir])
        return blocks[run_dir]

    rows = []
    comparable = done[done["lossless_bool"]]  # the runs of a group share their data; lossy ones are left out
    for key, group in comparable.groupby(group_keys, sort=False, dropna=False):
        context = dict(zip(group_keys, key))
        tokenizers = sorted(group["tokenizer"].unique(), key=tokenizer_order)
        for a, b in itertools.combinations(tokenizers, 2):
            ga = group[group["tokenizer"] == a].set_index("seed")
            gb = group[group["tokenizer"] == b].set_index("seed")
            seeds = sorted(set(ga.index) & set(gb.index))
            if not seeds:
                continue
            if len(seeds) >= 2:
                test = analysis.paired_comparison(ga.loc[seeds, "test_bits_per_char"].tolist(),
                                                  gb.loc[seeds, "test_bits_per_char"].tolist(),
                                                  f"paired t-test over {len(seeds)} seeds")
                unit = "bits/char"
            else:
                blocks_a = block_bits(ga.loc[seeds[0], "run_dir"])
                blocks_b = block_bits(gb.loc[seeds[0], "run_dir"])
                if blocks_a is None or blocks_b is None:
                    continue
                test = analysis.paired_comparison(blocks_a.tolist(), blocks_b.tolist(),
                                                  f"paired t-test over {len(blocks_a)} text blocks (one seed)")
                unit = "bits/byte"
            # a matrix without phases has no phase to show (an empty cell reads back as NaN)
            rows.append({**{k: v for k, v in context.items() if k != "phase" or (isinstance(v, str) and v)},
                         "A": a, "B": b,
                         "method": test["method"], f"mean A - B": round(test["mean_difference"], 4),
                         "unit": unit, "p-value": test["p_value"]})
    return rows


def closed_vocabulary_rows(done: pd.DataFrame, unk: dict) -> list[dict]:
    """Each closed-vocabulary (word:N) run beside the best open-vocabulary run on the same text."""
    rows = []
    for _, r in done[done["tokenizer"].str.startswith("word:")].iterrows():
        n = r["tokenizer"].split(":")[1]
        same_text = done[(done["model"] == r["model"]) & (done["dataset"] == r["dataset"]) &
                         (done["match"] == r["match"]) & (done["seed"] == r["seed"]) & done["lossless_bool"]]
        best_open = same_text.loc[same_text["test_word_perplexity"].idxmin()] if not same_text.empty else None
        share = unk.get(r["run_dir"], {})
        rows.append({"model": r["model"], "closed": r["tokenizer"], "closed word ppl": r["test_word_perplexity"],
                     "<unk> share of tokens": share.get("unk_token_share"),
                     "<unk> share of NLL": share.get("unk_nll_share"),
                     "best open-vocabulary run": None if best_open is None else best_open["tokenizer"],
                     "its word ppl": None if best_open is None else best_open["test_word_perplexity"],
                     "words lost": f"word:{n} decodes OOV words as <unk>"})
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
