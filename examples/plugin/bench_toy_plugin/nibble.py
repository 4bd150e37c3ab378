"""A tokenization plug-in: ``nibble`` cuts each UTF-8 byte of the text into
two tokens, its high 4 bits and then its low 4 bits. Ids 0-15 are high
halves, 16-31 low halves, 32 is ``<bos>``."""

import numpy as np

from tokenizers_study import FAMILIES, Tokenizer
from tokenizers_study.text import decode_bytes, text_bytes

HIGH, LOW, BOS_ID = 0, 16, 32  # where each kind of id begins


class NibbleTokenizer(Tokenizer):
    # The traits: what the commands, the planner and the report read of a
    # scheme (never its name).
    family = "nibble"  # a matrix's tokenizer = ["nibble"]
    title = "bytes cut into 4-bit halves"  # captions and legends
    min_size = None  # no vocabulary size: "nibble", not "nibble:N"
    lossless_scheme = True  # gives every text back: compared with others
    sort_rank = 7  # after the shipped schemes trained here (0-6)
    swept = False  # no sizes, so no line in the vocabulary sweep
    pretrained = False  # trained here (on nothing), not read from a file

    # ---- training and state: nothing to learn, nothing to save
    @classmethod
    def _train(cls, spec, text):
        return cls(spec)

    def state(self):
        return {}

    @classmethod
    def from_state(cls, spec, state):
        return cls(spec)

    # ---- vocabulary
    @property
    def vocab_size(self):
        return 33

    @property
    def bos_id(self):
        return BOS_ID

    def byte_id(self, value):
        raise ValueError("nibble has no one-token bytes: each is two")

    def _id_byte_lengths(self):
        # The byte spans: bytes each id adds to the text. A byte counts in
        # its high half (1); its low half spans none (0).
        return np.array([1] * 16 + [0] * 16 + [0], dtype=np.int32)

    # ---- encoding and decoding
    def _encode(self, text):
        data = np.frombuffer(text_bytes(text), dtype=np.uint8)
        ids = np.empty(2 * len(data), dtype=np.int32)
        ids[0::2] = HIGH + (data >> 4)
        ids[1::2] = LOW + (data & 0x0F)
        return ids

    def decode(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[ids != BOS_ID]
        # A high half followed by a low half is a byte; a lone half (a
        # sampled text can hold one) spells nothing.
        starts = np.flatnonzero((ids[:-1] < LOW) & (ids[1:] >= LOW))
        data = ((ids[starts] - HIGH) << 4) | (ids[starts + 1] - LOW)
        return decode_bytes(data.astype(np.uint8).tobytes())


# Registered when imported (--plugin, plugins = [...]); the entry point in
# pyproject.toml registers the same class where the package is installed.
FAMILIES.adopt(NibbleTokenizer.family, NibbleTokenizer)
