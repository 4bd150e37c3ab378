"""Uncertainty that means what it says: documents as the unit of text, seeds as the unit of replication, Holm."""

import numpy as np
import pytest

from bench.data.documents import document_starts, document_totals
from bench.study.stats.uncertainty import TextLosses, compare, document_interval, holm, seed_interval


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
    assert result.test == "Welch t, 4 and 4 unpaired seeds" and "documents" in result.interval
    text_only = compare({0: a[0].bits_per_byte}, {0: b[0].bits_per_byte}, {0: a[0]}, {0: b[0]})
    assert result.high - result.low > text_only.high - text_only.low  # seed noise widens it
    shifted = _runs(rng, sizes, 1.50, 0.05, range(4))
    far = compare({s: r.bits_per_byte for s, r in a.items()}, {s: r.bits_per_byte for s, r in shifted.items()},
                  a, shifted)
    assert far.p_value < 0.05 and far.high < 0


def test_without_document_losses_the_comparison_is_welchs_t_test():
    from scipy import stats

    a, b = {0: 1.0, 1: 1.1, 2: 1.05}, {7: 1.3, 8: 1.25}
    result = compare(a, b)
    welch = stats.ttest_ind(list(a.values()), list(b.values()), equal_var=False)
    assert result.test == "Welch t, 3 and 2 unpaired seeds" and result.interval.startswith("Welch t over seeds")
    assert result.p_value == pytest.approx(welch.pvalue, rel=1e-12)
    interval = welch.confidence_interval(0.95)
    assert (result.low, result.high) == pytest.approx((interval.low, interval.high), rel=1e-12)


# The audit's second finding: seeds were paired by index across tokenizations although nothing links them (over
# the 6 pairings of 3 seeds, p moved from 0.0089 to 0.0258). Relabelling one side's seeds must change nothing.
def test_seed_labels_pair_nothing():
    from itertools import permutations

    rng = np.random.default_rng(6)
    sizes = rng.integers(1000, 20000, size=40).astype(float)
    a, b = _runs(rng, sizes, 1.20, 0.03, range(3)), _runs(rng, sizes, 1.26, 0.03, range(3))
    results = set()
    for order in permutations(range(3)):
        relabelled = {new: b[old] for new, old in zip(order, range(3))}
        result = compare({s: r.bits_per_byte for s, r in a.items()},
                         {s: r.bits_per_byte for s, r in relabelled.items()}, a, relabelled)
        results.add((round(result.p_value, 12), round(result.low, 12), round(result.high, 12)))
    assert len(results) == 1


# The audit's two findings: a percentile bootstrap over 3 seeds was narrower than the t interval ([0.464, 0.768]
# against [0.298, 0.950]) and, over 2 vs 2 seeds, excluded 0 beside a Welch p of 0.093.
def test_the_interval_is_as_wide_as_the_t_interval_over_seeds():
    from scipy import stats

    rng = np.random.default_rng(5)
    sizes = rng.integers(1000, 20000, size=60).astype(float)

    def with_text(values):  # runs whose documents scatter around each seed's bits per byte
        runs = {s: TextLosses(sizes * (v + rng.normal(0, 0.05, len(sizes))), sizes) for s, v in enumerate(values)}
        return {s: r.bits_per_byte for s, r in runs.items()}, runs

    for a_values, b_values in (([3.10, 3.02, 3.25], [2.45, 2.48, 2.38]), ([2.90, 3.30], [2.20, 2.35])):
        (a, text_a), (b, text_b) = with_text(a_values), with_text(b_values)
        result = compare(a, b, text_a, text_b)
        welch = stats.ttest_ind(list(a.values()), list(b.values()), equal_var=False)
        t_interval = welch.confidence_interval(0.95)
        assert result.high - result.low >= 0.95 * (t_interval.high - t_interval.low)  # the bootstrap's was 0.47x
        assert (result.low > 0) == (result.p_value < 0.05)


