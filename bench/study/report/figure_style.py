"""What every figure of a report shares: one colour per tokenization (the same in every figure), one marker per
model, one metric (``bench report --metric``), seed means with their interval, and axes in engineering notation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.errors import BenchError  # noqa: E402
from bench.metrics import Metric, figure_metrics  # noqa: E402
from bench.study.stats.uncertainty import seed_interval  # noqa: E402
from tokenizers_study import read_scheme  # noqa: E402
from tokenizers_study import scheme_sort_key as tokenizer_order  # noqa: E402  (each scheme's class ranks it)

plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 130, "font.size": 9, "axes.grid": True,
                     "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False})


@dataclass(frozen=True)
class FigureMetric:
    """The comparable loss the figures draw: a metric of bench.metrics.METRICS with a ``name``, which every
    validation logs too."""

    metric: Metric

    @property
    def name(self) -> str:
        return self.metric.name

    @property
    def label(self) -> str:
        return self.metric.unit

    @property
    def unit(self) -> str:
        return self.metric.count

    def test(self) -> str:
        return f"test_{self.metric.key}"

    def valid(self) -> str:
        return f"valid_{self.metric.key}"

    def count(self) -> str:
        return f"test_n_{self.metric.count}"


def metric_named(name: str) -> FigureMetric:
    """``bench report --metric``: a figure metric by its name ("byte") or key ("bits_per_byte")."""
    for metric in figure_metrics():
        if name in (metric.name, metric.key):
            return FigureMetric(metric)
    choices = ", ".join(f"{m.name} ({m.unit})" for m in figure_metrics())
    raise BenchError(f"--metric {name!r}: give one of {choices}")


def model_family(model: str) -> type:
    """The family whose marker and line style draw a model: its registered one, else a pretrained model's."""
    from bench.models import MODELS
    from bench.models.pretrained import PretrainedLM

    return MODELS.get(model, PretrainedLM)


@dataclass(frozen=True)
class FigureStyle:
    """A report's colours, fixed for all its figures, and its metric: a colour per tokenization family
    (``family_colors``), and per tokenization (``colors``) that colour, lighter for a family's smaller sizes."""

    colors: dict
    metric: FigureMetric
    family_colors: dict

    @classmethod
    def of(cls, tokenizers, metric: str = "byte") -> "FigureStyle":
        names = sorted(set(tokenizers), key=tokenizer_order)
        members: dict[str, list[str]] = {}
        for name in names:
            members.setdefault(scheme_family(name), []).append(name)
        cmap = plt.get_cmap("tab10" if len(members) <= 10 else "tab20")
        family_colors = {family: cmap(i % cmap.N) for i, family in enumerate(members)}
        colors = {}
        for family, schemes in members.items():
            base = np.array(matplotlib.colors.to_rgb(family_colors[family]))
            for k, name in enumerate(schemes):  # in size order: the smallest the lightest, the largest the family's
                light = FAMILY_SHADES * (len(schemes) - 1 - k) / max(len(schemes) - 1, 1)
                colors[name] = (*(float(v) for v in base + (1 - base) * light), 1.0)
        return cls(colors, metric_named(metric), family_colors)


FAMILY_SHADES = 0.6  # how much lighter than its family's colour a family's smallest size is drawn


def scheme_family(name: str) -> str:
    """The family a tokenization's colour and sweep line come from: 'bpe' for 'bpe:4096'."""
    return read_scheme(name)[0].family


def nothing_logged(style: "FigureStyle", what: str) -> str:
    """Why a figure of the runs' logs is left out: no log holds the metric (runs trained before a metric was
    declared did not log it during training; its test numbers are computed from their counts all the same)."""
    return f"no run's log.jsonl holds {what} in {style.metric.label} ({style.metric.valid()})"


def style_for(df: pd.DataFrame, style: FigureStyle | None) -> FigureStyle:
    return style or FigureStyle.of(df["tokenizer"].unique())


class NoData(BenchError):
    """A figure with nothing to draw: the report leaves it out and says why in one line; a caller of the figure
    function gets it as the one-line error it is."""


