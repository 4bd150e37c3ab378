"""Intrinsic measures against trained models' bits per byte: the rank correlation and its interval on synthetic
cells whose answer is known, and the report's section drawn from runs whose measures are known."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from bench.study.report import intrinsic_section
from bench.study.report.figure_style import FigureStyle
from bench.study.report.rendering import ReportPage
from bench.study.stats.intrinsic import rank_correlation
from tokenizers_study.stats import INTRINSIC, intrinsic_measures

CELLS = [f"t{i}" for i in range(8)]
MEANS = np.linspace(1.0, 1.7, 8)  # each cell's true bits per byte


def seeds(sd: float, n: int = 3, seed: int = 0) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    return {t: list(m + rng.normal(0, sd, n)) for t, m in zip(CELLS, MEANS)}


def test_a_measure_that_orders_the_cells_as_their_bits_per_byte_gives_rho_one():
    rho = rank_correlation(dict(zip(CELLS, MEANS * 3)), seeds(0.005))
    assert (rho.rho, rho.low, rho.high, rho.tokenizations) == (1.0, 1.0, 1.0, 8)
    reversed_ = rank_correlation(dict(zip(CELLS, -MEANS)), seeds(0.005))
    assert (reversed_.rho, reversed_.low, reversed_.high) == (-1.0, -1.0, -1.0)


SHUFFLES = [order for order in (np.random.default_rng(k).permutation(len(CELLS)) for k in range(40))
            if abs(spearmanr(order, range(len(CELLS))).statistic) < 0.3][:5]  # orders unrelated to the cells'


@pytest.mark.parametrize("order", SHUFFLES, ids=lambda order: "".join(map(str, order)))
def test_a_shuffled_measure_gives_an_interval_covering_zero(order):
    rho = rank_correlation(dict(zip(CELLS, MEANS[order])), seeds(0.005))
    assert rho.low < 0 < rho.high


def test_the_interval_carries_the_seed_spread():
    """The measure orders the cells' seed means exactly (rho = 1), but their seeds overlap: the interval must say
    that the ranking is uncertain (over the seed means alone, with the spread ignored, it would be [1, 1])."""
    noisy = seeds(0.3)
    rho = rank_correlation({t: float(np.mean(v)) for t, v in noisy.items()}, noisy)
    assert rho.rho == 1.0 and rho.low < 0.8
    quiet = seeds(0.3 / 100)
    assert rank_correlation({t: float(np.mean(v)) for t, v in quiet.items()}, quiet).low == 1.0  # seeds never cross


def test_one_seed_gives_no_interval_and_too_few_cells_no_correlation():
    one = rank_correlation(dict(zip(CELLS, MEANS)), seeds(0.01, n=1))
    assert one.rho == 1.0 and one.low is None and "[" not in one.cell()
    assert rank_correlation(dict(zip(CELLS[:2], MEANS[:2])), seeds(0.01)) is None
    assert rank_correlation(dict.fromkeys(CELLS, 1.0), seeds(0.01)) is None  # a measure that does not vary


def test_intrinsic_measures_of_known_ids():
    ids = np.array([0, 0, 1, 2])
    got = intrinsic_measures(ids, vocab_size=8, counts={"n_bytes": 12, "n_chars": 10, "n_words": 2})
    assert set(got) == set(INTRINSIC)
    assert got["bytes_per_token"] == 3 and got["chars_per_token"] == 2.5 and got["tokens_per_word"] == 2
    assert got["vocab_used"] == 3 / 8
    assert got["unigram_entropy_bits_per_byte"] == pytest.approx(1.5 * 4 / 12)  # H = 1.5 bits a token


def fake_study(tmp_path, bits_per_token: dict[str, int], lossy: str):
    """Runs of one model on one text whose tokenization t covers bits_per_token[t] bytes a token of a 1,200-byte
    train text; test bits per byte falls as tokens get longer, two seeds a cell; ``lossy`` is not lossless."""
    text = "abcdefghijk\n" * 100
    rows, runs = [], {}
    for k, (tokenizer, width) in enumerate(bits_per_token.items()):
        ids = np.arange(len(text) // width) % (width * 7)
        for seed in (0, 1):
            run_dir = f"{tokenizer}-{seed}"
            rows.append(dict(model="lstm", tokenizer=tokenizer, dataset="toy", match="chars", seed=seed,
                             run_dir=run_dir, lossless_bool=tokenizer != lossy, flags="",
                             test_bits_per_byte=2.0 - 0.1 * width + 0.001 * seed))
            runs[run_dir] = SimpleNamespace(on_other_data=False, ids=lambda split, ids=ids: ids,
                                            split_data=lambda split: SimpleNamespace(read_text=lambda: text),
                                            tokenizer=SimpleNamespace(vocab_size=width * 7 + 1),
                                            log=[{"train_chars": 100, "valid_bits_per_byte": 2.0},
                                                 {"train_chars": 200, "valid_bits_per_byte": 1.5}])
    done = pd.DataFrame(rows)
    return SimpleNamespace(done=done, runs=runs), FigureStyle.of(done["tokenizer"])


def test_the_report_section_ranks_the_lossless_tokenizations(tmp_path):
    study, style = fake_study(tmp_path, {"byte": 1, "bpe:100": 2, "bpe:400": 3, "word:50": 6}, lossy="word:50")
    doc, drawn = ReportPage("t"), []

    def figure(doc, draw, out, name, caption):
        drawn.append((draw(), name, caption))

    intrinsic_section.section(doc, study, tmp_path, style, figure)
    fig, name, caption = drawn[0]
    assert name == "9-intrinsic-measures" and len(fig.axes) == len(INTRINSIC)
    assert "Lossy tokenizations are left out (word:50)" in caption and "still improving" in caption
    tables = [block for block in doc.blocks if block[0] == "table"]
    correlations = {row["measure"]: row for row in tables[0][1]}
    compression = correlations[INTRINSIC["bytes_per_token"]]
    assert compression["Spearman ρ"] == "-1.000" and compression["tokenizations"] == 3  # word:50 left out
    assert [row["tokenizer"] for row in tables[1][1]] == ["byte", "bpe:100", "bpe:400"]
    # the docs include the committed report's tables by these markers: each wraps its caption and table
    markdown = doc.markdown()
    for anchor in ("intrinsic-correlations", "intrinsic-measures"):
        start = markdown.index(f"<!-- --8<-- [start:{anchor}] -->")
        end = markdown.index(f"<!-- --8<-- [end:{anchor}] -->")
        assert "| tokenizer |" in markdown[start:end] or "| measure |" in markdown[start:end]


def test_the_report_section_says_why_it_has_no_figure_with_two_lossless_tokenizations(tmp_path):
    study, style = fake_study(tmp_path, {"byte": 1, "bpe:100": 2, "word:50": 6}, lossy="word:50")
    doc, why = ReportPage("t"), []

    def figure(doc, draw, out, name, caption):
        with pytest.raises(intrinsic_section.NoData) as raised:
            draw()
        why.append(str(raised.value))

    intrinsic_section.section(doc, study, tmp_path, style, figure)
    assert "3 or more lossless tokenizations" in why[0]
    assert not [block for block in doc.blocks if block[0] == "table"]


def test_a_figure_of_many_tokenizations_names_them_in_a_legend_not_on_each_point(tmp_path):
    """Up to LABELLED_CELLS tokenizations each point carries its name; beyond, the names would overlap, so one
    legend gives every tokenization's colour instead."""
    many = {f"bpe:{100 * width}": width for width in range(1, intrinsic_section.LABELLED_CELLS + 3)}
    study, style = fake_study(tmp_path, many, lossy="")
    study.done = pd.concat([study.done, study.done.assign(model="transformer")])  # two rows of panels, one legend
    drawn = []
    intrinsic_section.section(ReportPage("t"), study, tmp_path, style,
                              lambda doc, draw, out, name, caption: drawn.append(draw()))
    axes = drawn[0].axes
    assert len(axes) == 2 * len(INTRINSIC) and not any(ax.texts for ax in axes)
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    assert len(legends) == 1 and {t.get_text() for t in legends[0].get_texts()} >= set(many)
    few, style = fake_study(tmp_path, dict(list(many.items())[:3]), lossy="")
    drawn.clear()
    intrinsic_section.section(ReportPage("t"), few, tmp_path, style,
                              lambda doc, draw, out, name, caption: drawn.append(draw()))
    assert all(len(ax.texts) == 3 for ax in drawn[0].axes) and not any(ax.get_legend() for ax in drawn[0].axes)
