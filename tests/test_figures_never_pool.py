"""Every figure of the report draws each text and matching rule on its own axes: nothing is averaged, ranked or
drawn across datasets or matching rules.

The study below has two datasets and two rules. Every number plotted for group g (0..3) lies in [10 g + 1,
10 g + 9], so the tens digit of any value on an axes says which group it came from: an axes showing two tens
digits mixes groups.
"""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from bench.study.report import convergence_figure

from bench.study.report import figures

GROUPS = [("enwik8", "chars"), ("enwik8", "tokens"), ("wikitext-2", "chars"), ("wikitext-2", "tokens")]
TOKENIZERS = ["byte", "bpe:1024", "bpe:4096", "word-open:2048", "word:2048"]


def _study() -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    rows, logs = [], {}
    for g, (dataset, match) in enumerate(GROUPS):
        for model in ("lstm", "sha-rnn"):
            for t, tokenizer in enumerate(TOKENIZERS):
                for seed in (0, 1):
                    run_dir = f"{model}-{tokenizer}-{dataset}-{match}-s{seed}"
                    base = 10 * g + 1 + 0.5 * t + 0.1 * seed  # within [10 g + 1, 10 g + 4]
                    rows.append(dict(model=model, tokenizer=tokenizer, dataset=dataset, match=match, seed=seed,
                                     flags="", run_dir=run_dir, lossless_bool=not tokenizer.startswith("word:"),
                                     test_bits_per_char=base, test_bits_per_byte=base + 0.05,
                                     test_token_perplexity=base + 2, test_word_perplexity=base + 4, test_n_chars=100,
                                     test_n_bytes=102, test_n_words=20))
                    logs[run_dir] = [dict(step=k, train_chars=1000 * 2 ** k, train_flops=1e9 * 2 ** k,
                                          valid_bits_per_char=base + 4 - k, valid_bits_per_byte=base + 4.5 - k)
                                     for k in range(4)]
    return pd.DataFrame(rows), logs


def _groups_on(ax) -> set[int]:
    """The groups (tens digits) of the data values drawn on an axes: lines, markers and bars."""
    values = []
    for line in ax.get_lines():
        ys = list(line.get_ydata())
        if ys != [0, 1]:  # axvline: axes coordinates, not data
            values += ys
    for collection in ax.collections:
        if isinstance(collection, PathCollection):  # markers
            values += [y for _, y in collection.get_offsets()]
        else:  # error bars and interval bands: their vertices
            values += [y for path in collection.get_paths() for _, y in path.vertices]
    values += [patch.get_height() for patch in ax.patches]
    return {int(v // 10) for v in values}


def _assert_one_group_per_axes(fig, expected_axes: int) -> None:
    drawn = [ax for ax in fig.axes if ax.get_lines() or ax.collections or ax.patches]
    assert len(drawn) == expected_axes
    for ax in drawn:
        assert len(_groups_on(ax)) == 1, f"axes {ax.get_title()!r} mixes groups {_groups_on(ax)}"
    titles = [ax.get_title() for ax in drawn]
    for dataset, match in GROUPS:  # each panel names the text and the rule it shows
        assert any(f"{dataset}, matched on {match}" in title for title in titles)


def test_vocabulary_sweep():
    done, _ = _study()
    _assert_one_group_per_axes(figures.vocab_sweep_figure(done), 2 * len(GROUPS))


def test_closed_vocabulary():
    done, _ = _study()
    unk = {d: {"unk_nll_share": 0.2} for d in done.loc[~done["lossless_bool"], "run_dir"]}
    _assert_one_group_per_axes(figures.closed_vocabulary_figure(done, unk), len(GROUPS))


@pytest.mark.parametrize("draw", [figures.learning_curves_figure, figures.compute_figure])
def test_learning_and_compute_curves(draw):
    done, logs = _study()
    curves = [(dict(r), logs[r["run_dir"]]) for _, r in done.iterrows()]
    _assert_one_group_per_axes(draw(curves), len(GROUPS))


def test_ranking_against_the_budget():
    done, logs = _study()
    fig = convergence_figure.ranking_figure(done, logs)
    _assert_one_group_per_axes(fig, 2 * 2 * len(GROUPS))  # characters and FLOPs, per model and group


def test_teacher_forcing():
    profiles = {key: {("lstm", t): {"pieces": [{"pieces": 1, "first_piece_share": 10 * g + 1.5}],
                                    "positions": [{"position": p, "mean_bits": 10 * g + p} for p in (1, 2)]}
                      for t in ("byte", "bpe:1024")}
                for g, key in enumerate(GROUPS)}
    fig = figures.teacher_forcing_figure(profiles)
    for ax in fig.axes:  # the share axis is clipped to [0, 1.05]; the data still say where each line came from
        assert len(_groups_on(ax)) == 1
    assert len(fig.axes) == 2 * len(GROUPS)


def test_the_teacher_forcing_caption_is_computed_from_the_profiles():
    from bench.study.stats.analysis import teacher_forcing_sentence

    profile = {"pieces": [{"pieces": 1, "words": 50, "first_piece_share": 1.0},
                          {"pieces": 2, "words": 30, "first_piece_share": 0.6},
                          {"pieces": 3, "words": 10, "first_piece_share": 0.4}],
               "positions": [{"position": 1, "pieces": 90, "mean_bits": 8.0},
                             {"position": 2, "pieces": 40, "mean_bits": 9.5}, {"position": 3, "pieces": 10,
                                                                               "mean_bits": 4.5}]}
    sentence = teacher_forcing_sentence({("wt2", "chars"): {("lstm", "bpe:1024"): profile}})
    assert "carries 55-55%" in sentence and "costs 8.50-8.50 bits" in sentence  # (30 x 0.6 + 10 x 0.4) / 40
    assert "nearly free" not in sentence and teacher_forcing_sentence({}) == ""


def test_a_figure_without_data_is_no_figure():
    """No large blank placeholder: a figure with nothing to draw raises NoData, and the report says why."""
    done, logs = _study()
    one_rule = done[(done["match"] == "chars") & (done["dataset"] == "enwik8")]
    two_sizes = one_rule[one_rule["tokenizer"].isin(["byte", "bpe:1024"])]  # a line through two points: no trend
    for draw in (lambda: figures.vocab_sweep_figure(one_rule[one_rule["tokenizer"] == "byte"]),
                 lambda: figures.vocab_sweep_figure(two_sizes),
                 lambda: figures.teacher_forcing_figure({}),
                 lambda: figures.closed_vocabulary_figure(one_rule[one_rule["lossless_bool"]], {}),
                 lambda: figures.learning_curves_figure([(dict(r), []) for _, r in one_rule.iterrows()]),
                 lambda: figures.matching_figure(one_rule)):
        with pytest.raises(figures.NoData):
            draw()
