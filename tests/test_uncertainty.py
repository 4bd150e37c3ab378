"""Uncertainty that means what it says: documents as the unit of text, seeds as the unit of replication, Holm."""

import numpy as np
import pytest

from bench.study.documents import document_starts, document_totals
from bench.study.uncertainty import TextLosses, compare, document_interval, holm, seed_interval


def test_wikitext_articles_wikipedia_pages_and_blocks():
    wiki = " \n = First = \n \n text \n = = Section = = \n more \n = Second title = \n \n end \n"
    starts, kind = document_starts(wiki)
    assert kind == "article" and list(starts) == [0, wiki.index(" = Second")]  # sections do not split
    xml = "<mediawiki>\n  <page>\n a \n  </page>\n  <page>\n b \n  </page>\n"
    starts, kind = document_starts(xml)
    assert kind == "page" and list(starts) == [0, xml.index("<page>", xml.index("<page>") + 1)]
    starts, kind = document_starts("no marks at all " * 100)
    assert kind == "block" and len(starts) == 50 and starts[0] == 0


def test_a_token_belongs_to_the_document_it_ends_in():
    starts = np.array([0, 10])
    bits, sizes = document_totals(np.array([4, 11, 20]), np.array([1.0, 2.0, 4.0]), starts, 20)
    assert list(bits) == [0.0 + 1.0, 6.0] and list(sizes) == [10, 10]


def _runs(rng, sizes, level, seed_noise, seeds):
    """Runs of one setup: a per-seed offset (training noise) on top of per-document noise (text)."""
    return {s: TextLosses(sizes * (level + rng.normal(0, seed_noise) + rng.normal(0, 0.05, len(sizes))), sizes)
            for s in seeds}


def test_one_seed_per_side_gives_a_text_interval_and_no_p_value():
    rng = np.random.default_rng(3)
    sizes = rng.integers(1000, 20000, size=60).astype(float)
    a, b = _runs(rng, sizes, 1.20, 0.05, [0]), _runs(rng, sizes, 1.20, 0.05, [0])  # the same setup twice
    result = compare({0: a[0].bits_per_byte}, {0: b[0].bits_per_byte}, a, b)
    assert result.p_value is None and result.test == ""
    assert result.low < result.difference < result.high and "documents" in result.interval


def test_seeds_make_a_test_and_an_interval_that_covers_training_noise():
    rng = np.random.default_rng(4)
    sizes = rng.integers(1000, 20000, size=60).astype(float)
    a, b = _runs(rng, sizes, 1.20, 0.05, range(4)), _runs(rng, sizes, 1.20, 0.05, range(4))
    result = compare({s: r.bits_per_byte for s, r in a.items()}, {s: r.bits_per_byte for s, r in b.items()}, a, b)
    assert result.p_value is not None and result.p_value > 0.01  # the same setup: no tiny p-value
    assert result.test == "paired t-test over 4 seeds" and result.interval == "bootstrap over seeds, then documents"
    text_only = compare({0: a[0].bits_per_byte}, {0: b[0].bits_per_byte}, {0: a[0]}, {0: b[0]})
    assert result.high - result.low > text_only.high - text_only.low  # seed noise widens it
    shifted = _runs(rng, sizes, 1.50, 0.05, range(4))
    far = compare({s: r.bits_per_byte for s, r in a.items()}, {s: r.bits_per_byte for s, r in shifted.items()},
                  a, shifted)
    assert far.p_value < 0.05 and far.high < 0


def test_unmatched_seeds_use_welch_and_missing_losses_fall_back_to_t():
    result = compare({0: 1.0, 1: 1.1, 2: 1.05}, {7: 1.3, 8: 1.25})
    assert result.test == "Welch t-test, 3 and 2 seeds" and result.interval == "t over seeds"
    assert result.low < result.difference < result.high


def test_cell_intervals():
    mean, half = seed_interval([1.0, 1.2, 1.1])
    assert mean == pytest.approx(1.1) and half == pytest.approx(4.303 * 0.1 / 3 ** 0.5, rel=1e-3)
    assert seed_interval([1.0]) == (1.0, None)
    sizes = np.full(40, 100.0)
    runs = [TextLosses(sizes * (1 + np.linspace(-0.1, 0.1, 40)), sizes)]
    low, high = document_interval(runs)
    assert low < 1.0 < high


def test_holm_adjusts_the_family_together():
    # sorted 0.01, 0.03, 0.04 -> 3 x 0.01, 2 x 0.03, max(0.06, 1 x 0.04): the adjustment is monotone
    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([None]) == [None]


def test_the_vocabulary_sweep_never_pools_matching_rules():
    import pandas as pd

    from bench.study.figures import vocab_sweep_figure

    rows = [{"model": "lstm", "tokenizer": t, "match": m, "test_bits_per_char": b, "test_token_perplexity": p,
             "flags": ""} for t, m, b, p in [("byte", "chars", 3.0, 8.0), ("bpe:512", "chars", 2.6, 40.0),
                                             ("byte", "tokens", 3.2, 9.0), ("bpe:512", "tokens", 2.4, 35.0)]]
    fig = vocab_sweep_figure(pd.DataFrame(rows))
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}
    assert lines == {"lstm bpe (equal chars)": [3.0, 2.6], "lstm bpe (equal tokens)": [3.2, 2.4]}
