"""The report's figures (matplotlib, no display needed). Each function returns a Figure.

Conventions (bench.study.report.figure_style): one colour per tokenization family, lighter for its smaller sizes, the
same in every figure of a report; one marker and line style per model; hollow markers for lossy tokenizations
(tokenizers_study.lossless_on); the report's flags (†, ‡, §) beside each tokenization in the legends; one metric
of bench.metrics with a figure name (``bench report --metric``); a
point is the mean over seeds with its 95% interval over seeds as an error bar (a band on curves).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.errors import BenchError
from bench.metrics import METRICS
from bench.study.report.figure_style import (FigureStyle, NoData, errors_of, group_title, legend, log_axis,
                                             model_family, nothing_logged, plt, save, scheme_family, seed_means,
                                             style_for, text_groups, tokenizer_order)
from tokenizers_study import FAMILIES, is_closed_vocabulary, sweep_point

__all__ = ["FigureStyle", "NoData", "attack_figure", "closed_vocabulary_figure", "compute_figure",
           "learning_curves_figure", "matching_figure", "save", "teacher_forcing_figure", "vocab_sweep_figure"]

PERPLEXITIES = ("test_token_perplexity", "test_word_perplexity")
TOKEN_PPL, WORD_PPL = METRICS["token_perplexity"].unit, METRICS["word_perplexity"].unit  # axis labels


def _points(ax, cells: pd.DataFrame, x: str, y: str, style: FigureStyle) -> None:
    """Each cell's seed mean (hollow: a lossy tokenization, not comparable) and its interval over seeds."""
    for _, c in cells.iterrows():
        color = style.colors[c["tokenizer"]]
        filled = bool(c.get("lossless_bool", True))
        ax.scatter(c[x], c[y], marker=model_family(c["model"]).marker, s=42, linewidths=1.2,
                   facecolors=color if filled else "none", edgecolors=color, zorder=3)
    spread = cells[cells["seeds"] > 1]
    if not spread.empty:
        for _, c in spread.iterrows():
            ax.errorbar(c[x], c[y], xerr=errors_of(pd.Series([c.get(f"{x}_err", 0.0)])),
                        yerr=errors_of(pd.Series([c[f"{y}_err"]])), fmt="none", ecolor=style.colors[c["tokenizer"]],
                        elinewidth=1.0, capsize=2.5)


def attack_figure(df: pd.DataFrame, compressor_lines: dict[str, list[tuple[str, float]]] | None = None,
                  style: FigureStyle | None = None) -> Figure:
    """Per-token perplexity against the metric: the tokenization attack, one row of two panels per text and
    matching rule (never pooled); ``compressor_lines`` (dataset -> (label, value in the metric)) are drawn as
    dotted vertical lines on that dataset's panels."""
    style = style_for(_drawable(df, style), style)
    groups = text_groups(df)
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 4.2 * len(groups)), squeeze=False)
    for (left, right), (key, group) in zip(axes, groups):
        _attack_panels(left, right, group, style, (compressor_lines or {}).get(key[0], []), key[0],
                       group_title(key, len(groups)))
    fig.suptitle("The tokenization attack: the same models ranked by per-token and by per-word perplexity "
                 "(hollow: lossy tokenization, not comparable)", fontsize=10)
    fig.tight_layout()
    return fig


def _drawable(df: pd.DataFrame, style: FigureStyle | None) -> pd.DataFrame:
    """Runs as load_runs gives them, at least one of them with every number the attack figure draws."""
    from bench.arguments import instance_argument

    instance_argument(df, pd.DataFrame, "the runs", "api.load_runs('results/quick')")
    if style is not None:
        instance_argument(style, FigureStyle, "style", "FigureStyle.of(runs['tokenizer'], 'byte')")
    metric = (style or FigureStyle.of(df.get("tokenizer", pd.Series(dtype=str)).unique())).metric
    numbers = [metric.test(), *PERPLEXITIES]
    missing = [column for column in ("model", "tokenizer", "dataset", "match", "flags", *numbers,
                                      metric.count(), "test_n_words") if column not in df]
    if missing:
        raise BenchError(f"the runs have no column {', '.join(missing)}: give the rows of api.load_runs(RESULTS)")
    finite = np.isfinite(df[numbers].apply(pd.to_numeric, errors="coerce")).all(axis=1)
    if not finite.any():
        raise NoData(f"no run has a finite {', '.join(numbers)}: nothing to draw; give finished runs "
                     f"(api.load_runs(RESULTS))")
    return df


