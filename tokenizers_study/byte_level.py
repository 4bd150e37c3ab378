"""``byte``: the UTF-8 bytes of the text; ids 0-255 are bytes, 256 is ``<bos>``."""

from __future__ import annotations

import numpy as np

from tokenizers_study.base import BOS, SchemeSpec, Tokenizer
from tokenizers_study.bpe import BPETokenizer, byte_symbols
from tokenizers_study.hf_json import with_bos
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

    def hf_tokenizer_json(self) -> str:
        """Byte-level BPE with no merges: each byte's symbol is its id."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers

        vocab = {symbol: value for value, symbol in enumerate(byte_symbols())} | {BOS: self.bos_id}
        hf = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        hf.decoder = decoders.ByteLevel()
        hf.add_special_tokens([BOS])
        return with_bos(hf, self.bos_id)
