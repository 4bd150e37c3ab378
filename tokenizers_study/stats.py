"""How a scheme cuts a text: tokens per byte, character and word, unknown and
fallback rates, losslessness, encoding throughput, and how evenly the vocabulary is used.
:data:`INTRINSIC` declares the measures a report sets against trained models' bits per byte.

The last two follow Zouhar et al. (2023), "Tokenization and the Noiseless Channel": the
Shannon entropy of the unigram distribution of the tokens, and its Rényi efficiency,
the Rényi entropy of order alpha = 2.5 divided by log |V|, which they found to predict
downstream quality better than compression alone.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from tokenizers_study.base import Tokenizer
from tokenizers_study.text import text_counts


@dataclass
class SchemeStats:
    scheme: str
    split: str
    vocab_size: int
    tokens: int
    n_bytes: int
    n_chars: int
    n_words: int
    tokens_per_byte: float
    tokens_per_char: float
    tokens_per_word: float
    bytes_per_token: float  # compression: how much text a token carries
    chars_per_token: float
    unk_rate: float  # share of tokens that are <unk>
    fallback_rate: float  # share of tokens that are byte fallback (or <oov> spelling)
    lossless: bool
    lost_words: int
    lost_bytes: int
    unigram_entropy_bits: float  # Shannon entropy of the tokens' unigram distribution
    renyi_efficiency: float  # Rényi entropy (alpha 2.5) of that distribution / log2 of the vocabulary size
    unigram_entropy_bits_per_byte: float  # the unigram code's length per byte: entropy x tokens / bytes
    vocab_used: float  # share of the vocabulary's ids that occur in the text
    mb_per_s: float  # encoding throughput, 10^6 bytes of text per second
    verified: bool | None = None  # filled by the caller from the data's provenance
    tokenizer_hash: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def scheme_stats(tokenizer: Tokenizer, text: str, split: str) -> tuple[SchemeStats, np.ndarray]:
    """Encode ``text`` (timed) and describe the result; returns the stats and the ids."""
    start = time.perf_counter()
    ids = tokenizer.encode(text)
    seconds = max(time.perf_counter() - start, 1e-9)
    counts = text_counts(text)
    n = len(ids)
    unk = int(np.count_nonzero(ids == tokenizer.unk_id)) if tokenizer.unk_id is not None else 0
    fallback_ids = tokenizer.fallback_ids()
    fallback = int(np.isin(ids, fallback_ids).sum()) if len(fallback_ids) else 0
    loss = tokenizer.loss_report(text, ids)

    stats = SchemeStats(
        scheme=tokenizer.spec.name,
        split=split,
        vocab_size=tokenizer.vocab_size,
        tokens=n,
        n_bytes=counts["n_bytes"],
        n_chars=counts["n_chars"],
        n_words=counts["n_words"],
        tokens_per_byte=_ratio(n, counts["n_bytes"]),
        tokens_per_char=_ratio(n, counts["n_chars"]),
        unk_rate=_ratio(unk, n),
        fallback_rate=_ratio(fallback, n),
        lossless=loss.lossless,
        lost_words=loss.lost_words,
        lost_bytes=loss.lost_bytes,
        unigram_entropy_bits=unigram_entropy_bits(ids, tokenizer.vocab_size),
        mb_per_s=counts["n_bytes"] / 1e6 / seconds,
        tokenizer_hash=tokenizer.hash,
        **intrinsic_measures(ids, tokenizer.vocab_size, counts),
    )
    return stats, ids


RENYI_ALPHA = 2.5

# The measures of a tokenization that need no trained model (key: its label), each computed by intrinsic_measures
INTRINSIC = {
    "bytes_per_token": "bytes per token",
    "chars_per_token": "characters per token",
    "renyi_efficiency": f"Rényi efficiency (α = {RENYI_ALPHA})",
    "unigram_entropy_bits_per_byte": "unigram code length per byte (bits)",
    "vocab_used": "share of the vocabulary used",
    "tokens_per_word": "tokens per word",
}


def intrinsic_measures(ids: np.ndarray, vocab_size: int, counts: dict) -> dict[str, float]:
    """The INTRINSIC measures of the ids that encode a text of ``counts`` (tokenizers_study.text.text_counts)."""
    n = len(ids)
    entropy = unigram_entropy_bits(ids, vocab_size)
    used = np.count_nonzero(np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size))
    return {"bytes_per_token": _ratio(counts["n_bytes"], n), "chars_per_token": _ratio(counts["n_chars"], n),
            "renyi_efficiency": renyi_efficiency(ids, vocab_size),
            "unigram_entropy_bits_per_byte": _ratio(entropy * n, counts["n_bytes"]),
            "vocab_used": _ratio(int(used), vocab_size), "tokens_per_word": _ratio(n, counts["n_words"])}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def unigram_entropy_bits(ids: np.ndarray, vocab_size: int) -> float:
    """Shannon entropy (bits) of the distribution of the ids."""
    from scipy.stats import entropy

    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size)
    return float(entropy(counts, base=2)) if counts.sum() else float("nan")


def renyi_efficiency(ids: np.ndarray, vocab_size: int, alpha: float = RENYI_ALPHA) -> float:
    """H_alpha(p) / log2 |V|, H_alpha(p) = log2(sum p^alpha) / (1 - alpha): 1 when every token is used equally."""
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size).astype(np.float64)
    if not counts.sum() or vocab_size < 2:
        return float("nan")
    p = counts[counts > 0] / counts.sum()
    return float(np.log2(np.sum(p ** alpha)) / (1.0 - alpha) / np.log2(vocab_size))
