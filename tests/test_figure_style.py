"""What every figure of a report shares: one colour per tokenization in every figure, seed intervals wherever there
are seeds, one metric chosen by the user, one legend entry per cell, axes in engineering notation."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_rgba

from bench.study.report import convergence_figure

from bench.study.report import figures
from bench.study.report.figure_style import FigureStyle, engineering, plt

TOKENIZERS = ["byte", "bpe:512", "bpe:1024", "word-open:2048", "word:2048"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _runs(seeds=(0, 1)) -> tuple[pd.DataFrame, dict]:
    rows, logs = [], {}
    for model in ("lstm", "sha-rnn"):
        for t, tokenizer in enumerate(TOKENIZERS):
            for seed in seeds:
                run_dir = f"{model}-{tokenizer}-s{seed}"
                bpc = 2.0 + 0.1 * t + 0.05 * seed
                rows.append(dict(model=model, tokenizer=tokenizer, dataset="wt2", match="chars", seed=seed, flags="",
                                 run_dir=run_dir, lossless_bool=not tokenizer.startswith("word:"),
                                 test_bits_per_char=bpc, test_bits_per_byte=bpc * 0.99,
                                 test_token_perplexity=3.0 + 10 * t + seed,
                                 test_word_perplexity=500 + 50 * t + 9 * seed,
                                 test_n_chars=1000, test_n_bytes=1010, test_n_words=200))
                logs[run_dir] = [dict(step=k, train_chars=2e5 * 2 ** k, train_flops=1e11 * 2 ** k,
                                      valid_bits_per_char=bpc + 1 - 0.2 * k, valid_bits_per_byte=bpc + 0.9 - 0.2 * k)
                                 for k in range(4)]
    return pd.DataFrame(rows), logs


def _marker_colours(fig) -> set[tuple]:
    return {tuple(c) for ax in fig.axes for coll in ax.collections if isinstance(coll, PathCollection)
            for c in coll.get_edgecolors()}


def test_a_tokenization_has_one_colour_in_every_figure_of_a_report():
    done, logs = _runs()
    style = FigureStyle.of(done["tokenizer"])
    without_byte = done[done["tokenizer"] != "byte"]  # a figure that lacks a tokenization keeps the others' colours
    attack = figures.attack_figure(without_byte, None, style)
    assert _marker_colours(attack) == {to_rgba(style.colors[t]) for t in TOKENIZERS[1:]}
    curves = figures.learning_curves_figure([(dict(r), logs[r["run_dir"]]) for _, r in without_byte.iterrows()], style)
    assert {to_rgba(line.get_color()) for line in curves.axes[0].get_lines()} == {
        to_rgba(style.colors[t]) for t in TOKENIZERS[1:]}
    ranking = convergence_figure.ranking_figure(without_byte, logs, style)
    drawn = {to_rgba(line.get_color()) for ax in ranking.axes for line in ax.get_lines() if line.get_marker() != "None"}
    assert drawn == {to_rgba(style.colors[t]) for t in TOKENIZERS[1:]}


def test_seed_intervals_are_drawn_where_there_are_seeds_and_only_there():
    for seeds, expected in (((0, 1), True), ((0,), False)):
        done, logs = _runs(seeds)
        style = FigureStyle.of(done["tokenizer"])
        attack = figures.attack_figure(done, None, style)
        assert any(isinstance(c, LineCollection) for ax in attack.axes for c in ax.collections) is expected
        closed = figures.closed_vocabulary_figure(done, {}, style)
        assert any(isinstance(c, LineCollection) for c in closed.axes[0].collections) is expected
        curves = figures.learning_curves_figure([(dict(r), logs[r["run_dir"]]) for _, r in done.iterrows()], style)
        assert any(isinstance(c, LineCollection) for c in curves.axes[0].collections) is expected


def test_one_legend_entry_per_model_and_tokenization_however_many_seeds():
    done, logs = _runs((0, 1, 2))
    fig = figures.learning_curves_figure([(dict(r), logs[r["run_dir"]]) for _, r in done.iterrows()])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == 2 * len(TOKENIZERS) and all("(3 seeds)" in label for label in labels)
    # the seed mean: valid_bits_per_byte of seeds 0, 1, 2 at step 0 is bpc + 0.9 with bpc = 2.0 + 0.05 x seed
    first = fig.axes[0].get_lines()[0]
    assert first.get_ydata()[0] == pytest.approx(2.0 + 0.05 + 0.9)


@pytest.mark.parametrize("metric,label,valid", [("byte", "bits per byte", 2.0 + 0.9),
                                                ("char", "bits per character", 2.0 + 1.0)])
def test_every_figure_draws_the_metric_the_user_chose(metric, label, valid):
    done, logs = _runs((0,))
    style = FigureStyle.of(done["tokenizer"], metric)
    attack = figures.attack_figure(done, None, style)
    assert all(label in ax.get_xlabel() for ax in attack.axes)
    curves = [(dict(r), logs[r["run_dir"]]) for _, r in done.iterrows()]
    for fig in (figures.learning_curves_figure(curves, style), figures.compute_figure(curves, style),
                convergence_figure.ranking_figure(done, logs, style)):
        assert all(ax.get_ylabel() == f"validation {label}" for ax in fig.axes if ax.get_lines())
    first = figures.learning_curves_figure(curves, style).axes[0].get_lines()[0]
    assert first.get_ydata()[0] == pytest.approx(valid)


def test_axes_use_engineering_notation():
    assert [engineering(v) for v in (5e11, 2_000_000, 200_000, 1_500, 20, 0.25)] == [
        "500G", "2M", "200k", "1.5k", "20", "0.25"]
    done, logs = _runs((0,))
    fig = figures.compute_figure([(dict(r), logs[r["run_dir"]]) for _, r in done.iterrows()])
    fig.canvas.draw()
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert ticks and all("," not in t and "e+" not in t for t in ticks) and any(t.endswith("G") for t in ticks)


def test_html_tables_keep_numbers_whole_and_put_intervals_on_their_own_line():
    from bench.study.report.rendering import ReportPage

    doc = ReportPage("t")
    doc.table([{"model": "*gzip -9*", "tokenizer": "word-open:2048", "word ppl": "9,932.6 [6,529.1, 15,110.2]",
                "bits/byte": "2.5491 ± 0.1162", "note": "0.161 (still improving)"}],
              ["model", "tokenizer", "word ppl", "bits/byte", "note"])
    page = doc.html()
    assert '<div class="wide"><table>' in page and "td{white-space:nowrap}" in page
    assert "<td><em>gzip -9</em></td>" in page  # Markdown italics, not literal asterisks
    assert '<td>9,932.6<br><span class="ci">[6,529.1, 15,110.2]</span></td>' in page
    assert "<td>word-open:2048</td>" in page and "<td>2.5491 ± 0.1162</td>" in page
    assert "<td class=text>0.161 (still improving)</td>" in page  # words may wrap


def test_the_matrix_clock_counts_runs_and_estimates_the_time_left(monkeypatch):
    from bench.study.matrix import eta

    now = [100.0]
    monkeypatch.setattr(eta.time, "monotonic", lambda: now[0])
    clock = eta.MatrixClock([1e12, 1e12, 2e12], at_once=2)
    now[0] = 110.0  # 1e12 FLOPs in 10 s: 0.1 TFLOP/s; 3e12 left: 30 s
    line = clock.finished([1e12], trained=[True])
    assert line.startswith("1 finished, 2 running, 0 waiting; about 30 s left (3e+12 planned training FLOPs at the "
                           "100 GFLOP/s")
    assert clock.finished([1e12, 2e12], [True, True]) == "3 finished, 0 running, 0 waiting"


def test_a_run_that_failed_at_once_does_not_count_as_trained_flops(monkeypatch):
    from bench.study.matrix import eta

    now = [100.0]
    monkeypatch.setattr(eta.time, "monotonic", lambda: now[0])
    clock = eta.MatrixClock([1e12, 1e12, 1e12, 1e12], at_once=1)
    assert clock.finished([1e12], trained=[False]) == "1 finished, 1 running, 2 waiting"  # no rate measured yet
    now[0] = 110.0  # one run trained in 10 s: 0.1 TFLOP/s; two runs left: 20 s (not 30, not 0.2 s)
    assert "about 20 s left (2e+12 planned training FLOPs at the 100 GFLOP/s" in clock.finished([1e12], [True])


def test_a_run_resumed_from_its_checkpoint_does_not_count_in_the_rate(monkeypatch, tmp_path, capsys):
    """Resumed, a run trains part of its plan: counted in the rate, it made the time left read far too short."""
    from types import SimpleNamespace

    from bench.study.matrix import eta, execute
    from bench.study.matrix.run_status import Attempt, RunStatus

    now = [100.0]
    monkeypatch.setattr(eta.time, "monotonic", lambda: now[0])
    clock = eta.MatrixClock([1e12] * 3, at_once=1)
    resumed, fresh = (SimpleNamespace(run_dir=tmp_path / name, train_flops=1e12, status=RunStatus.PARTIAL)
                      for name in ("resumed", "fresh"))
    now[0] = 101.0  # the resumed run's last part: 1 s
    execute._report([resumed], [Attempt(str(resumed.run_dir), RunStatus.DONE)], "[1/3]", clock, {id(resumed)})
    assert "left" not in capsys.readouterr().err  # no rate from it
    now[0] = 111.0  # a whole run by 11 s: one run left, 11 s (counted, the resumed run would make it 6 s)
    execute._report([fresh], [Attempt(str(fresh.run_dir), RunStatus.DONE)], "[2/3]", clock, {id(resumed)})
    assert "about 11 s left" in capsys.readouterr().err
