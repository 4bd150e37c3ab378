"""The figure of convergence (bench.study.stats.convergence): each model's tokenizations against training
characters and FLOPs, with where the ranking of their seed-mean curves changes."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from bench.study.report.figure_style import (NoData, group_title, log_axis, model_family, nothing_logged, plt,
                                             style_for, text_groups, tokenizer_order)
from bench.study.stats.convergence import crossovers, mean_curve, validations


def ranking_figure(done: pd.DataFrame, logs: dict[str, list[dict]], style=None) -> Figure:
    """Per model (columns): validation loss (the style's metric) of each tokenization against training characters
    and FLOPs (a pair of rows per text and matching rule, never drawn or ranked together), one thin line per seed;
    dotted verticals where the ranking of the seed-mean curves changes (closed vocabularies are not ranked)."""
    style = style_for(done, style)
    models = sorted(done["model"].unique())
    groups = text_groups(done)
    fig, axes = plt.subplots(2 * len(groups), len(models), figsize=(4.2 * len(models), 3.2 * 2 * len(groups)),
                             squeeze=False)
    for g, (key, cell) in enumerate(groups):
        for col, model in enumerate(models):
            runs = cell[cell["model"] == model]
            for ax, x in zip(axes[2 * g:2 * g + 2, col], ("train_chars", "train_flops")):
                if runs.empty:  # this model was not run on this text and rule
                    ax.axis("off")
                    continue
                _ranking_panel(ax, runs, logs, x, style, model)
                if not ax.lines:
                    ax.axis("off")
                    ax.text(0.5, 0.5, f"{group_title(key, len(groups))}{model}: no validation logged",
                            ha="center", va="center", fontsize=9, transform=ax.transAxes)
                    continue
                log_axis(ax, "x", narrow=True)
                ax.set_xlabel("training characters (log)" if x == "train_chars" else "training FLOPs (log)")
                ax.set_ylabel(f"validation {style.metric.label}")
                ax.set_title(group_title(key, len(groups)) + model, fontsize=9)
                ax.legend(fontsize=6.5, frameon=False)
    if not any(ax.lines for ax in axes.flat):
        plt.close(fig)
        raise NoData(nothing_logged(style, "validation"))
    fig.suptitle("Does the verdict depend on the budget? Each model's tokenizations against training characters "
                 "and FLOPs; dotted: the ranking changes", fontsize=9.5)
    fig.tight_layout()
    return fig


def _ranking_panel(ax, runs: pd.DataFrame, logs: dict[str, list[dict]], x: str, style, model: str) -> None:
    """One model's runs on one text and matching rule: a line per seed, dotted verticals at ranking changes."""
    means = {}
    for tokenizer, group in sorted(runs.groupby("tokenizer"), key=lambda kv: tokenizer_order(kv[0])):
        curves = [validations(logs[d], x, style.metric.valid()) for d in group["run_dir"]]
        for points in curves:
            if points:
                ax.plot(*zip(*points), color=style.colors[tokenizer], lw=0.9, marker=model_family(model).marker,
                        ms=2.5, label=tokenizer if points is curves[0] else None)
        if group["lossless_bool"].all():  # a closed vocabulary is not ranked with the rest
            means[tokenizer] = mean_curve([c for c in curves if len(c) >= 2])
    for change in crossovers({k: v for k, v in means.items() if v}):
        ax.axvline(change, color="0.4", ls=":", lw=0.9)
