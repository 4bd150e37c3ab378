"""``bpe:N``: byte-level BPE trained with HuggingFace ``tokenizers``.

The GPT-2 recipe: the text is split with the GPT-2 regex, each piece is seen
as UTF-8 bytes (shown as 256 printable characters), and merges are learned on
top of those 256 symbols. N is the total vocabulary, ``<bos>`` (id 0) included.

The text is encoded line by line (each line keeps its ``\\n``), the same
units the trainer saw; this keeps memory flat and lets the library encode
lines in parallel. Decoding maps every token back to its bytes directly, which
is exact even where a token boundary falls inside a multi-byte character.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np

from tokenizers_study.base import BOS, SchemeSpec, Tokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.hf_json import with_bos
from tokenizers_study.text import line_blocks


def byte_symbols() -> list[str]:
    """The printable stand-in character of each byte 0..255 in byte-level BPE.

    Printable Latin-1 bytes stand for themselves; the others (controls, space,
    and a few more) are moved to code points from 256 upward, in byte order.
    """
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    symbols = []
    moved = 0
    for b in range(256):
        if b in keep:
            symbols.append(chr(b))
        else:
            symbols.append(chr(256 + moved))
            moved += 1
    return symbols


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; ``"".join(split_lines(t)) == t``."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


class BPETokenizer(Tokenizer):
    family = "bpe"
    title = "byte-level BPE"
    lossless_scheme = True
    sort_rank = 2
    swept = True
    pretrained = False
    library = "tokenizers"
    min_size = 257
    min_size_why = "256 byte symbols plus <bos>"
    # Undecodable bytes cannot cross into Rust, and the library would read a literal "<bos>" in the text as the
    # special token: both are spelled in byte tokens.
    escape_pattern = re.compile(r"[\udc80-\udcff]+|" + re.escape(BOS))

    def __init__(self, spec: SchemeSpec, hf_json: str):
        super().__init__(spec)
        from tokenizers import Tokenizer as HFTokenizer

        self.hf_json = hf_json
        self.hf = HFTokenizer.from_str(hf_json)

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "BPETokenizer":
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=spec.size,
            special_tokens=[BOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        clean = cls.escape_pattern.sub("", text)
        hf.train_from_iterator((line for block in line_blocks(clean) for line in split_lines(block)), trainer=trainer)
        reached = hf.get_vocab_size(with_added_tokens=True)
        if reached < spec.size:  # the text ran out of pairs to merge: a smaller vocabulary than its name says
            raise TokenizerError(f"{spec.name}: this train split supports only {reached:,} tokens (no pair is "
                                 f"left to merge); choose bpe:N with N at most {reached}")
        return cls(spec, hf.to_str())

    def state(self) -> dict:
        return {"hf_tokenizer": self.hf_json}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "BPETokenizer":
        return cls(spec, state["hf_tokenizer"])

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    @property
    def bos_id(self) -> int:
        return self.hf.token_to_id(BOS)

    @cached_property
    def _byte_ids(self) -> list[int]:
        return [self.hf.token_to_id(s) for s in byte_symbols()]

    def byte_id(self, value: int) -> int:
        return self._byte_ids[value]

    def fallback_ids(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)  # byte symbols are ordinary BPE tokens here

    @cached_property
    def _id_bytes(self) -> list[bytes]:
        to_byte = {s: b for b, s in enumerate(byte_symbols())}
        table = [b""] * self.vocab_size
        for token, i in self.hf.get_vocab(with_added_tokens=True).items():
            if token == BOS:
                continue
            table[i] = bytes(to_byte[c] for c in token)
        return table

    def _encode(self, text: str) -> np.ndarray:
        """The lines of about a MB of text at a time, ids only: the library's encodings (tokens, offsets, masks)
        hold about 30 bytes per byte of text, so a split encoded at once, or 20,000 long lines, held GBs."""
        pieces = [np.zeros(0, dtype=np.int32)]
        for block in line_blocks(text):
            encodings = self.hf.encode_batch_fast(split_lines(block), add_special_tokens=False)
            pieces.append(np.fromiter((i for e in encodings for i in e.ids), dtype=np.int32))
        return np.concatenate(pieces)

    def decode(self, ids) -> str:
        return self.table_text(ids)

    def hf_tokenizer_json(self) -> str:
        """The library's own file: encoding a text whole gives the ids of its lines encoded apart, as no merge
        learned from lines has a line break before another symbol."""
        from tokenizers import Tokenizer as HFTokenizer

        return with_bos(HFTokenizer.from_str(self.hf_json), self.bos_id)
