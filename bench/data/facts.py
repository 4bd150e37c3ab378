"""What a run needs to know about its data, computed in one place.

:func:`data_facts` reads an encoded corpus once and returns its :class:`DataFacts`:
the vocabulary size, the train split's characters and tokens (so characters per
token, which turns character budgets and contexts into tokens), and the identity
of the data (the tokenizer's hash, each split file's sha256), which is part of
every run id. ``bench train``, the matrix planner, ``bench models describe`` and
``bench speed`` all resolve runs from these facts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from bench.data.cache import EncodedCorpus, encode_corpus
from bench.errors import BenchError
from tokenizers_study import SchemeSpec


@dataclass(frozen=True)
class DataFacts:
    vocab_size: int
    corpus: Optional[str] = None
    scheme: Optional[str] = None
    tokenizer_hash: Optional[str] = None
    train_chars: Optional[int] = None
    train_tokens: Optional[int] = None
    split_sha256: dict[str, str] = field(default_factory=dict)  # split -> sha256 of its file

    @classmethod
    def vocabulary_only(cls, vocab_size: int) -> "DataFacts":
        """For sizing a model without a corpus: no characters per token, no identity."""
        return cls(vocab_size=vocab_size)

    @property
    def chars_per_token(self) -> float | None:
        """Characters per token on the train split; None without a corpus."""
        if self.train_chars is None or not self.train_tokens:
            return None
        return self.train_chars / self.train_tokens

    def identity(self) -> dict:
        """What the data of a run are: the tokenizer's hash and each split file's sha256."""
        return {"tokenizer": self.tokenizer_hash, **self.split_sha256}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "DataFacts":
        return cls(**data)


def data_facts(encoded: EncodedCorpus) -> DataFacts:
    """The facts of one corpus under one tokenization."""
    from bench.data.measures import measure_split

    train_tokens = len(encoded.ids["train"])
    if train_tokens < 2:
        raise BenchError(f"{encoded.corpus} train split is too short to train on: {encoded.tokenizer.spec.name} "
                         f"encodes its {encoded.splits['train'].size:,} bytes as {train_tokens} token(s) (a tokenizer "
                         f"that maps the text to <unk> is not one for this corpus)")
    train_chars = measure_split(encoded, "train", chars=False).counts["n_chars"]
    return DataFacts(
        vocab_size=encoded.tokenizer.vocab_size, corpus=encoded.corpus, scheme=encoded.tokenizer.spec.name,
        tokenizer_hash=encoded.tokenizer.hash, train_chars=train_chars,
        train_tokens=train_tokens, split_sha256={s: d.sha256 for s, d in encoded.splits.items()},
    )


def load_data_facts(dataset: str, scheme: str | SchemeSpec, data_dir: str | Path | None) -> DataFacts:
    """Encode (through the cache) and measure ``dataset`` under ``scheme``."""
    return data_facts(encode_corpus(dataset, scheme, data_dir))


def facts_for_sizing(vocab_size: int | None, scheme: str | None, dataset: str | None,
                     data_dir: str | Path | None) -> DataFacts:
    """Facts for sizing or timing a model (``bench models describe``, ``bench speed``): from a corpus
    when a scheme and a dataset are given, else a vocabulary size alone (256 by default)."""
    if (scheme is None) != (dataset is None):
        raise BenchError("give --tokenizer and --dataset together (the vocabulary and characters per token "
                         "come from the tokenized corpus), or neither")
    if scheme is None:
        return DataFacts.vocabulary_only(256 if vocab_size is None else vocab_size)
    if vocab_size is not None:
        raise BenchError("--vocab-size conflicts with --tokenizer/--dataset, which set the vocabulary; drop one")
    return load_data_facts(dataset, scheme, data_dir)
