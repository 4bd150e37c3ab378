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


class NoData(Exception):
    """A figure with nothing to draw: the report leaves it out and says why in one line."""


def text_groups(df: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """The runs of each text and matching rule, (dataset, match) -> rows: every figure draws each group on its
    own axes, so that nothing is ranked, averaged or drawn across texts or rules."""
    return list(df.groupby(["dataset", "match"], sort=True, dropna=False)) or [(("", ""), df)]


def group_title(key: tuple[str, str], groups: int) -> str:
    """'wikitext-2, matched on chars: ' when a figure has several groups, else nothing."""
    return f"{key[0]}, matched on {key[1]}: " if groups > 1 else ""


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
    groups = text_groups(df)
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 4.2 * len(groups)), squeeze=False)
    colors = tokenizer_colors(list(df["tokenizer"].unique()))
    for (left, right), (key, group) in zip(axes, groups):
        _attack_panels(left, right, group, colors, (compressor_lines or {}).get(key[0], []), key[0],
                       group_title(key, len(groups)))
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
    """Bits per character and per-token perplexity against the subword vocabulary size: one row of panels per
    text and matching rule."""
    sizes = df[df["tokenizer"].str.contains(r"^(?:bpe|sp-bpe|sp-unigram):", regex=True)].copy()
    if not sizes.empty and (df["tokenizer"] == "byte").any():
        # Bytes are byte-level BPE with no merges: the sweep's 256 point.
        sizes = pd.concat([sizes, df[df["tokenizer"] == "byte"].assign(tokenizer="bpe:256")])
    if sizes.empty or sizes["tokenizer"].nunique() < 2:
        raise NoData("the matrix has fewer than two byte-level BPE vocabulary sizes (configs/attack.toml sweeps "
                     "512 to 32k)")
    sizes["family"] = sizes["tokenizer"].str.split(":").str[0]
    sizes["size"] = sizes["tokenizer"].str.split(":").str[1].astype(int)
    groups = text_groups(sizes)
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 3.8 * len(groups)), squeeze=False)
    for (left, right), (key, group) in zip(axes, groups):
        for (model, family), cell in group.groupby(["model", "family"]):  # the mean over seeds only
            g = cell.groupby("size")[["test_bits_per_char", "test_token_perplexity"]].mean().sort_index()
            for ax, column in ((left, "test_bits_per_char"), (right, "test_token_perplexity")):
                ax.plot(g.index, g[column], marker=MARKERS.get(model, "D"), label=f"{model} {family}")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("vocabulary size")
        left.set_ylabel("test bits per character")
        right.set_ylabel("test per-token perplexity (log)")
        _log_axis(right)
        where = group_title(key, len(groups))
        left.set_title(where + "comparable: bits per character", fontsize=9)
        right.set_title(where + "not comparable: per-token perplexity", fontsize=9)
        left.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def teacher_forcing_figure(profiles: dict[tuple[str, str], dict[str, dict]]) -> Figure:
    """How a word's loss is spread over its pieces (left) and loss by position within the word (right): a row
    per text and matching rule, ``profiles``: (dataset, match) -> "model tokenizer" -> profile."""
    if not profiles:
        raise NoData("no per-token losses were saved (dump_token_losses = true saves them)")
    keys = sorted(profiles)
    fig, axes = plt.subplots(len(keys), 2, figsize=(10, 4.6 * len(keys)), squeeze=False)
    for (left, right), key in zip(axes, keys):
        group = profiles[key]
        for label in sorted(group, key=lambda k: tokenizer_order(k.split(" ")[-1])):
            pieces = group[label]["pieces"]
            if pieces:
                left.plot([p["pieces"] for p in pieces], [p["first_piece_share"] for p in pieces], marker="o",
                          label=label)
            positions = group[label]["positions"]
            if len(positions) > 1:
                right.plot([p["position"] for p in positions], [p["mean_bits"] for p in positions], marker=".",
                           label=label)
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


