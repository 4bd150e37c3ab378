"""The report's section "Does a tokenizer's compression predict the trained model?": each lossless tokenization's
intrinsic measures (tokenizers_study.stats.INTRINSIC, on the train split) against its test bits per byte, a panel
per model and measure, and each measure's rank correlation with its interval over tokenizations and seeds
(bench.study.stats.intrinsic)."""

from __future__ import annotations

import math

import pandas as pd

from bench.study.report.figure_style import (FigureStyle, NoData, errors_of, group_title, legend, model_family,
                                             plt, seed_means, text_groups, tokenizer_order)
from bench.study.stats.convergence import last_doubling
from bench.study.stats.intrinsic import MIN_TOKENIZATIONS, RankCorrelation, rank_correlation
from tokenizers_study.stats import INTRINSIC, intrinsic_measures
from tokenizers_study.text import text_counts

LABELLED_CELLS = 6  # up to this many tokenizations a panel names each point; beyond, a legend does
BITS_PER_BYTE = "test_bits_per_byte"  # ranks as bits per character do on one text: the correlations use it


def tokenization_measures(done: pd.DataFrame, runs: dict) -> dict[tuple[str, str], dict[str, float]]:
    """(dataset, tokenization) -> its INTRINSIC measures on the train split, from one run's encoded train split
    (the encoding every run of the tokenization trained on)."""
    measures = {}
    for (dataset, tokenizer), group in done.groupby(["dataset", "tokenizer"]):
        mine = [d for d in group["run_dir"] if not runs[d].on_other_data]
        if mine:
            run = runs[mine[0]]
            counts = text_counts(run.split_data("train").read_text())
            measures[(dataset, tokenizer)] = intrinsic_measures(run.ids("train"), run.tokenizer.vocab_size, counts)
    return measures


def correlations(done: pd.DataFrame, measures: dict) -> dict[tuple, RankCorrelation]:
    """(dataset, match, model, measure key) -> the rank correlation over the lossless tokenizations of that text,
    rule and model, where there are at least MIN_TOKENIZATIONS of them."""
    found = {}
    for (dataset, match), group in text_groups(done[done["lossless_bool"]]):
        for model, runs in group.groupby("model"):
            seeds = {t: [float(v) for v in cell[BITS_PER_BYTE]] for t, cell in runs.groupby("tokenizer")}
            for key in INTRINSIC:
                values = {t: measures[(dataset, t)][key] for t in seeds if (dataset, t) in measures}
                if (rho := rank_correlation(values, seeds)) is not None:
                    found[(dataset, match, model, key)] = rho
    return found


