"""Uncertainty that means what it says: the trained model is the unit of replication, the document the unit
of text.

* **Between tokenizations** (A - B, bits per byte of the test text), one method: the difference of the seed
  means; its standard error combines the seed variance of each side (Welch) with the text's, the standard
  error of the same difference when the test documents are resampled (the same documents for both sides:
  a bootstrap); the interval and the p-value both come from Student's t with Welch-Satterthwaite degrees of
  freedom over the three terms (the text's estimated from n documents, with n - 1), so the interval excludes 0
  exactly when p < 0.05. Seeds are not paired: under different vocabularies a seed gives neither the same
  initial weights nor the same data order. With one seed on a side the seed variance cannot be estimated:
  no test, and the interval is the documents' alone (text-sampling uncertainty only).
* **One cell** (a model and tokenization over its seeds): the mean with a Student-t interval over seeds, and
  a bootstrap interval over documents for the text.
* **Many comparisons**: every p-value of a report is adjusted together (Holm).
* **Power**: how many seeds per side a comparison needs to detect a given difference, from the seed variance
  observed (a two-sample t-test, noncentral t).

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

    va, vb = np.array([a[k] for k in sorted(a)]), np.array([b[k] for k in sorted(b)])
    difference = float(va.mean() - vb.mean())
    have_text = text_a is not None and text_b is not None and set(text_a) >= set(a) and set(text_b) >= set(b)
    bits_a = np.stack([text_a[k].bits for k in sorted(a)]) if have_text else None
    bits_b = np.stack([text_b[k].bits for k in sorted(b)]) if have_text else None
    sizes = text_a[min(a)].bytes if have_text else None
    if len(va) < 2 or len(vb) < 2:  # one trained model on a side: no test
        if not have_text:
            return Comparison(difference, None, None, "", None, "")
        low, high, _ = _document_bootstrap(bits_a, bits_b, sizes)
        return Comparison(difference, low, high, "bootstrap over documents (text only)", None, "")
    seed_a, seed_b = va.var(ddof=1) / len(va), vb.var(ddof=1) / len(vb)
    # the bootstrap's variance of a mean over n documents is the plug-in one, low by (n - 1) / n: undone
    text_se = _document_bootstrap(bits_a, bits_b, sizes)[2] * math.sqrt(len(sizes) / (len(sizes) - 1)) \
        if have_text else 0.0
    se = math.sqrt(seed_a + seed_b + text_se ** 2)
    # Welch-Satterthwaite over the three variance terms; the text's is estimated from the documents (n - 1 df)
    spread = seed_a ** 2 / (len(va) - 1) + seed_b ** 2 / (len(vb) - 1)
    spread += text_se ** 4 / (len(sizes) - 1) if have_text else 0.0
    if se == 0:
        return Comparison(difference, difference, difference, "no variation over seeds or text", None, "")
    df = (seed_a + seed_b + text_se ** 2) ** 2 / spread  # spread > 0 where se > 0
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    p_value = float(2 * stats.t.sf(abs(difference) / se, df))
    how = f"Welch t over seeds (df {df:.1f})" + (" + documents (bootstrap SE)" if have_text else "")
    return Comparison(difference, difference - half, difference + half, how, p_value,
                      f"Welch t, {len(va)} and {len(vb)} unpaired seeds")


def _document_bootstrap(bits_a: np.ndarray, bits_b: np.ndarray, sizes: np.ndarray) -> tuple[float, float, float]:
    """The difference of the seed means in bits per byte when the documents are resampled, the same draw for
    both sides (``bits_*``: [seeds, documents]): its 95% percentile interval and its standard error."""
    from scipy import stats

    def difference(index, axis=-1):
        total = sizes[index].sum(axis=-1)
        return bits_a[:, index].sum(axis=-1).mean(axis=0) / total - bits_b[:, index].sum(axis=-1).mean(axis=0) / total

    result = stats.bootstrap((np.arange(len(sizes)),), difference, vectorized=True, n_resamples=RESAMPLES,
                             batch=500, confidence_level=CONFIDENCE, method="percentile",
                             rng=np.random.default_rng(SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high), float(result.standard_error)


def seeds_needed(seed_sd: float, effect: float = 0.01, alpha: float = 0.05, power: float = 0.8,
                 most: int = 1000) -> int | None:
    """Seeds per side for a two-sided two-sample t-test to detect ``effect`` bits per byte with ``power``, given
    the seed standard deviation of one run (None beyond ``most``)."""
    from scipy import stats

    if seed_sd <= 0:
        return 2
    for n in range(2, most + 1):
        df = 2 * n - 2
        shift = effect / (seed_sd * math.sqrt(2 / n))
        critical = stats.t.ppf(1 - alpha / 2, df)
        if stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift) >= power:
            return n
    return None


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values of a family of tests (None: no test, left out)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: dict[int, float] = {}
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return [adjusted.get(i) for i in range(len(p_values))]