def closed_vocabulary_figure(df: pd.DataFrame, unk: dict[str, dict]) -> Figure:
    """Word perplexity of closed-vocabulary word models beside open-vocabulary models on the same text: one
    panel per dataset, each on its closed runs' matching rule."""
    closed = df[df["tokenizer"].str.startswith("word:")]
    if closed.empty:
        raise NoData("the matrix has no closed-vocabulary (word:N) run")
    keys = sorted({(r.dataset, r.match) for r in closed.itertuples()})
    fig, axes = plt.subplots(len(keys), 1, figsize=(10, 3.8 * len(keys)), squeeze=False)
    colors = tokenizer_colors(list(df["tokenizer"].unique()))
    for ax, key in zip(axes[:, 0], keys):
        data = df[(df["dataset"] == key[0]) & (df["match"] == key[1])].sort_values(
            ["model", "tokenizer", "seed"], key=lambda s: s.map(tokenizer_order) if s.name == "tokenizer" else s)
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
        seeds = data["seed"].nunique() > 1
        ax.set_xticks(xs, [f"{r.model}\n{r.tokenizer}" + (f"\ns{r.seed}" if seeds else "")
                           for r in data.itertuples()], fontsize=7)
        _log_axis(ax)
        ax.margins(y=0.25)
        ax.set_ylabel("test word perplexity (log)")
        ax.set_title(f"{key[0]}, matched on {key[1]}: closed vocabularies look better than they are (hatched: "
                     "predicts <unk> instead of the word)", fontsize=9)
    fig.tight_layout()
    return fig


def learning_curves_figure(curves: list[tuple[dict, list[dict]]]) -> Figure:
    """Validation bits per character against training characters seen: one panel per text and matching rule."""
    return _curves_figure(curves, "train_chars", "valid_bits_per_char", "training characters seen (log)",
                          "validation bits per character", "Learning curves (validation on the same first "
                          "characters of valid for every tokenization)", "no validation was logged")


def compute_figure(curves: list[tuple[dict, list[dict]]]) -> Figure:
    """Validation bits per byte against training FLOPs: one curve per run, one panel per text and matching rule."""
    return _curves_figure(curves, "train_flops", "valid_bits_per_byte",
                          "training FLOPs (log): the model's FLOPs per token x tokens seen",
                          "validation bits per byte", "Equal compute: validation loss against training compute",
                          "no validation with training FLOPs was logged")


def _curves_figure(curves: list[tuple[dict, list[dict]]], x: str, y: str, xlabel: str, ylabel: str, title: str,
                   empty: str) -> Figure:
    points = [(row, [e for e in log if y in e and x in e]) for row, log in curves]
    points = [(row, log) for row, log in points if log]
    if not points:
        raise NoData(empty)
    colors = tokenizer_colors(list({row["tokenizer"] for row, _ in points}))
    keys = sorted({(row["dataset"], row["match"]) for row, _ in points})
    fig, axes = plt.subplots(len(keys), 1, figsize=(11, 4.2 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for row, log in points:
            if (row["dataset"], row["match"]) != key:
                continue
            flags = f" {row['flags']}" if row["flags"] else ""
            ax.plot([e[x] for e in log], [e[y] for e in log], color=colors[row["tokenizer"]],
                    marker=MARKERS.get(row["model"], "D"), ms=3, lw=1,
                    label=f"{row['model']} {row['tokenizer']} (s{row['seed']}){flags}")
        _log_axis(ax, "x")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(group_title(key, len(keys)) + title, fontsize=9)
        ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def matching_figure(df: pd.DataFrame) -> Figure:
    """Bits per character of each tokenization under each matching rule a model was run with."""
    order = ("tokens", "steps", "flops", "chars")
    both = df.groupby(["model", "dataset"])["match"].nunique()
    pairs = [key for key, n in both.items() if n >= 2]
    if not pairs:
        raise NoData("the matrix matches runs by one rule only (cells with match = \"tokens\" beside \"chars\" "
                     "compare them)")
    fig, ax = plt.subplots(figsize=(10, 3.8))
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