def _attack_panels(left, right, df: pd.DataFrame, style: FigureStyle, lines: list[tuple[str, float]], dataset: str,
                   where: str) -> None:
    from matplotlib.lines import Line2D

    metric = style.metric.test()
    extra = []
    for (label, value), linestyle in zip(lines, (":", "-.")):
        for ax in (left, right):
            ax.axvline(value, color="C7", ls=linestyle, lw=1.0)
        extra.append(Line2D([], [], color="C7", ls=linestyle, lw=1.0, label=f"{dataset}: {label}"))
    cells = seed_means(df, [metric, *PERPLEXITIES], log=PERPLEXITIES)
    for ax, y, label, title in ((left, "test_token_perplexity", f"test {TOKEN_PPL} (log scale)",
                                 f"{TOKEN_PPL} depends on the tokenizer"),
                                (right, "test_word_perplexity", f"test {WORD_PPL} (log scale)",
                                 f"normalized per word, the ranking of {style.metric.label}")):
        _points(ax, cells, metric, y, style)
        log_axis(ax)
        ax.set_xlabel(f"test {style.metric.label} (lower is better)")
        ax.set_ylabel(label)
        ax.set_title(where + title, fontsize=9)
    legend(left, df, style.colors, extra)
    # On one text, word perplexity is a fixed function of the metric.
    per_word = float((df[style.metric.count()] / df["test_n_words"]).iloc[0])
    xs = np.linspace(df[metric].min() * 0.97, df[metric].max() * 1.03, 50)
    right.plot(xs, 2 ** (xs * per_word), color="0.6", lw=0.8, ls="--",
               label=f"{dataset}: 2^({style.metric.label} x {per_word:.2f} {style.metric.unit}/word)")
    right.legend(fontsize=7, frameon=False, loc="upper left")


def sweep_lines(tokenizers) -> dict[str, list[tuple[str, int]]]:
    """The vocabulary sweep's lines: swept family -> its (tokenization, size) points, as each scheme's class
    places them (bytes are byte-level BPE's 256 point)."""
    lines: dict[str, list[tuple[str, int]]] = {}
    for tokenizer in sorted(set(tokenizers), key=tokenizer_order):
        if (point := sweep_point(tokenizer)) is not None:
            lines.setdefault(point[0], []).append((tokenizer, point[1]))
    return lines


def sweep_caption(tokenizers) -> str:
    """What the sweep's x axis is, from the swept schemes' traits: 'the vocabulary size of byte-level BPE (bpe:N;
    byte is its 256 point)'."""
    parts = []
    for family, points in sweep_lines(tokenizers).items():
        others = [f"{name} is its {size:,} point" for name, size in points if scheme_family(name) != family]
        parts.append(f"{FAMILIES[family].title} ({FAMILIES[family].form()}" + "".join(f"; {o}" for o in others) + ")"
                     if family in FAMILIES else family)
    return "the vocabulary size of " + (" and of ".join(parts) if parts else "a swept tokenization family")


