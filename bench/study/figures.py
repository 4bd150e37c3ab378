"""The report's figures (matplotlib, no display needed). Each function returns a Figure.

Conventions: one colour per tokenization, one marker per model; hollow markers
for lossy tokenizations; the report's flags (†, ‡, §) beside each tokenization in
the legends.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

MARKERS = {"sha-rnn": "o", "lstm": "s", "transformer": "^"}
plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 130, "font.size": 9, "axes.grid": True,
                     "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False})


def tokenizer_colors(tokenizers: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10" if len(tokenizers) <= 10 else "tab20")
    return {t: cmap(i % cmap.N) for i, t in enumerate(sorted(tokenizers, key=tokenizer_order))}


def tokenizer_order(name: str):
    family, _, size = name.partition(":")
    order = {"byte": 0, "char": 1, "bpe": 2, "sp-bpe": 3, "sp-unigram": 4, "word-open": 5, "word": 6}
    return (order.get(family, 9), int(size) if size.isdigit() else 0, name)


def _log_axis(ax, axis: str = "y") -> None:
    """A log scale labelled with plain numbers (1,000 rather than 10^3), with enough ticks for short ranges.

    Call it after plotting: the tick density follows the data's span.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    span = math.log10(max(high, 1e-12) / max(low, 1e-12))
    subs = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0) if span < 1 else (1.0, 2.0, 5.0) if span < 2.5 else (1.0,)
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:.3g}"))
    target.set_minor_formatter(NullFormatter())


def _placeholder(fig: Figure, ax, message: str) -> None:
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10, transform=ax.transAxes)


def _flags_of(df: pd.DataFrame, tokenizer: str) -> str:
    flags = "".join(sorted(set("".join(df.loc[df["tokenizer"] == tokenizer, "flags"]))))
    return f" {flags}" if flags else ""


def _legend(ax, df: pd.DataFrame, colors: dict, extra: list | None = None) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[t], marker="o", ls="", label=t + _flags_of(df, t))
               for t in sorted(df["tokenizer"].unique(), key=tokenizer_order)]
    handles += [Line2D([], [], color="0.3", marker=MARKERS.get(m, "D"), ls="", label=m)
                for m in sorted(df["model"].unique())]
    ax.legend(handles=handles + (extra or []), fontsize=7, loc="best", frameon=False)


def _scatter(ax, df: pd.DataFrame, x: str, y: str, colors: dict) -> None:
    for _, r in df.iterrows():
        filled = bool(r["lossless_bool"])  # hollow: a lossy tokenization, not comparable
        ax.scatter(r[x], r[y], marker=MARKERS.get(r["model"], "D"), s=42, linewidths=1.2,
                   facecolors=colors[r["tokenizer"]] if filled else "none", edgecolors=colors[r["tokenizer"]])


def attack_figure(df: pd.DataFrame, compressor_lines: dict[str, list[tuple[str, float]]] | None = None) -> Figure:
    """Per-token perplexity against bits per character: the tokenization attack, one row of two panels per text
    and matching rule (never pooled); ``compressor_lines`` (dataset -> (label, bits per character)) are drawn
    as dotted vertical lines on that dataset's panels."""
    groups = list(df.groupby(["dataset", "match"], sort=True, dropna=False)) or [(("", ""), df)]
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 4.2 * len(groups)), squeeze=False)
    colors = tokenizer_colors(list(df["tokenizer"].unique()))
    for (left, right), ((dataset, match), group) in zip(axes, groups):
        where = f"{dataset}, matched on {match}: " if len(groups) > 1 else ""
        _attack_panels(left, right, group, colors, (compressor_lines or {}).get(dataset, []), dataset, where)
    fig.suptitle("The tokenization attack: the same models ranked by per-token and by per-word perplexity "
                 "(hollow: lossy tokenization, not comparable)", fontsize=10)
    fig.tight_layout()
    return fig