@pytest.mark.parametrize("seeds_a,seeds_b,level_b,text", [(2, 2, 1.2, True), (3, 3, 1.23, True), (2, 3, 1.25, False),
                                                          (5, 4, 1.21, True), (3, 2, 1.19, True)])
def test_the_interval_excludes_zero_exactly_when_p_is_below_five_percent(seeds_a, seeds_b, level_b, text):
    for trial in range(20):
        rng = np.random.default_rng(100 + trial)
        sizes = rng.integers(1000, 20000, size=40).astype(float)
        a, b = _runs(rng, sizes, 1.20, 0.02, range(seeds_a)), _runs(rng, sizes, level_b, 0.02, range(seeds_b))
        result = compare({s: r.bits_per_byte for s, r in a.items()}, {s: r.bits_per_byte for s, r in b.items()},
                         a if text else None, b if text else None)
        assert (result.low > 0 or result.high < 0) == (result.p_value < 0.05)


@pytest.mark.slow
@pytest.mark.parametrize("seeds,n_docs,gap_sd", [(2, 40, 0.03), (3, 40, 0.03), (5, 40, 0.03), (3, 6, 0.10)])
def test_the_95_percent_interval_covers_the_truth_95_percent_of_the_time(seeds, n_docs, gap_sd):
    """Seed effects and document effects drawn from known distributions, 500 studies: the interval of the
    difference covers the true difference (of the populations of seeds and documents) in 92-98% of them. With 6
    documents the text's standard error is itself uncertain: counted as known it covered 88%."""
    rng = np.random.default_rng(seeds * 100 + n_docs)
    truth, covered = -0.03, 0
    for _ in range(500):
        sizes = rng.integers(2000, 20000, size=n_docs).astype(float)
        shared = rng.normal(0, 0.10, n_docs)  # how hard each document is, for both tokenizations
        gap = rng.normal(0, gap_sd, n_docs)  # how much harder it is for A than for B: mean 0 over documents
        a = {s: TextLosses(sizes * (1.20 + shared + gap + rng.normal(0, 0.02)), sizes) for s in range(seeds)}
        b = {s: TextLosses(sizes * (1.23 + shared + rng.normal(0, 0.02)), sizes) for s in range(seeds)}
        result = compare({s: r.bits_per_byte for s, r in a.items()}, {s: r.bits_per_byte for s, r in b.items()}, a, b)
        covered += result.low <= truth <= result.high
    assert 0.92 <= covered / 500 <= 0.98, covered / 500


def test_seeds_needed_for_a_difference():
    from bench.study.stats.uncertainty import seeds_needed

    # the normal approximation 2 (1.96 + 0.84)^2 (sd / effect)^2 = 15.7 for sd = effect: t needs a little more
    assert seeds_needed(seed_sd=0.01, effect=0.01) == 17
    assert seeds_needed(seed_sd=0.001, effect=0.01) == 2
    assert seeds_needed(seed_sd=0.05, effect=0.01) > 300 and seeds_needed(seed_sd=1.0, effect=0.01) is None


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

    from bench.study.report.figures import FigureStyle, vocab_sweep_figure

    rows = [{"model": "lstm", "tokenizer": t, "match": m, "dataset": "wikitext-2", "test_bits_per_char": b,
             "test_token_perplexity": p, "flags": ""}
            for t, m, b, p in [("byte", "chars", 3.0, 8.0), ("bpe:512", "chars", 2.6, 40.0),
                               ("bpe:1024", "chars", 2.5, 60.0), ("byte", "tokens", 3.2, 9.0),
                               ("bpe:512", "tokens", 2.4, 35.0), ("bpe:1024", "tokens", 2.3, 50.0)]]
    done = pd.DataFrame(rows)
    fig = vocab_sweep_figure(done, FigureStyle.of(done["tokenizer"], "char"))
    lines = [{line.get_label(): list(line.get_ydata()) for line in ax.get_lines()} for ax in fig.axes[::2]]
    assert lines == [{"lstm bpe": [3.0, 2.6, 2.5]}, {"lstm bpe": [3.2, 2.4, 2.3]}]  # a row of panels per rule
    assert "matched on chars" in fig.axes[0].get_title() and "matched on tokens" in fig.axes[2].get_title()


