"""The text a run trains and is scored on, and how training walks through it.

:func:`prepare_corpus` opens the encoded corpus of a resolved run, checks that it is
the data the run was resolved with, and counts each split's text (the denominators
of every metric). The train split is laid out as ``batch_size`` parallel streams,
each starting with ``<bos>``, walked in segments of ``bptt`` tokens (truncated BPTT).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.cache import EncodedCorpus, encode_corpus
from bench.data.corpora import SPLITS
from bench.data.facts import DataFacts, data_facts
from bench.data.measures import measure_split
from bench.engine.spec import TrainConfig
from bench.errors import BenchError
from tokenizers_study import SchemeSpec, Tokenizer
from tokenizers_study.text import text_counts


@dataclass
class PreparedCorpus:
    """A corpus under one tokenization with the text counts of each split."""

    encoded: EncodedCorpus
    facts: DataFacts
    counts: dict[str, dict[str, int]]  # per split: n_bytes, n_chars, n_words, n_lines
    lossless: dict[str, bool]  # per scored split: whether the tokenizer gives it back exactly
    train_chars: np.ndarray  # characters of the train text each token covers (what a character budget counts)

    @property
    def tokenizer(self) -> Tokenizer:
        return self.encoded.tokenizer

    def validation_text(self, max_chars: int | None, max_tokens: int | None) -> tuple[np.ndarray, dict[str, int]]:
        """The ids and text counts validation scores: the first ``max_chars`` characters of the valid split,
        extended to the end of their line (the same text whatever the tokenization), or its first ``max_tokens``
        tokens, or all of it."""
        if max_chars is not None:
            text = self.encoded.splits["valid"].read_text()
            end = text.find("\n", max_chars - 1) + 1 or len(text)
            return self.tokenizer.encode(text[:end]), text_counts(text[:end])
        ids = self.encoded.ids["valid"]
        if max_tokens is None or max_tokens >= len(ids):
            counts = self.counts["valid"]
        elif self.lossless.get("valid"):
            counts = text_counts(self.tokenizer.decode(np.asarray(ids[:max_tokens])))
        else:  # a lossy tokenizer cannot give the prefix back: scale the split's counts
            share = max_tokens / len(ids)
            counts = {k: round(v * share) for k, v in self.counts["valid"].items()}
        return np.asarray(ids[:max_tokens]), counts


def prepare_corpus(dataset: str, scheme: SchemeSpec, data_dir: str | Path, expected: DataFacts | None = None
                   ) -> PreparedCorpus:
    """Open and count a corpus; with ``expected``, refuse data other than the run was resolved with."""
    encoded = encode_corpus(dataset, scheme, data_dir, splits=SPLITS)
    facts = data_facts(encoded)
    if expected is not None and facts.identity() != expected.identity():
        raise BenchError(f"the {dataset} data or the {scheme.name} tokenizer changed since this run was planned; "
                         f"plan it again (bench run-matrix CONFIG, or bench train with the same settings)")
    measures = {split: measure_split(encoded, split) for split in SPLITS}  # cached beside the ids
    return PreparedCorpus(encoded, facts, {split: m.counts for split, m in measures.items()},
                          {split: m.lossless for split, m in measures.items() if split != "train"},
                          measures["train"].chars)


def train_rows(ids: np.ndarray, batch_size: int, bos_id: int) -> np.ndarray:
    """The train split as ``batch_size`` contiguous streams, each preceded by ``<bos>``: [B, L + 1]. Laid out
    the same way, per-token values (``bos_id`` 0) line up with the tokens."""
    length = len(ids) // batch_size
    rows = np.empty((batch_size, length + 1), dtype=np.int32)
    rows[:, 0] = bos_id
    rows[:, 1:] = np.asarray(ids[: batch_size * length], dtype=np.int32).reshape(batch_size, length)
    return rows


def next_segment_length(config: TrainConfig, rng: np.random.Generator) -> int:
    """``bptt``, or with ``seq_jitter`` the reference's draw: bptt (halved 5% of the time) plus N(0, 5) noise,
    at least 5 and at most bptt."""
    if not config.seq_jitter:
        return config.bptt
    bptt = config.bptt if rng.random() < 0.95 else config.bptt / 2.0
    return int(min(max(5, int(rng.normal(bptt, 5))), config.bptt))
