"""Does a tokenizer's intrinsic measure (tokenizers_study.stats.INTRINSIC: compression, Rényi efficiency, ...)
rank tokenizations as the models trained on them do?

For one model on one text, each lossless tokenization is a cell with a measure (computed on the train split) and
its seeds' test bits per byte. The rank correlation (Spearman) between the measure and the cells' seed means is
the point estimate. Its interval is a two-level bootstrap: the cells are resampled (a study's tokenizations are a
few of the many one could try), then each drawn cell's seeds (the trained models: the unit of replication), so it
carries both the seed-to-seed spread of the models and how few tokenizations the correlation rests on. A measure
that orders the cells exactly as their means gives rho = 1 only when no seed of a cell crosses another's; with one
seed in a cell there is no spread to carry, and no interval. (scipy.stats.bootstrap resamples flat samples, not
cells and then the seeds inside them.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata, spearmanr

from bench.study.stats.uncertainty import CONFIDENCE, RESAMPLES, SEED

MIN_TOKENIZATIONS = 3  # a rank correlation over fewer cells says nothing


@dataclass(frozen=True)
class RankCorrelation:
    rho: float  # Spearman's rank correlation of the measure with the cells' mean test bits per byte
    low: float | None  # its 95% interval over tokenizations and seeds (None: a cell has one seed)
    high: float | None
    tokenizations: int  # the cells it rests on

    def cell(self) -> str:
        interval = "" if self.low is None else f" [{self.low:.2f}, {self.high:.2f}]"
        return f"{self.rho:+.2f}{interval}"


def rank_correlation(measure: dict[str, float], bits_per_byte: dict[str, list[float]]) -> RankCorrelation | None:
    """Spearman's rho between ``measure`` (tokenization -> value) and the mean of ``bits_per_byte``
    (tokenization -> its seeds' test bits per byte) over the tokenizations both know; None with fewer than
    :data:`MIN_TOKENIZATIONS` of them, or when the measure or the means do not vary."""
    cells = [t for t in measure if t in bits_per_byte and bits_per_byte[t] and math.isfinite(measure[t])]
    if len(cells) < MIN_TOKENIZATIONS:
        return None
    x = np.array([measure[t] for t in cells], dtype=float)
    seeds = [np.asarray(bits_per_byte[t], dtype=float) for t in cells]
    means = np.array([s.mean() for s in seeds])
    if np.ptp(x) == 0 or np.ptp(means) == 0:
        return None
    rho = float(spearmanr(x, means).statistic)
    if min(len(s) for s in seeds) < 2:
        return RankCorrelation(rho, None, None, len(cells))
    rhos = _two_level_rhos(x, seeds, np.random.default_rng(SEED))
    low, high = np.nanpercentile(rhos, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return RankCorrelation(rho, float(low), float(high), len(cells))


def _two_level_rhos(x: np.ndarray, seeds: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Spearman's rho of RESAMPLES draws: each cell's seeds with replacement (its mean), then the cells with
    replacement;
    NaN for a draw whose measure or means do not vary (one cell drawn every time)."""
    k, most = len(seeds), max(len(s) for s in seeds)
    padded = np.array([np.pad(s, (0, most - len(s))) for s in seeds])
    counts = np.array([len(s) for s in seeds])
    picks = (rng.random((RESAMPLES, k, most)) * counts[:, None]).astype(int)
    used = np.arange(most) < counts[:, None]  # a cell's mean is over its own number of seeds
    means = np.where(used, np.take_along_axis(padded[None], picks, axis=-1), 0.0).sum(-1) / counts
    cells = rng.integers(0, k, size=(RESAMPLES, k))  # a cell drawn twice keeps its one mean of the draw
    means = np.take_along_axis(means, cells, axis=-1)
    return _pearson(rankdata(x[cells], axis=-1), rankdata(means, axis=-1))


def _pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of ``a`` with the same row of ``b`` (on ranks: Spearman's rho); NaN for a row of
    ties."""
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean(axis=-1, keepdims=True)
    norm = np.sqrt((a ** 2).sum(axis=-1) * (b ** 2).sum(axis=-1))
    return np.divide((a * b).sum(axis=-1), norm, out=np.full(a.shape[:-1], np.nan), where=norm > 0)