def _attack_panels(left, right, df: pd.DataFrame, colors: dict, lines: list[tuple[str, float]], dataset: str,
                   where: str) -> None:
    from matplotlib.lines import Line2D

    extra = []
    for (label, bits_per_char), style in zip(lines, (":", "-.")):
        for ax in (left, right):
            ax.axvline(bits_per_char, color="C7", ls=style, lw=1.0)
        extra.append(Line2D([], [], color="C7", ls=style, lw=1.0, label=f"{dataset}: {label}"))
    _scatter(left, df, "test_bits_per_char", "test_token_perplexity", colors)
    _log_axis(left)
    left.set_xlabel("test bits per character (lower is better)")
    left.set_ylabel("test per-token perplexity (log scale)")
    left.set_title(where + "per-token perplexity depends on the tokenizer", fontsize=9)
    _legend(left, df, colors, extra)
    _scatter(right, df, "test_bits_per_char", "test_word_perplexity", colors)
    _log_axis(right)
    right.set_xlabel("test bits per character (lower is better)")
    right.set_ylabel("test word perplexity (log scale)")
    right.set_title(where + "normalized per word, the ranking of bits/char", fontsize=9)
    # On one text, word perplexity is a fixed function of bits per character.
    chars_per_word = float((df["test_n_chars"] / df["test_n_words"]).iloc[0])
    xs = np.linspace(df["test_bits_per_char"].min() * 0.97, df["test_bits_per_char"].max() * 1.03, 50)
    right.plot(xs, 2 ** (xs * chars_per_word), color="0.6", lw=0.8, ls="--",
               label=f"{dataset}: 2^(bpc x {chars_per_word:.2f} chars/word)")
    right.legend(fontsize=7, frameon=False, loc="upper left")


