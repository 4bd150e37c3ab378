"""Uncertainty that means what it says: the trained model is the unit of replication, the document the unit
of text.

* **Between tokenizations** (A - B, bits per byte of the test text): with one seed per side there is one
  trained model each, so nothing can be said about training noise: the difference is shown with a paired
  bootstrap interval over documents (text-sampling uncertainty only) and no p-value. With two or more seeds
  the p-value comes from a t-test across seeds (paired by seed where the seeds match, Welch's otherwise) and
  the interval from a two-level bootstrap: seeds, then documents.
* **One cell** (a model and tokenization over its seeds): the mean with a Student-t interval over seeds, and
  a bootstrap interval over documents for the text.
* **Many comparisons**: every p-value of a report is adjusted together (Holm).

Bits per byte of a resample are its total bits over its total bytes (documents differ in length).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 0  # bootstrap draws are reproducible


@dataclass
class TextLosses:
    """A run's losses on the documents of a text: bits and bytes per document."""

    bits: np.ndarray
    bytes: np.ndarray

    @property
    def bits_per_byte(self) -> float:
        return float(self.bits.sum() / self.bytes.sum())


@dataclass
class Comparison:
    difference: float  # A - B, bits per byte (mean over seeds)
    low: float | None  # the 95% interval, or None where there is none
    high: float | None
    interval: str  # how the interval was obtained
    p_value: float | None  # None with one seed per side: no test of training noise from one model
    test: str


def seed_interval(values: list[float]) -> tuple[float, float | None]:
    """Mean and the half-width of its Student-t 95% interval over seeds (None with one seed)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()), None
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return float(values.mean()), float(half)


def document_interval(runs: list[TextLosses]) -> tuple[float, float]:
    """95% bootstrap interval over documents of the mean bits per byte of some runs on the same text."""
    from scipy import stats

    bits = np.stack([r.bits for r in runs])  # [seeds, documents]
    sizes = runs[0].bytes

    def mean_bpb(index, axis=-1):
        return (bits[:, index].sum(axis=-1) / sizes[index].sum(axis=-1)).mean(axis=0)

    result = stats.bootstrap((np.arange(len(sizes)),), mean_bpb, vectorized=True, n_resamples=RESAMPLES,
                             confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def compare(a: dict[int, float], b: dict[int, float], text_a: dict[int, TextLosses] | None = None,
            text_b: dict[int, TextLosses] | None = None) -> Comparison:
    """A against B from their test bits per byte by seed, and where dumped, their losses by document."""
    from scipy import stats

    seeds = sorted(set(a) & set(b))
    paired = len(seeds) >= 2
    va = [a[s] for s in seeds] if paired else list(a.values())
    vb = [b[s] for s in seeds] if paired else list(b.values())
    difference = float(np.mean(va) - np.mean(vb))
    have_text = (text_a is not None and text_b is not None and set(text_a) >= (set(seeds) if paired else set(a))
                 and set(text_b) >= (set(seeds) if paired else set(b)))
    if len(va) < 2 or len(vb) < 2:  # one trained model on a side: no test
        if have_text and len(text_a) == len(text_b) == 1:
            low, high = _document_difference(next(iter(text_a.values())), next(iter(text_b.values())))
            return Comparison(difference, low, high, "bootstrap over documents (text only)", None, "")
        return Comparison(difference, None, None, "", None, "")
    test = stats.ttest_rel(va, vb) if paired else stats.ttest_ind(va, vb, equal_var=False)
    name = f"paired t-test over {len(seeds)} seeds" if paired else f"Welch t-test, {len(va)} and {len(vb)} seeds"
    if have_text:
        keys_a, keys_b = (seeds, seeds) if paired else (sorted(text_a), sorted(text_b))
        low, high = _two_level(np.stack([text_a[s].bits for s in keys_a]), np.stack([text_b[s].bits for s in keys_b]),
                               text_a[keys_a[0]].bytes, paired)
        return Comparison(difference, low, high, "bootstrap over seeds, then documents", float(test.pvalue), name)
    interval = test.confidence_interval(CONFIDENCE)
    return Comparison(difference, float(interval.low), float(interval.high), "t over seeds", float(test.pvalue),
                      name)


def _document_difference(a: TextLosses, b: TextLosses) -> tuple[float, float]:
    """Paired bootstrap over documents of the difference in bits per byte of two runs."""
    from scipy import stats

    def difference(bits_a, bits_b, sizes, axis=-1):
        return (bits_a.sum(axis=axis) - bits_b.sum(axis=axis)) / sizes.sum(axis=axis)

    result = stats.bootstrap((a.bits, b.bits, a.bytes), difference, paired=True, vectorized=True,
                             n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method="percentile",
                             rng=np.random.default_rng(SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _two_level(bits_a: np.ndarray, bits_b: np.ndarray, sizes: np.ndarray, paired: bool) -> tuple[float, float]:
    """Percentile interval of the mean difference when seeds and then documents are resampled (scipy's
    bootstrap resamples one level). ``bits_*``: [seeds, documents]; paired seeds share their draw."""
    rng = np.random.default_rng(SEED)
    documents = rng.integers(0, len(sizes), size=(RESAMPLES, len(sizes)))
    seeds_a = rng.integers(0, len(bits_a), size=(RESAMPLES, len(bits_a)))
    seeds_b = seeds_a if paired else rng.integers(0, len(bits_b), size=(RESAMPLES, len(bits_b)))
    total = sizes[documents].sum(axis=1)
    per_seed_a = bits_a[:, documents].sum(axis=2) / total  # [seeds, resamples]
    per_seed_b = bits_b[:, documents].sum(axis=2) / total
    draws = (np.take_along_axis(per_seed_a.T, seeds_a, axis=1).mean(axis=1)
             - np.take_along_axis(per_seed_b.T, seeds_b, axis=1).mean(axis=1))
    tail = (1 - CONFIDENCE) / 2 * 100
    return float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values of a family of tests (None: no test, left out)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: dict[int, float] = {}
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return [adjusted.get(i) for i in range(len(p_values))]