def vocab_sweep_figure(df: pd.DataFrame, style: FigureStyle | None = None) -> Figure:
    """The metric and per-token perplexity against the vocabulary size: one row of panels per text and matching
    rule; a line per model and swept family (the family's colour, the model's line style) through points in each
    tokenization's colour."""
    style = style_for(df, style)
    metric = style.metric.test()
    points = df["tokenizer"].map(sweep_point)  # (line, size) as each scheme's class places it; bytes: BPE 256
    sizes = df[points.notna()].assign(family=points.dropna().str[0], size=points.dropna().str[1].astype(int))
    per_line = sizes.groupby("family")["size"].nunique()
    if per_line.empty or per_line.max() < 3:  # a line through two points is not a trend
        swept = ", ".join(cls.form() for cls in FAMILIES.values() if cls.swept)
        raise NoData(f"the matrix has fewer than three vocabulary sizes of any swept tokenization ({swept}; "
                     f"configs/attack.toml sweeps bpe:N from 512 to 32k); the main table compares the sizes it has")
    groups = text_groups(sizes)
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 3.8 * len(groups)), squeeze=False)
    for (left, right), (key, group) in zip(axes, groups):
        cells = seed_means(group, [metric, "test_token_perplexity"], log=("test_token_perplexity",),
                           by=("model", "family", "size", "tokenizer")).sort_values("size")
        for (model, family), line in cells.groupby(["model", "family"], sort=True):
            for ax, column in ((left, metric), (right, "test_token_perplexity")):
                ax.plot(line["size"], line[column], color=style.family_colors.get(scheme_family(family), "0.55"),
                        ls=model_family(model).linestyle, lw=1, label=f"{model} {family}")
                _points(ax, line, "size", column, style)
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(cells["size"].unique()), [f"{v:,}" for v in sorted(cells["size"].unique())])
            ax.minorticks_off()
            ax.set_xlabel("vocabulary size")
        left.set_ylabel(f"test {style.metric.label}")
        right.set_ylabel(f"test {TOKEN_PPL} (log)")
        log_axis(right)
        where = group_title(key, len(groups))
        left.set_title(where + f"comparable: {style.metric.label}", fontsize=9)
        right.set_title(where + f"not comparable: {TOKEN_PPL}", fontsize=9)
        left.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def teacher_forcing_figure(profiles: dict[tuple[str, str], dict[tuple[str, str], dict]],
                           style: FigureStyle | None = None) -> Figure:
    """How a word's loss is spread over its pieces (left) and loss by position within the word (right): a row
    per text and matching rule, ``profiles``: (dataset, match) -> (model, tokenizer) -> profile (a tokenizer's
    name may hold spaces: hf:PATH)."""
    if not profiles:
        raise NoData("no per-token losses were saved (dump_token_losses = true saves them)")
    if style is None:
        style = FigureStyle.of({tokenizer for group in profiles.values() for _, tokenizer in group})
    keys = sorted(profiles)
    fig, axes = plt.subplots(len(keys), 2, figsize=(10, 4.6 * len(keys)), squeeze=False)
    for (left, right), key in zip(axes, keys):
        group = profiles[key]
        for model, tokenizer in sorted(group, key=lambda k: tokenizer_order(k[1])):
            model_class = model_family(model)
            look = dict(color=style.colors[tokenizer], ls=model_class.linestyle, marker=model_class.marker,
                        label=f"{model} {tokenizer}")
            pieces = group[(model, tokenizer)]["pieces"]
            if pieces:
                left.plot([p["pieces"] for p in pieces], [p["first_piece_share"] for p in pieces], **look)
            positions = group[(model, tokenizer)]["positions"]
            if len(positions) > 1:
                right.plot([p["position"] for p in positions], [p["mean_bits"] for p in positions], ms=3, **look)
        where = group_title(key, len(keys))
        left.set_xlabel("pieces in the word (last point: that many or more)")
        left.set_ylabel("mean share of the word's loss on its first piece")
        left.set_ylim(0, 1.05)
        left.set_title(where + "share of the word's loss on its first piece", fontsize=9)
        right.set_xlabel("piece position within the word (bytes/characters for byte/char models)")
        right.set_ylabel("mean loss of the piece (bits)")
        right.set_title(where + "loss by position within the word", fontsize=9)
        left.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def closed_vocabulary_figure(df: pd.DataFrame, unk: dict[str, dict], style: FigureStyle | None = None) -> Figure:
    """Word perplexity of closed-vocabulary word models beside open-vocabulary models on the same text: one
    panel per dataset, each on its closed runs' matching rule; a bar per model and tokenization (seed mean)."""
    closed = df[df["tokenizer"].map(is_closed_vocabulary)]
    if closed.empty:
        raise NoData("the matrix has no closed-vocabulary run")
    style = style_for(df, style)
    keys = sorted({(r.dataset, r.match) for r in closed.itertuples()})
    fig, axes = plt.subplots(len(keys), 1, figsize=(10, 3.8 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        data = df[(df["dataset"] == key[0]) & (df["match"] == key[1])]
        cells = seed_means(data, ["test_word_perplexity"], log=("test_word_perplexity",))
        cells = cells.sort_values(["model", "tokenizer"], key=lambda s: s.map(tokenizer_order)
                                  if s.name == "tokenizer" else s)
        xs = np.arange(len(cells))
        for x, (_, c) in zip(xs, cells.iterrows()):
            is_closed = is_closed_vocabulary(c["tokenizer"])
            color = style.colors[c["tokenizer"]]
            ax.bar(x, c["test_word_perplexity"], color=color, hatch="//" if is_closed else None,
                   edgecolor="black" if is_closed else color, alpha=0.85,
                   yerr=errors_of(pd.Series([c["test_word_perplexity_err"]])) if c["seeds"] > 1 else None,
                   capsize=3)
            shares = [unk[d]["unk_nll_share"] for d in data.loc[(data["model"] == c["model"]) &
                                                                 (data["tokenizer"] == c["tokenizer"]), "run_dir"]
                      if d in unk]
            note = f"<unk>: {100 * np.mean(shares):.0f}% of NLL\nNOT comparable" if is_closed and shares else ""
            ax.text(x, c["test_word_perplexity"], f"{c['test_word_perplexity']:,.0f}\n{note}", ha="center",
                    va="bottom", fontsize=6.5)
        ax.set_xticks(xs, [f"{c.model}\n{c.tokenizer}" + (f"\n{c.seeds} seeds" if c.seeds > 1 else "")
                           for c in cells.itertuples()], fontsize=7)
        log_axis(ax)
        ax.margins(y=0.25)
        ax.set_ylabel(f"test {WORD_PPL} (log)")
        ax.set_title(f"{key[0]}, matched on {key[1]}: closed vocabularies look better than they are (hatched: "
                     "predicts <unk> instead of the word)", fontsize=9)
    fig.tight_layout()
    return fig


def learning_curves_figure(curves: list[tuple[dict, list[dict]]], style: FigureStyle | None = None) -> Figure:
    """Validation loss in the metric against training characters seen: one panel per text and matching rule."""
    style = style or FigureStyle.of({row["tokenizer"] for row, _ in curves})
    return _curves_figure(curves, "train_chars", style, "training characters seen (log)",
                          "Learning curves (validation on the same first characters of valid for every "
                          "tokenization)", nothing_logged(style, "validation"))


def compute_figure(curves: list[tuple[dict, list[dict]]], style: FigureStyle | None = None) -> Figure:
    """Validation loss in the metric against training FLOPs: one curve per cell, one panel per text and rule."""
    style = style or FigureStyle.of({row["tokenizer"] for row, _ in curves})
    return _curves_figure(curves, "train_flops", style, "training FLOPs (log): the model's FLOPs per token x tokens "
                          "seen", "Equal compute: validation loss against training compute",
                          nothing_logged(style, "validation with training FLOPs"))



def _curves_figure(curves: list[tuple[dict, list[dict]]], x: str, style: FigureStyle, xlabel: str, title: str,
                   empty: str) -> Figure:
    y = style.metric.valid()
    points = [(row, [e for e in log if y in e and x in e]) for row, log in curves]
    points = [(row, log) for row, log in points if log]
    if not points:
        raise NoData(empty)
    keys = sorted({(row["dataset"], row["match"]) for row, _ in points})
    fig, axes = plt.subplots(len(keys), 1, figsize=(11, 4.2 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        cells: dict[tuple[str, str], list] = {}
        for row, log in points:
            if (row["dataset"], row["match"]) == key:
                cells.setdefault((row["model"], row["tokenizer"]), []).append((row, log))
        for (model, tokenizer), runs in sorted(cells.items(), key=lambda kv: (kv[0][0], tokenizer_order(kv[0][1]))):
            _seed_curve(ax, runs, x, y, style.colors[tokenizer], model)
        # The axes span the seeds' own values: with few seeds a t interval can reach far beyond them.
        seen = [e[y] for row, log in points if (row["dataset"], row["match"]) == key for e in log]
        pad = 0.05 * (max(seen) - min(seen) or 1.0)
        ax.set_ylim(min(seen) - pad, max(seen) + pad)
        log_axis(ax, "x")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"validation {style.metric.label}")
        ax.set_title(group_title(key, len(keys)) + title, fontsize=9)
        ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def _seed_curve(ax, runs: list[tuple[dict, list[dict]]], x: str, y: str, color, model: str) -> None:
    """One cell's curve: the mean over seeds at each validation step they share, each seed's own curve faint
    behind it, and the 95% interval over seeds as an error bar at the last validation (a band along the curve
    would cover the axes with two seeds, whose t interval is 12.7 standard errors wide); one legend entry per
    cell however many seeds."""
    from bench.study.stats.uncertainty import seed_interval

    row = runs[0][0]
    flags = f" {row['flags']}" if row.get("flags") else ""
    label = f"{model} {row['tokenizer']}" + (f" ({len(runs)} seeds)" if len(runs) > 1 else "") + flags
    by_step = [{e["step"]: e for e in log} for _, log in runs]
    steps = sorted(set.intersection(*(set(s) for s in by_step)))
    xs = [float(np.mean([s[k][x] for s in by_step])) for k in steps]
    stats = [seed_interval([s[k][y] for s in by_step]) for k in steps]
    model_class = model_family(model)
    ax.plot(xs, [m for m, _ in stats], color=color, ls=model_class.linestyle, marker=model_class.marker, ms=3, lw=1,
            label=label)
    if len(runs) > 1:
        for seed in by_step:
            ax.plot(xs, [seed[k][y] for k in steps], color=color, lw=0.6, alpha=0.35)
        ax.errorbar(xs[-1], stats[-1][0], yerr=stats[-1][1], fmt="none", color=color, ecolor=color, elinewidth=1.2,
                    capsize=3)


def matching_figure(df: pd.DataFrame, style: FigureStyle | None = None) -> Figure:
    """The metric of each tokenization under each matching rule a model was run with (seed means and intervals)."""
    order = ("tokens", "steps", "flops", "chars")
    both = df.groupby(["model", "dataset"])["match"].nunique()
    pairs = [key for key, n in both.items() if n >= 2]
    if not pairs:
        raise NoData("the matrix matches runs by one rule only (cells with match = \"tokens\" beside \"chars\" "
                     "compare them)")
    style = style_for(df, style)
    metric = style.metric.test()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    width = 1.0 / len(pairs)
    ticks, labels = [], []
    for k, (model, dataset) in enumerate(pairs):
        sub = df[(df["model"] == model) & (df["dataset"] == dataset)]
        cells = seed_means(sub, [metric], by=("tokenizer", "match"))
        rules = [r for r in order if r in set(cells["match"])]
        xs = {r: k + width * 0.15 + width * 0.7 * i / max(len(rules) - 1, 1) for i, r in enumerate(rules)}
        for tokenizer, line in cells.groupby("tokenizer"):
            line = line[line["match"].isin(rules)].sort_values("match", key=lambda s: s.map(rules.index))
            if len(line) < len(rules):
                continue  # a tokenization not run under every rule is not drawn across them
            color = style.colors[tokenizer]
            ax.errorbar([xs[r] for r in line["match"]], line[metric], yerr=line[f"{metric}_err"],
                        marker=model_family(model).marker, color=color, capsize=2.5)
            ax.text(xs[rules[-1]] + 0.01, line[metric].iloc[-1], f" {tokenizer}", fontsize=7, va="center",
                    color=color)
        ax.text(k + width / 2, 1.02, f"{model} / {dataset}", transform=ax.get_xaxis_transform(), ha="center",
                fontsize=8)
        ticks += list(xs.values())
        labels += [f"equal {r}" for r in rules]
    ax.set_xticks(ticks, labels, fontsize=7)
    ax.set_ylabel(f"test {style.metric.label}")
    ax.set_title("How the comparison changes with the matching rule (equal tokens, FLOPs or characters)", pad=18)
    fig.tight_layout()
    return fig
