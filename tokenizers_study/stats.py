"""How a scheme cuts a text: tokens per byte, character and word, unknown and
fallback rates, losslessness, and encoding throughput."""

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
    unk_rate: float  # share of tokens that are <unk>
    fallback_rate: float  # share of tokens that are byte fallback (or <oov> spelling)
    lossless: bool
    lost_words: int
    lost_bytes: int
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

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    stats = SchemeStats(
        scheme=tokenizer.spec.name,
        split=split,
        vocab_size=tokenizer.vocab_size,
        tokens=n,
        n_bytes=counts["n_bytes"],
        n_chars=counts["n_chars"],
        n_words=counts["n_words"],
        tokens_per_byte=ratio(n, counts["n_bytes"]),
        tokens_per_char=ratio(n, counts["n_chars"]),
        tokens_per_word=ratio(n, counts["n_words"]),
        unk_rate=ratio(unk, n),
        fallback_rate=ratio(fallback, n),
        lossless=loss.lossless,
        lost_words=loss.lost_words,
        lost_bytes=loss.lost_bytes,
        mb_per_s=counts["n_bytes"] / 1e6 / seconds,
        tokenizer_hash=tokenizer.hash,
    )
    return stats, ids
