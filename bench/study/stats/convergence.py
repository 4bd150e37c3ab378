"""Convergence: is a run still improving, and does the ranking of tokenizations depend on the budget?

A run's validation curve (bits per byte on the same first characters of valid for
every tokenization, against training characters seen) says how much it gained over
the last doubling of its training characters: the validation value interpolated at
half the final characters (linear in log characters) minus the final one. A gain
above ``IMPROVING`` bits per byte labels the run *still improving*: a difference
between such runs measures how fast each learns at this budget, not the
tokenization's final quality. The figure of them (bench.study.report.convergence_figure) puts each model's
tokenizations on one axis, against characters and against FLOPs, and marks where their ranking changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

IMPROVING = 0.01  # bits per byte gained over the last doubling of training characters


@dataclass(frozen=True)
class Trend:
    gain: float  # validation bits per byte at half the final characters minus the final value
    half_chars: float
    final_chars: float

    @property
    def label(self) -> str:
        return "still improving" if self.gain > IMPROVING else "converged"


def validations(log: list[dict], x: str = "train_chars", y: str = "valid_bits_per_byte") -> list[tuple[float, float]]:
    """(x, validation loss: bits per byte unless ``y`` says) of each validation in a run's log, in order of x."""
    return sorted((float(e[x]), float(e[y])) for e in log if y in e and e.get(x))


def last_doubling(log: list[dict]) -> Trend | None:
    """The gain over the last doubling of training characters; None when no validation came at or before half
    the final characters (the curve does not reach back that far)."""
    points = validations(log)
    if len(points) < 2:
        return None
    final_chars, final = points[-1]
    half = final_chars / 2
    if points[0][0] > half:
        return None
    return Trend(_at(points, half) - final, half, final_chars)


def _at(points: list[tuple[float, float]], x: float) -> float:
    """The curve at ``x``, linear in log x between validations (``x`` within their range)."""
    xs = np.log([p[0] for p in points])
    return float(np.interp(math.log(x), xs, [p[1] for p in points]))


def trend_cell(trends: list[Trend | None]) -> str:
    """What the main table shows: the mean gain over the last doubling and the label (improving if any seed is)."""
    known = [t for t in trends if t is not None]
    if not known:
        return "too few validations"
    label = "still improving" if any(t.label == "still improving" for t in known) else "converged"
    return f"{np.mean([t.gain for t in known]):.3f} ({label})"


def summary(done: pd.DataFrame, logs: dict[str, list[dict]]) -> str:
    trends = [last_doubling(logs[d]) for d in done["run_dir"]]
    improving = sum(t is not None and t.label == "still improving" for t in trends)
    unknown = sum(t is None for t in trends)
    text = (f"Convergence: {improving} of {len(trends)} runs are still improving (validation bits per byte fell by "
            f"more than {IMPROVING} over the last doubling of their training characters)")
    text += f"; {unknown} logged too few validations to tell" if unknown else ""
    if improving:
        text += (". **Differences between runs that are still improving measure how fast each learns at this "
                 "budget, not the tokenization's final quality**; figure 8 shows whether the ranking of "
                 "tokenizations changes with the budget.")
        return text
    return text + "."


def crossovers(curves: dict[str, list[tuple[float, float]]]) -> list[float]:
    """Where the ranking of the curves (name -> (x, value) points) changes, on a shared log grid within the range
    every curve covers: the x of each change."""
    curves = {k: v for k, v in curves.items() if len(v) >= 2}
    if len(curves) < 2:
        return []
    low = max(v[0][0] for v in curves.values())
    high = min(v[-1][0] for v in curves.values())
    if not low < high:
        return []
    grid = np.geomspace(low, high, 64)
    ranks = [tuple(sorted(curves, key=lambda k: _at(curves[k], x))) for x in grid]
    return [float(grid[i]) for i in range(1, len(grid)) if ranks[i] != ranks[i - 1]]


def mean_curve(curves: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The seeds' mean curve on the x values of the first seed within every seed's range."""
    if not curves:
        return []
    low, high = max(c[0][0] for c in curves), min(c[-1][0] for c in curves)
    xs = [x for x, _ in curves[0] if low <= x <= high]
    return [(x, float(np.mean([_at(c, x) for c in curves]))) for x in xs]
