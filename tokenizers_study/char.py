"""``char``: one token per Unicode code point seen in train, bytes for the rest.

Ids: 0 ``<bos>``, 1-256 the byte fallback (byte b is id b + 1), then the code
points seen in train in increasing order. An unseen character is spelled as
its UTF-8 bytes, so the scheme is lossless on any text.
"""

from __future__ import annotations

import numpy as np

from tokenizers_study.base import BOS, SchemeSpec, Tokenizer
from tokenizers_study.hf_json import with_bos
from tokenizers_study.text import decode_bytes, text_bytes

_BYTE_BASE = 1
_CHAR_BASE = 257


def _code_points(text: str) -> np.ndarray:
    # surrogatepass keeps lone surrogates (undecodable bytes) as their own code points
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _is_surrogate(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDFFF


class CharTokenizer(Tokenizer):
    family = "char"
    title = "Unicode characters"
    min_size = None
    lossless_scheme = True
    sort_rank = 1
    swept = False
    pretrained = False

    def __init__(self, spec: SchemeSpec, chars: np.ndarray):
        super().__init__(spec)
        self.chars = np.asarray(chars, dtype=np.uint32)  # sorted code points

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "CharTokenizer":
        seen = np.unique(_code_points(text))
        # Undecodable bytes are not characters: they always go through the byte fallback.
        seen = seen[(seen < 0xD800) | (seen > 0xDFFF)]
        return cls(spec, seen)

    def state(self) -> dict:
        return {"code_points": [int(c) for c in self.chars]}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "CharTokenizer":
        return cls(spec, np.array(state["code_points"], dtype=np.uint32))

    @property
    def vocab_size(self) -> int:
        return _CHAR_BASE + len(self.chars)

    @property
    def bos_id(self) -> int:
        return 0

    def byte_id(self, value: int) -> int:
        return _BYTE_BASE + value

    def _id_byte_lengths(self) -> np.ndarray:
        chars = [len(text_bytes(chr(int(c)))) for c in self.chars]
        return np.array([0] + [1] * 256 + chars, dtype=np.int32)

    def _encode(self, text: str) -> np.ndarray:
        cps = _code_points(text)
        if len(self.chars) == 0:
            pos = np.zeros(len(cps), dtype=np.int64)
            known = np.zeros(len(cps), dtype=bool)
        else:  # in place where it can be: a split of hundreds of MB holds a few arrays of its length at once
            pos = np.searchsorted(self.chars, cps)
            np.minimum(pos, len(self.chars) - 1, out=pos)  # an unknown character's id is replaced below anyway
            known = self.chars[pos] == cps
        ids = pos.astype(np.int32)
        del pos
        ids += _CHAR_BASE
        if known.all():
            return ids
        # Spell each unknown character as its bytes.
        pieces = []
        last = 0
        for i in np.flatnonzero(~known):
            pieces.append(ids[last:i])
            raw = text_bytes(chr(int(cps[i])))
            pieces.append(np.frombuffer(raw, dtype=np.uint8).astype(np.int32) + _BYTE_BASE)
            last = i + 1
        pieces.append(ids[last:])
        return np.concatenate(pieces)

    def decode(self, ids) -> str:
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[ids != self.bos_id]
        is_byte = ids < _CHAR_BASE
        # Decode runs of characters and runs of fallback bytes separately.
        edges = np.flatnonzero(np.diff(is_byte.astype(np.int8))) + 1
        out = []
        for run in np.split(ids, edges):
            if len(run) == 0:
                continue
            if run[0] < _CHAR_BASE:
                out.append(decode_bytes((run - _BYTE_BASE).astype(np.uint8).tobytes()))
            else:
                cps = self.chars[run - _CHAR_BASE].astype("<u4")
                out.append(cps.tobytes().decode("utf-32-le", "surrogatepass"))
        return "".join(out)

    def hf_tokenizer_json(self) -> str:
        """BPE with no merges over the characters seen in train, with the library's byte fallback (``<0xNN>``)."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models

        vocab = {BOS: self.bos_id} | {f"<0x{value:02X}>": self.byte_id(value) for value in range(256)}
        vocab |= {chr(int(c)): _CHAR_BASE + i for i, c in enumerate(self.chars)}
        hf = HFTokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
        hf.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
        hf.add_special_tokens([BOS])
        return with_bos(hf, self.bos_id)