def test_the_power_line_pools_the_seed_spread_of_each_cell():
    import pandas as pd

    from bench.study.report.report_tables import power_line

    rows = [("lstm", "byte", s, v) for s, v in enumerate([1.80, 1.82, 1.81])]
    rows += [("lstm", "bpe:1024", s, v) for s, v in enumerate([1.70, 1.73, 1.71])]
    rows += [("sha-rnn", "byte", 0, 1.9)]  # one seed: no spread
    done = pd.DataFrame(rows, columns=["model", "tokenizer", "seed", "test_bits_per_byte"]).assign(
        match="chars", phase="", lossless_bool=True)
    line = power_line(done, ["model", "tokenizer", "seed", "match"])
    pooled = ((0.01 ** 2 * 2 + np.var([1.70, 1.73, 1.71], ddof=1) * 2) / 4) ** 0.5
    assert "pooled over the 2 cell(s)" in line and f"{pooled:.4f}" in line and "seeds per tokenization" in line
    assert power_line(done[done["model"] == "sha-rnn"], ["model", "tokenizer", "seed", "match"]) is None


def test_perplexities_over_seeds_are_the_perplexity_of_the_mean_loss():
    import pandas as pd

    from bench.study.report.report_tables import main_table

    class Run:
        log = []

        def text_losses(self):
            return None

    values = [213_416.0, 900.0, 454_098.0]  # spread like the audit's: an arithmetic t interval went below zero
    done = pd.DataFrame({"model": "lstm", "tokenizer": "byte", "dataset": "d", "match": "chars", "phase": "",
                         "seed": [0, 1, 2], "run_dir": ["a", "b", "c"], "flags": "", "test_bits_per_byte": 3.0,
                         "test_bits_per_char": 3.0, "test_word_perplexity": values,
                         "test_word_perplexity_eos": values, "test_token_perplexity": 8.0})
    row = main_table(done, ["model", "tokenizer", "dataset", "seed", "match"], {}, {d: Run() for d in "abc"})[0]
    geometric = float(np.exp(np.mean(np.log(values))))
    assert row["_test_word_perplexity"] == pytest.approx(geometric)
    text = row["word ppl"]
    assert text.startswith(f"{geometric:,.1f} [") and "-" not in text and "±" not in text
    assert row["token ppl"] == "8.0000 [8.0000, 8.0000]"  # no spread over seeds


def test_edges_of_the_seed_statistics():
    from scipy import stats

    from bench.study.stats.uncertainty import seeds_needed

    mean, half = seed_interval([1.0, 1.2])  # two seeds already give an interval
    assert mean == pytest.approx(1.1) and half == pytest.approx(stats.t.ppf(0.975, 1) * 0.1)  # sd 0.1414 / sqrt(2)
    assert seed_interval([1, 2])[0] == 1.5 and isinstance(seed_interval([1, 2])[1], float)
    assert seeds_needed(0.0) == 2  # no spread between seeds: the fewest a t-test takes
    assert seeds_needed(0.01) == 17 and seeds_needed(0.02) == 64  # Cohen's d = 1 and 0.5 at the defaults
    assert seeds_needed(0.02, most=64) == 64 and seeds_needed(0.02, most=63) is None
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # 2 x 0.6 capped at 1


def test_the_document_interval_is_reproducible_and_a_percentile_interval():
    rng = np.random.default_rng(3)
    sizes = rng.integers(500, 5_000, size=40).astype(float)
    runs = [TextLosses(sizes * rng.uniform(0.8, 1.6, size=40), sizes) for _ in range(2)]
    first = document_interval(runs)
    assert document_interval(runs) == first  # the same draws every time
    bits = np.stack([r.bits for r in runs])
    draws = np.random.default_rng(0).integers(0, 40, size=(4000, 40))
    resampled = (bits[:, draws].sum(axis=-1) / sizes[draws].sum(axis=-1)).mean(axis=0)
    low, high = np.percentile(resampled, [2.5, 97.5])
    # exactly the 2.5% and 97.5% percentiles of these 4,000 resamples (not 9,999 of them, not BCa)
    assert first == pytest.approx((low, high), rel=1e-12)