def vocab_sweep_figure(df: pd.DataFrame) -> Figure:
    """Bits per character and per-token perplexity against the subword vocabulary size."""
    sizes = df[df["tokenizer"].str.contains(r"^(?:bpe|sp-bpe|sp-unigram):", regex=True)].copy()
    if not sizes.empty and (df["tokenizer"] == "byte").any():
        # Bytes are byte-level BPE with no merges: the sweep's 256 point.
        sizes = pd.concat([sizes, df[df["tokenizer"] == "byte"].assign(tokenizer="bpe:256")])
    if sizes.empty or sizes["tokenizer"].nunique() < 2:
        fig, ax = plt.subplots(figsize=(10, 2.5))
        lines = ["This matrix has fewer than two subword vocabulary sizes: no sweep to draw",
                 "(configs/attack.toml sweeps BPE from 512 to 32k)."]
        lines += [f"{r.model} {r.tokenizer}: {r.test_bits_per_char:.3f} bits/char, per-token perplexity "
                  f"{r.test_token_perplexity:,.1f}" for r in sizes.itertuples()]
        _placeholder(fig, ax, "\n".join(lines))
        return fig
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    sizes["family"] = sizes["tokenizer"].str.split(":").str[0]
    sizes["size"] = sizes["tokenizer"].str.split(":").str[1].astype(int)
    styles = {"chars": "-", "tokens": "--", "steps": ":", "flops": "-."}
    # Means over seeds only: runs matched under different rules are drawn apart, never pooled.
    for (model, family, rule), group in sizes.groupby(["model", "family", "match"]):
        g = group.groupby("size")[["test_bits_per_char", "test_token_perplexity"]].mean().sort_index()
        label = f"{model} {family} (equal {rule})"
        left.plot(g.index, g["test_bits_per_char"], marker=MARKERS.get(model, "D"), ls=styles.get(rule, "-"),
                  label=label)
        right.plot(g.index, g["test_token_perplexity"], marker=MARKERS.get(model, "D"), ls=styles.get(rule, "-"),
                   label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("vocabulary size")
    left.set_ylabel("test bits per character")
    right.set_ylabel("test per-token perplexity (log)")
    _log_axis(right)
    left.set_title("Comparable: bits per character")
    right.set_title("Not comparable: per-token perplexity grows with the vocabulary")
    left.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def teacher_forcing_figure(profiles: dict[str, dict]) -> Figure:
    """How a word's loss is spread over its pieces (left) and loss by position within the word (right)."""
    if not profiles:
        fig, ax = plt.subplots(figsize=(10, 2.5))
        _placeholder(fig, ax, "No per-token losses were dumped (set dump_token_losses = true in the config).")
        return fig
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
    labels = sorted(profiles, key=lambda k: tokenizer_order(k.split(" ")[-1]))
    for label in labels:
        pieces = profiles[label]["pieces"]
        multi = [p for p in pieces]
        if multi:
            xs = [p["pieces"] for p in multi]
            left.plot(xs, [p["first_piece_share"] for p in multi], marker="o", label=label)
        positions = profiles[label]["positions"]
        if len(positions) > 1:
            right.plot([p["position"] for p in positions], [p["mean_bits"] for p in positions], marker=".",
                       label=label)
    left.set_xlabel("pieces in the word (last point: that many or more)")
    left.set_ylabel("mean share of the word's loss on its first piece")
    left.set_ylim(0, 1.05)
    left.set_title("Teacher forcing inside words: the first piece carries the surprise")
    right.set_xlabel("piece position within the word (bytes/characters for byte/char models)")
    right.set_ylabel("mean loss of the piece (bits)")
    right.set_title("Loss by position within the word")
    handles, names = left.get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.legend(handles, names, loc="lower center", ncol=min(5, len(names)), fontsize=7, frameon=False)
    return fig


def closed_vocabulary_figure(df: pd.DataFrame, unk: dict[str, dict]) -> Figure:
    """Word perplexity of closed-vocabulary word models beside open-vocabulary models on the same text."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    closed = df[df["tokenizer"].str.startswith("word:")]
    if closed.empty:
        _placeholder(fig, ax, "This matrix has no closed-vocabulary (word:N) run.")
        return fig
    colors = tokenizer_colors(list(df["tokenizer"].unique()))
    rule = closed["match"].mode().iloc[0]  # compare on the closed runs' matching rule
    data = df[df["match"] == rule].sort_values(
        ["model", "tokenizer"], key=lambda s: s.map(tokenizer_order) if s.name == "tokenizer" else s)
    xs = np.arange(len(data))
    for x, (_, r) in zip(xs, data.iterrows()):
        is_closed = r["tokenizer"].startswith("word:")
        ax.bar(x, r["test_word_perplexity"], color=colors[r["tokenizer"]], hatch="//" if is_closed else None,
               edgecolor="black" if is_closed else colors[r["tokenizer"]], alpha=0.85)
        note = ""
        if is_closed and r["run_dir"] in unk:
            note = f"<unk>: {100 * unk[r['run_dir']]['unk_nll_share']:.0f}% of NLL\nNOT comparable"
        ax.text(x, r["test_word_perplexity"], f"{r['test_word_perplexity']:,.0f}\n{note}", ha="center",
                va="bottom", fontsize=6.5)
    ax.set_xticks(xs, [f"{r.model}\n{r.tokenizer}" for r in data.itertuples()], fontsize=7)
    _log_axis(ax)
    ax.margins(y=0.25)
    ax.set_ylabel("test word perplexity (log)")
    ax.set_title(f"Closed vocabularies look better than they are: hatched bars predict <unk> instead of the word "
                 f"(runs matched on equal {rule})")
    fig.tight_layout()
    return fig


def learning_curves_figure(curves: list[tuple[dict, list[dict]]]) -> Figure:
    """Validation bits per character against training characters seen."""
    fig, ax = plt.subplots(figsize=(11, 4.2))
    points = [(row, [e for e in log if "valid_bits_per_char" in e]) for row, log in curves]
    points = [(row, log) for row, log in points if log]
    if not points:
        _placeholder(fig, ax, "No validation was logged.")
        return fig
    colors = tokenizer_colors(list({row["tokenizer"] for row, _ in points}))
    styles = {"chars": "-", "tokens": "--", "steps": ":"}
    for row, log in points:
        ax.plot([e["train_chars"] for e in log], [e["valid_bits_per_char"] for e in log],
                color=colors[row["tokenizer"]], ls=styles.get(row["match"], "-"),
                marker=MARKERS.get(row["model"], "D"), ms=3, lw=1,
                label=f"{row['model']} {row['tokenizer']} ({row['match']})" + (f" {row['flags']}" if row["flags"]
                                                                                else ""))
    _log_axis(ax, "x")
    ax.set_xlabel("training characters seen (log)")
    ax.set_ylabel("validation bits per character")
    ax.set_title("Learning curves (validation on the same first characters of valid for every tokenization)")
    ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def compute_figure(curves: list[tuple[dict, list[dict]]]) -> Figure:
    """Validation bits per byte against training FLOPs: one curve per run."""
    fig, ax = plt.subplots(figsize=(11, 4.2))
    points = [(row, [e for e in log if "valid_bits_per_byte" in e and "train_flops" in e]) for row, log in curves]
    points = [(row, log) for row, log in points if log]
    if not points:
        _placeholder(fig, ax, "No validation with training FLOPs was logged.")
        return fig
    colors = tokenizer_colors(list({row["tokenizer"] for row, _ in points}))
    styles = {"chars": "-", "tokens": "--", "steps": ":", "flops": "-."}
    for row, log in points:
        ax.plot([e["train_flops"] for e in log], [e["valid_bits_per_byte"] for e in log],
                color=colors[row["tokenizer"]], ls=styles.get(row["match"], "-"),
                marker=MARKERS.get(row["model"], "D"), ms=3, lw=1,
                label=f"{row['model']} {row['tokenizer']} (s{row['seed']}, {row['match']})")
    _log_axis(ax, "x")
    ax.set_xlabel("training FLOPs (log): the model's FLOPs per token x tokens seen")
    ax.set_ylabel("validation bits per byte")
    ax.set_title("Equal compute: validation loss against training compute")
    ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def matching_figure(df: pd.DataFrame) -> Figure:
    """Bits per character of each tokenization under each matching rule a model was run with."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    order = ("tokens", "steps", "flops", "chars")
    both = df.groupby(["model", "dataset"])["match"].nunique()
    pairs = [key for key, n in both.items() if n >= 2]
    if not pairs:
        _placeholder(fig, ax, "This matrix matches runs by one rule only: add cells with match = \"tokens\" (and "
                              "\"chars\") to compare rankings.")
        return fig
    colors = tokenizer_colors(list(df["tokenizer"].unique()))
    width = 1.0 / len(pairs)
    ticks, labels = [], []
    for k, (model, dataset) in enumerate(pairs):
        sub = df[(df["model"] == model) & (df["dataset"] == dataset)]
        table = sub.groupby(["tokenizer", "match"])["test_bits_per_char"].mean().unstack("match").dropna()
        rules = [r for r in order if r in table.columns]
        xs = [k + width * 0.15 + width * 0.7 * i / max(len(rules) - 1, 1) for i in range(len(rules))]
        for tokenizer, values in table.iterrows():
            ax.plot(xs, [values[r] for r in rules], marker=MARKERS.get(model, "D"), color=colors[tokenizer])
            ax.text(xs[-1] + 0.01, values[rules[-1]], f" {tokenizer}", fontsize=7, va="center",
                    color=colors[tokenizer])
        ax.text(k + width / 2, 1.02, f"{model} / {dataset}", transform=ax.get_xaxis_transform(), ha="center",
                fontsize=8)
        ticks += xs
        labels += [f"equal {r}" for r in rules]
    ax.set_xticks(ticks, labels, fontsize=7)
    ax.set_ylabel("test bits per character")
    ax.set_title("How the comparison changes with the matching rule (equal tokens, FLOPs or characters)", pad=18)
    fig.tight_layout()
    return fig


def save(fig: Figure, folder, name: str) -> bytes:
    """Write ``name``.png and ``name``.svg; returns the PNG bytes (for embedding)."""
    import io

    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    (folder / f"{name}.png").write_bytes(png.getvalue())
    fig.savefig(folder / f"{name}.svg", format="svg", bbox_inches="tight")
    plt.close(fig)
    return png.getvalue()
