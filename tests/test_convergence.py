"""Convergence diagnostics: the gain over the last doubling of training characters, and ranking crossovers."""

import math

import pytest

from bench.study.stats.convergence import IMPROVING, crossovers, last_doubling, trend_cell


def log(*points):
    return [{"step": i, "train_chars": c, "valid_bits_per_byte": v} for i, (c, v) in enumerate(points)] + [
        {"step": 99, "train_loss": 1.0}]  # training records carry no validation


def test_the_gain_is_read_at_half_the_final_characters_in_log_space():
    trend = last_doubling(log((1e6, 2.0), (2e6, 1.8), (4e6, 1.7)))
    assert trend.half_chars == 2e6 and trend.gain == pytest.approx(0.1) and trend.label == "still improving"
    # Between validations the curve is linear in log characters: half of 6e6 is 3e6, between 2e6 and 4e6.
    between = last_doubling(log((2e6, 1.8), (4e6, 1.7), (6e6, 1.69)))
    expected = 1.8 + (1.7 - 1.8) * math.log(3e6 / 2e6) / math.log(4e6 / 2e6) - 1.69
    assert between.gain == pytest.approx(expected)


def test_a_flat_curve_is_converged_and_a_short_one_cannot_tell():
    flat = last_doubling(log((1e6, 1.5), (2e6, 1.5 - IMPROVING / 2)))
    assert flat.label == "converged" and trend_cell([flat, flat]).endswith("(converged)")
    assert last_doubling(log((3e6, 1.6), (4e6, 1.5))) is None  # no validation at or before 2e6
    assert last_doubling(log((4e6, 1.5))) is None
    assert trend_cell([None]) == "too few validations"
    improving = last_doubling(log((1e6, 2.0), (2e6, 1.5)))
    assert trend_cell([flat, improving]).endswith("(still improving)")  # one seed still improving is enough


def test_crossovers_are_where_the_ranking_changes():
    a = [(1e6, 2.0), (1e8, 1.0)]
    b = [(1e6, 1.5), (1e8, 1.5)]  # a passes b where 2 - log10(x / 1e6) / 2 = 1.5: at x = 1e7
    changes = crossovers({"a": a, "b": b})
    assert len(changes) == 1 and changes[0] == pytest.approx(1e7, rel=0.1)
    assert crossovers({"a": a, "c": [(1e6, 3.0), (1e8, 2.5)]}) == []  # c is always worse
    assert crossovers({"a": a}) == [] and crossovers({"a": a, "far": [(1e9, 1.0), (1e10, 0.9)]}) == []