def intrinsic_figure(done: pd.DataFrame, measures: dict, found: dict, style: FigureStyle):
    """A row of panels per text, rule and model with MIN_TOKENIZATIONS lossless tokenizations, a panel per measure:
    each tokenization's seed mean of the test metric (its interval over seeds as a bar) against the measure."""
    rows = sorted({key[:3] for key in found})
    if not rows:
        raise NoData(f"no model has {MIN_TOKENIZATIONS} or more lossless tokenizations of one text and matching rule "
                     "to rank")
    metric = style.metric.test()
    fig, axes = plt.subplots(len(rows), len(INTRINSIC), figsize=(2.7 * len(INTRINSIC), 2.6 * len(rows)),
                             squeeze=False)
    groups = len({row[:2] for row in rows})
    drawn, crowded = [], False
    for panels, (dataset, match, model) in zip(axes, rows):
        sub = done[(done["dataset"] == dataset) & (done["match"] == match) & (done["model"] == model)
                   & done["lossless_bool"]]
        cells = seed_means(sub, [metric])
        drawn.append(sub)
        crowded |= len(cells) > LABELLED_CELLS
        for ax, (key, label) in zip(panels, INTRINSIC.items()):
            x = [measures[(dataset, t)][key] for t in cells["tokenizer"]]
            for xi, (_, c) in zip(x, cells.iterrows()):
                ax.errorbar(xi, c[metric], yerr=errors_of(pd.Series([c[f"{metric}_err"]])),
                            marker=model_family(model).marker, color=style.colors[c["tokenizer"]], capsize=2)
                if len(cells) <= LABELLED_CELLS:
                    ax.annotate(c["tokenizer"], (xi, c[metric]), fontsize=6, xytext=(3, 3),
                                textcoords="offset points")
            rho = found.get((dataset, match, model, key))
            ax.set_title(f"ρ = {rho.cell()}" if rho else "ρ: too few cells", fontsize=8)
            ax.set_xlabel(label, fontsize=8)
        panels[0].set_ylabel(f"{group_title((dataset, match), groups)}{model}\ntest {style.metric.label}", fontsize=8)
    if crowded:  # more labels than a panel holds apart: one legend of the colours, beside the first row, instead
        legend(axes[0][-1], pd.concat(drawn), style.colors, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle("Intrinsic measures of each lossless tokenization (train split) against the trained models' test "
                 f"{style.metric.label}", fontsize=10)
    fig.tight_layout()
    return fig


def correlation_rows(found: dict, done: pd.DataFrame) -> list[dict]:
    groups = done.groupby(["dataset", "match"]).ngroups
    return [{**({"text": f"{d}, {m}"} if groups > 1 else {}), "model": model, "measure": INTRINSIC[key],
             "Spearman ρ": f"{rho.rho:+.3f}", "95% interval": "one seed: none" if rho.low is None else
             f"[{rho.low:+.3f}, {rho.high:+.3f}]", "tokenizations": rho.tokenizations}
            for (d, m, model, key), rho in sorted(found.items(), key=lambda kv: (kv[0][:3], list(INTRINSIC).index(
                kv[0][3])))]


def measure_rows(measures: dict, done: pd.DataFrame) -> list[dict]:
    lossless = done[done["lossless_bool"]]
    keys = sorted({(d, t) for d, t in zip(lossless["dataset"], lossless["tokenizer"])},
                  key=lambda k: (k[0], tokenizer_order(k[1])))
    return [{"dataset": d, "tokenizer": t, **{label: _rounded(measures[(d, t)][key])
                                              for key, label in INTRINSIC.items()}}
            for d, t in keys if (d, t) in measures]


def caption(done: pd.DataFrame, logs: dict) -> str:
    lossy = sorted(set(done.loc[~done["lossless_bool"], "tokenizer"]), key=tokenizer_order)
    trends = [last_doubling(logs[d]) for d in done.loc[done["lossless_bool"], "run_dir"]]
    improving = sum(t is not None and t.label == "still improving" for t in trends)
    text = ("Each measure is computed on the train split from the encoding the runs trained on; the test metric is "
            "the mean over seeds with its 95% interval over seeds. ρ is Spearman's rank correlation of the measure "
            "with the cells' mean test bits per byte (it ranks as bits per character on one text); its 95% interval "
            "is a bootstrap of the tokenizations and, within each, of its seeds, so it carries both the seed-to-seed "
            "spread of the trained models and how few tokenizations it rests on. A negative ρ: the higher the "
            "measure, the lower (better) the bits per byte.")
    if lossy:
        text += f" Lossy tokenizations are left out ({', '.join(lossy)}): their bits per byte are not comparable."
    if improving:
        text += (f" {improving} of {len(trends)} of these runs are still improving: the relation is measured at this "
                 "training budget, and may change with a larger one.")
    return text


def _rounded(value: float) -> float:
    return round(value, 4) if math.isfinite(value) else value


def section(doc, study, out, style: FigureStyle, figure) -> None:
    """The section of the report ``doc`` (bench.study.report.report's Study; ``figure`` draws or says why not)."""
    doc.heading("9. Does a tokenizer's compression predict the trained model?")
    done = study.done
    ranked = done[done["lossless_bool"]].groupby(["dataset", "match", "model"])["tokenizer"].nunique()
    measures = tokenization_measures(done, study.runs) if (ranked >= MIN_TOKENIZATIONS).any() else {}
    found = correlations(done, measures)
    figure(doc, lambda: intrinsic_figure(done, measures, found, style), out, "9-intrinsic-measures",
           caption(done, {d: run.log for d, run in study.runs.items()}))
    if found:
        rows = correlation_rows(found, done)
        doc.table(rows, list(rows[0]),
                  "Each measure's rank correlation with test bits per byte over the lossless tokenizations of one "
                  "model, text and matching rule, with its 95% interval over tokenizations and seeds.",
                  anchor="intrinsic-correlations")
        rows = measure_rows(measures, done)
        doc.table(rows, list(rows[0]), "The intrinsic measures of each lossless tokenization on the train split "
                  "(bench tokenize stats gives them for any split).", anchor="intrinsic-measures")