@pytest.mark.parametrize("a, b", [([1.10, 1.13, 1.12], [1.20, 1.24, 1.19, 1.22]), ([2.0, 2.5], [1.0, 1.1, 1.05])])
def test_a_seeds_only_comparison_is_welchs_t_test(a, b):
    from scipy import stats

    result = compare(dict(enumerate(a)), dict(enumerate(b)))
    welch = stats.ttest_ind(a, b, equal_var=False)
    interval = welch.confidence_interval(0.95)
    assert result.difference == pytest.approx(np.mean(a) - np.mean(b), abs=1e-12)
    assert result.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    assert (result.low, result.high) == pytest.approx((interval.low, interval.high), rel=1e-9)
    assert result.test == f"Welch t, {len(a)} and {len(b)} unpaired seeds"
    assert result.interval == f"Welch t over seeds (df {welch.df:.1f})"  # no documents named: none used


def test_a_comparison_without_variation_or_with_one_seed():
    same = compare({0: 1.0, 1: 1.0}, {0: 0.5, 1: 0.5})
    assert (same.difference, same.low, same.high, same.p_value) == (0.5, 0.5, 0.5, None)
    one = compare({0: 1.0}, {0: 0.5, 1: 0.6})
    assert (one.low, one.high, one.p_value, one.interval) == (None, None, None, "")  # no test from one model


def test_losses_stored_as_float32_are_averaged_in_double_precision():
    values = np.random.default_rng(0).normal(1.2, 0.05, 5).astype(np.float32)  # as a saved array may hold them
    assert seed_interval(values) == seed_interval([float(v) for v in values])


def test_seeds_needed_for_a_two_sided_test_up_to_the_most_asked():
    from bench.study.stats.uncertainty import seeds_needed

    # two-sided: a difference in either direction needs the same seeds
    assert seeds_needed(0.01, effect=-0.01) == seeds_needed(0.01, effect=0.01) == 17
    # t with 2n - 2 degrees of freedom: Cohen's d = 2 reaches power 0.79 with 5 seeds, 0.88 with 6; d = 1.25
    # 0.796 with 11, 0.83 with 12
    assert seeds_needed(0.005) == 6 and seeds_needed(0.008) == 12
    # a spread that needs 1,001 seeds is beyond the default 1,000
    assert seeds_needed(0.0798) is None and seeds_needed(0.0798, most=1001) == 1001
    # the power asked is a floor, reached exactly: certainty where seeds hardly vary needs the fewest
    assert seeds_needed(1e-9, power=1.0) == 2