def text_groups(df: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """The runs of each text and matching rule, (dataset, match) -> rows: every figure draws each group on its
    own axes, so that nothing is ranked, averaged or drawn across texts or rules."""
    return list(df.groupby(["dataset", "match"], sort=True, dropna=False)) or [(("", ""), df)]


def group_title(key: tuple[str, str], groups: int) -> str:
    """'wikitext-2, matched on chars: ' when a figure has several groups, else nothing."""
    return f"{key[0]}, matched on {key[1]}: " if groups > 1 else ""


def seed_means(df: pd.DataFrame, columns: list[str], log: tuple[str, ...] = (),
               by: tuple[str, ...] = ("model", "tokenizer")) -> pd.DataFrame:
    """One row per cell: each column's mean over seeds and ``<column>_err``, the half-width of its Student-t 95%
    interval (0 with one seed), with ``seeds``. Columns in ``log`` (perplexities) are averaged as logs, the
    perplexity of the mean loss, and their error is the pair (below, above) in the column's units."""
    rows = []
    for key, cell in df.groupby(list(by), sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), seeds=len(cell))
        for column in columns:
            values = np.log(cell[column].astype(float)) if column in log else cell[column].astype(float)
            mean, half = seed_interval(list(values))
            half = half or 0.0
            if column in log:
                row[column], row[f"{column}_err"] = math.exp(mean), (math.exp(mean) - math.exp(mean - half),
                                                                      math.exp(mean + half) - math.exp(mean))
            else:
                row[column], row[f"{column}_err"] = mean, half
        for extra in ("flags", "lossless_bool", "run_dir"):
            if extra in cell:
                row[extra] = cell[extra].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows)


def errors_of(column: pd.Series):
    """An error column for matplotlib: symmetric half-widths, or the (below, above) pairs of a log column."""
    values = list(column)
    if values and isinstance(values[0], tuple):
        return np.array(values, dtype=float).T
    return np.array(values, dtype=float)


def engineering(value: float, _=None) -> str:
    """500,000,000,000 -> '500G', 2,000,000 -> '2M', 1,500 -> '1.5k', 20 -> '20', 0.25 -> '0.25': one notation from
    a thousand up, so that ticks never mix 9,000 with 10k."""
    if value <= 0 or not math.isfinite(value):
        return f"{value:g}"
    if value < 1000:
        return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"
    exponent = min(int(math.floor(math.log10(value) / 3)), 6)
    return f"{value / 1000 ** exponent:.3g}{' kMGTPE'[exponent]}"


def log_axis(ax, axis: str = "y", narrow: bool = False) -> None:
    """A log scale in engineering notation (2M, 500G), with enough ticks for short ranges (fewer on a ``narrow``
    panel, where labels would overlap). Call it after plotting: the tick density follows the data's span."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    span = math.log10(max(high, 1e-12) / max(low, 1e-12))
    subs = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0) if span < 1 and not narrow else \
        (1.0, 2.0, 5.0) if span < 2.5 else (1.0,)
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(engineering))
    target.set_minor_formatter(NullFormatter())


def flags_of(df: pd.DataFrame, tokenizer: str) -> str:
    flags = "".join(sorted(set("".join(df.loc[df["tokenizer"] == tokenizer, "flags"]))))
    return f" {flags}" if flags else ""


def legend(ax, df: pd.DataFrame, colors: dict, extra: list | None = None, **options) -> None:
    """One entry per tokenization (its colour) and per model (its marker), never one per seed."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[t], marker="o", ls="", label=t + flags_of(df, t))
               for t in sorted(df["tokenizer"].unique(), key=tokenizer_order)]
    handles += [Line2D([], [], color="0.3", marker=model_class.marker, ls=model_class.linestyle, label=m)
                for m, model_class in ((m, model_family(m)) for m in sorted(df["model"].unique()))]
    seeds = df.groupby(["model", "tokenizer"]).size().max() if "seed" in df else 1
    if seeds > 1:
        handles.append(Line2D([], [], color="0.3", marker="|", ls="", ms=8, label="95% interval over seeds"))
    ax.legend(handles=handles + (extra or []), fontsize=7, frameon=False, **({"loc": "best"} | options))


def save(fig, folder, name: str) -> bytes:
    """Write ``name``.png and ``name``.svg; returns the PNG bytes (for embedding)."""
    import io

    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    (folder / f"{name}.png").write_bytes(png.getvalue())
    fig.savefig(folder / f"{name}.svg", format="svg", bbox_inches="tight")
    plt.close(fig)
    return png.getvalue()
