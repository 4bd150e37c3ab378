"""``byte``: the UTF-8 bytes of the text; ids 0-255 are bytes, 256 is ``<bos>``."""

from __future__ import annotations

import numpy as np

from tokenizers_study.base import SchemeSpec, Tokenizer
from tokenizers_study.bpe import BPETokenizer
from tokenizers_study.text import decode_bytes, text_bytes


class ByteTokenizer(Tokenizer):
    family = "byte"
    title = "bytes"
    min_size = None
    lossless_scheme = True
    sort_rank = 0
    swept = False
    pretrained = False

    @classmethod
    def sweep_point(cls, spec: SchemeSpec) -> tuple[str, int]:
        return BPETokenizer.family, 256  # bytes are byte-level BPE with no merges

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "ByteTokenizer":
        return cls(spec)  # nothing to learn

    def state(self) -> dict:
        return {}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "ByteTokenizer":
        return cls(spec)

    @property
    def vocab_size(self) -> int:
        return 257

    @property
    def bos_id(self) -> int:
        return 256

    def byte_id(self, value: int) -> int:
        return value

    def fallback_ids(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)  # bytes are the vocabulary, not a fallback

    def _id_byte_lengths(self) -> np.ndarray:
        return np.array([1] * 256 + [0], dtype=np.int32)

    def _encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text_bytes(text), dtype=np.uint8)

    def decode(self, ids) -> str:
        ids = np.asarray(ids)
        return decode_bytes(ids[ids < 256].astype(np.uint8).tobytes())