def _two_setups(n_docs=30):
    """Three seeds of A and four of B on the same 30 documents, and each side's bits per byte by seed."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1000, 5000, n_docs).astype(float)
    text_a = {s: TextLosses(sizes * (1.20 + rng.normal(0, 0.02) + rng.normal(0, 0.05, n_docs)), sizes)
              for s in range(3)}
    text_b = {s: TextLosses(sizes * (1.25 + rng.normal(0, 0.02) + rng.normal(0, 0.05, n_docs)), sizes)
              for s in range(4)}
    return ({s: r.bits_per_byte for s, r in text_a.items()}, {s: r.bits_per_byte for s, r in text_b.items()},
            text_a, text_b, sizes)


def _resampled_differences(text_a, text_b, sizes):
    """The difference of the seed means in bits per byte over the bootstrap's 4,000 resamples of the documents (the
    same draws for both sides, from seed 0)."""
    n = len(sizes)
    draws = np.random.default_rng(0).integers(0, n, size=(4000, n))
    bits_a, bits_b = np.stack([r.bits for r in text_a.values()]), np.stack([r.bits for r in text_b.values()])
    total = sizes[draws].sum(axis=-1)
    return bits_a[:, draws].sum(axis=-1).mean(axis=0) / total - bits_b[:, draws].sum(axis=-1).mean(axis=0) / total


def test_with_documents_the_text_is_a_third_term_of_welchs_test():
    from scipy import stats

    a, b, text_a, text_b, sizes = _two_setups()
    result = compare(a, b, text_a, text_b)
    n = len(sizes)
    # the text's variance: the bootstrap's, which is the plug-in one (low by (n - 1) / n), undone
    terms = [np.var(list(a.values()), ddof=1) / 3, np.var(list(b.values()), ddof=1) / 4,
             np.var(_resampled_differences(text_a, text_b, sizes), ddof=1) * n / (n - 1)]
    se = sum(terms) ** 0.5
    df = sum(terms) ** 2 / (terms[0] ** 2 / 2 + terms[1] ** 2 / 3 + terms[2] ** 2 / (n - 1))  # Welch-Satterthwaite
    difference = np.mean(list(a.values())) - np.mean(list(b.values()))
    half = stats.t.ppf(0.975, df) * se
    assert result.difference == pytest.approx(difference, rel=1e-12)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(difference) / se, df), rel=1e-9)
    assert (result.low, result.high) == pytest.approx((difference - half, difference + half), rel=1e-9)
    assert result.interval == f"Welch t over seeds (df {df:.1f}) + documents (bootstrap SE)"
    assert result.test == "Welch t, 3 and 4 unpaired seeds"


def test_with_one_seed_a_side_the_interval_is_the_documents_percentile_interval():
    a, b, text_a, text_b, sizes = _two_setups()
    result = compare({0: a[0]}, {0: b[0]}, {0: text_a[0]}, {0: text_b[0]})
    low, high = np.percentile(_resampled_differences({0: text_a[0]}, {0: text_b[0]}, sizes), [2.5, 97.5])
    assert (result.low, result.high) == pytest.approx((low, high), rel=1e-12)
    assert (result.interval, result.p_value, result.test) == ("bootstrap over documents (text only)", None, "")


def test_document_losses_of_one_side_only_or_without_every_seed_are_not_used():
    a, b, text_a, text_b, _ = _two_setups()
    seeds_only = compare(a, b)
    assert compare(a, b, text_a, None) == seeds_only and compare(a, b, None, text_b) == seeds_only
    assert compare(a, b, {s: text_a[s] for s in (0, 1)}, text_b) == seeds_only  # seed 2's losses not dumped
    assert compare(a, b, text_a, {s: text_b[s] for s in (0, 1, 2)}) == seeds_only
    # losses of more seeds than compared: those of the seeds compared are used
    assert compare({0: a[0], 1: a[1]}, b, text_a, text_b) == compare({0: a[0], 1: a[1]}, b, {0: text_a[0],
                                                                                          1: text_a[1]}, text_b)
    assert "documents" in compare({0: a[0], 1: a[1]}, b, text_a, text_b).interval


def test_what_a_comparison_without_a_test_says():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no variation: no degrees of freedom computed from 0 / 0 (a RuntimeWarning)
        same = compare({0: 1.0, 1: 1.0}, {0: 0.5, 1: 0.5})
    assert (same.interval, same.test) == ("no variation over seeds or text", "")
    one = compare({0: 1.0}, {0: 0.5, 1: 0.6})
    assert (one.difference, one.interval, one.test) == (pytest.approx(0.45), "", "")  # the difference all the same


def test_a_runs_document_losses_are_worked_out_once_for_the_main_table_and_every_pair_it_is_in(monkeypatch, tmp_path):
    from bench.study.matrix.finished_run import FinishedRun

    worked_out = []
    monkeypatch.setattr(FinishedRun, "_document_losses", lambda self, split: worked_out.append(split) or split)
    run = FinishedRun({}, None, tmp_path)
    assert [run.text_losses() for _ in range(3)] + [run.text_losses("valid")] == ["test"] * 3 + ["valid"]
    assert worked_out == ["test", "valid"]
