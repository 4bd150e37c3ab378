"""``word:N`` (closed vocabulary) and ``word-open:N`` (open vocabulary).

Words are whitespace-separated (``str.split``), so they match the word count
``tokenizers_study.text.text_counts`` uses. The N most frequent words of the
train split form the vocabulary (ties broken by the word itself, so training
is deterministic).

Whitespace is kept exactly. A single space between two words is implicit: it
costs no token, as in a classic word-level model. Every other whitespace run
(newlines, several spaces, tabs, ``\\r\\n``, leading and trailing whitespace)
is spelled with whitespace tokens: one per Unicode whitespace character, plus
the most frequent multi-character runs of train (WikiText's `` \\n `` line
break becomes one token, much like the classic ``<eos>``).

* ``word:N``: a word outside the vocabulary becomes ``<unk>``. This loses the
  word, so the scheme is lossy wherever a text has such words; the literal
  word ``<unk>`` of WikiText maps to the same token.
* ``word-open:N``: a word outside the vocabulary is spelled as ``<oov>``
  followed by its UTF-8 bytes, so the scheme is lossless.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from functools import cached_property
from typing import Iterator

import numpy as np

import tokenizers_study.text as text_module
from tokenizers_study.base import BOS, LossReport, SchemeSpec, Tokenizer
from tokenizers_study.text import decode_bytes, text_bytes

UNK = "<unk>"
OOV = "<oov>"
_SPLIT = re.compile(r"(\s+)")
_MAX_WHITESPACE_RUNS = 64
ID_BLOCK = 1 << 20  # ids walked at once by decode and byte_lengths (a list of a whole split's ids holds GBs)


def word_blocks(text: str) -> Iterator[str]:
    """``text`` in consecutive pieces of about :data:`~tokenizers_study.text.LINE_BLOCK` characters, cut only just
    before the whitespace run that holds a line break: the run stays whole and is never a single space between two
    words, so the pieces' words, runs and tokens are those of the whole text (a list of every word of a 500 MB split
    held GBs)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + text_module.LINE_BLOCK - 1)
        while end > start and text[end - 1].isspace():  # back to where the run begins
            end -= 1
        if end <= start:  # no line break ahead (or only whitespace before it): the rest in one piece
            end = len(text)
        yield text[start:end]
        start = end


def id_blocks(ids) -> Iterator[list[int]]:
    """The ids as Python ints, :data:`ID_BLOCK` at a time."""
    ids = np.asarray(ids)
    for first in range(0, len(ids), ID_BLOCK):
        yield ids[first:first + ID_BLOCK].tolist()


def whitespace_characters() -> list[str]:
    """Every code point Python treats as whitespace (what ``str.split`` splits on)."""
    return [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


class _WordTokenizer(Tokenizer):
    min_size = 1
    min_size_why = "at least one word"
    swept = False
    pretrained = False

    def __init__(self, spec: SchemeSpec, words: list[str], whitespace: list[str]):
        super().__init__(spec)
        # In the closed vocabulary the word <unk> *is* the unknown token (id 1), not a second entry.
        self.words = [w for w in words if self.lossless_scheme or w != UNK]
        self.whitespace = list(whitespace)  # single characters first, then learned runs
        self._build()

    def _build(self) -> None:
        specials = [BOS, OOV if self.lossless_scheme else UNK]
        self.n_specials = len(specials)
        self.byte_base = len(specials)
        n_bytes = 256 if self.lossless_scheme else 0
        self.ws_base = self.byte_base + n_bytes
        self.word_base = self.ws_base + len(self.whitespace)
        self.ws_ids = {w: self.ws_base + i for i, w in enumerate(self.whitespace)}
        self.word_ids = {w: self.word_base + i for i, w in enumerate(self.words)}
        self.max_run = max(len(w) for w in self.whitespace)
        if not self.lossless_scheme:
            self.word_ids[UNK] = 1
        self._vocab_size = self.word_base + len(self.words)

    # ---- training and state ---------------------------------------------

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "_WordTokenizer":
        counts, runs = Counter(), Counter()
        for block in word_blocks(text):
            counts.update(block.split())
            runs.update(r for r in _SPLIT.findall(block) if len(r) > 1)
        words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: spec.size]]
        frequent = [r for r, n in sorted(runs.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2]
        whitespace = whitespace_characters() + frequent[:_MAX_WHITESPACE_RUNS]
        return cls(spec, words, whitespace)

    def state(self) -> dict:
        return {"words": self.words, "whitespace": self.whitespace}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "_WordTokenizer":
        return cls(spec, state["words"], state["whitespace"])

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def bos_id(self) -> int:
        return 0

    # ---- encoding -------------------------------------------------------

    def _encode_whitespace(self, run: str, out: list[int]) -> None:
        i = 0
        while i < len(run):
            for length in range(min(self.max_run, len(run) - i), 0, -1):
                token = self.ws_ids.get(run[i:i + length])
                if token is not None:
                    out.append(token)
                    i += length
                    break
            else:  # pragma: no cover - every whitespace character is in the vocabulary
                raise AssertionError(f"whitespace {run[i]!r} missing from the vocabulary")

    def _encode_unknown(self, word: str, out: list[int]) -> None:
        raise NotImplementedError

    def _encode(self, text: str) -> np.ndarray:
        return np.concatenate([np.zeros(0, dtype=np.int32)]
                              + [np.array(self._encode_block(block), dtype=np.int32) for block in word_blocks(text)])

    def _encode_block(self, text: str) -> list[int]:
        parts = _SPLIT.split(text)  # word, run, word, run, ..., word (edge words may be "")
        out: list[int] = []
        word_ids = self.word_ids
        last = len(parts) - 1
        for k, part in enumerate(parts):
            if k % 2 == 0:
                if part:
                    token = word_ids.get(part)
                    if token is None:
                        self._encode_unknown(part, out)
                    else:
                        out.append(token)
            elif not (part == " " and parts[k - 1] and k < last and parts[k + 1]):
                self._encode_whitespace(part, out)
        return out

    # ---- alignment ------------------------------------------------------

    def byte_lengths(self, ids) -> np.ndarray:
        """Bytes each token decodes to; an implicit space is counted with the word that follows it."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        positions = np.arange(len(ids))
        is_byte = (ids >= self.byte_base) & (ids < self.ws_base)
        # a byte token spells the word of the <oov> before its run of bytes
        last_other = np.maximum.accumulate(np.where(is_byte, -1, positions))
        if is_byte.any() and ((last_other[is_byte] < 0).any() or (ids[last_other[is_byte].clip(0)] != 1).any()):
            raise ValueError("a byte token that follows no <oov>: not an encoding of this scheme")
        starts_word = (ids >= self.word_base) | (ids == 1)
        whitespace = (ids >= self.ws_base) & (ids < self.word_base)
        # whether a word came last before each token (<bos> and spelled bytes change nothing)
        last_change = np.maximum.accumulate(np.where(starts_word | whitespace, positions, -1))
        before = np.concatenate([[-1], last_change[:-1]])
        after_word = (before >= 0) & starts_word[before.clip(0)]
        lengths = np.where(is_byte, 1, 0) + np.where(starts_word, after_word, 0)
        spelled = (ids == 1) & self.lossless_scheme  # <oov>: its bytes follow
        return lengths + np.where((starts_word & ~spelled) | whitespace, self._surface_bytes[ids.clip(0)], 0)

    @cached_property
    def _surface_bytes(self) -> np.ndarray:
        return np.array([len(text_bytes(s)) if s is not None else 0 for s in self._surface], dtype=np.int64)

    # ---- decoding -------------------------------------------------------

    @cached_property
    def _surface(self) -> list[str | None]:
        """Surface string of each id; None for ids with special decoding."""
        table: list[str | None] = [None] * self.vocab_size
        for w, i in self.ws_ids.items():
            table[i] = w
        for i, w in enumerate(self.words):
            table[self.word_base + i] = w
        if not self.lossless_scheme:
            table[1] = UNK
        return table

    def decode(self, ids) -> str:
        surface = self._surface
        out: list[str] = []
        pending = bytearray()
        after_word = False
        in_spelling = False
        for i in (i for block in id_blocks(ids) for i in block):
            if in_spelling and self.byte_base <= i < self.ws_base:
                pending.append(i - self.byte_base)
                continue
            if in_spelling:
                out.append(decode_bytes(pending))
                pending.clear()
                in_spelling = False
            if i == 0:
                continue
            if i >= self.word_base or (i == 1 and not self.lossless_scheme):
                if after_word:
                    out.append(" ")
                out.append(surface[i])
                after_word = True
            elif i >= self.ws_base:
                out.append(surface[i])
                after_word = False
            elif i == 1:  # <oov>: a word spelled in bytes follows
                if after_word:
                    out.append(" ")
                in_spelling = True
                after_word = True
        if in_spelling:
            out.append(decode_bytes(pending))
        return "".join(out)


class WordTokenizer(_WordTokenizer):
    family = "word"
    title = "closed-vocabulary words"
    lossless_scheme = False  # a closed vocabulary: unknown words decode as <unk>
    sort_rank = 6

    @property
    def unk_id(self) -> int:
        return 1

    def byte_id(self, value: int) -> int:
        raise ValueError("word:N has no byte tokens; unknown words become <unk>")

    def fallback_ids(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def _encode_unknown(self, word: str, out: list[int]) -> None:
        out.append(1)

    def source_char_lengths(self, text: str, ids) -> np.ndarray:
        """An <unk> covers the word it replaced, not the five characters of "<unk>"."""
        ids = np.asarray(ids, dtype=np.int64)
        lengths = self.char_lengths(ids)
        replaced = [len(w) for block in word_blocks(text) for w in block.split()  # in order, one <unk> each
                    if self.word_ids.get(w, 1) == 1]
        lengths[ids == 1] += np.asarray(replaced, dtype=np.int64) - len(UNK)
        return lengths

    def loss_report(self, text: str, ids: np.ndarray | None = None) -> LossReport:
        """Whitespace is always kept; what is lost is every word outside the vocabulary."""
        lost_words = lost_bytes = 0
        for block in word_blocks(text):
            lost = [w for w in block.split() if w not in self.word_ids]
            lost_words += len(lost)
            lost_bytes += sum(len(text_bytes(w)) for w in lost)
        if not lost_words:
            return LossReport(True)
        return LossReport(False, lost_words=lost_words, lost_bytes=lost_bytes,
                          detail=f"{lost_words:,} words outside the vocabulary decode as <unk>")


class OpenWordTokenizer(_WordTokenizer):
    family = "word-open"
    title = "open-vocabulary words"
    lossless_scheme = True  # an open vocabulary: unknown words are spelled in bytes
    sort_rank = 5

    def byte_id(self, value: int) -> int:
        return self.byte_base + value

    def fallback_ids(self) -> np.ndarray:
        return np.arange(1, self.ws_base, dtype=np.int64)  # <oov> and the bytes that follow it

    def _encode_unknown(self, word: str, out: list[int]) -> None:
        out.append(1)
        out.extend(self.byte_base + b for b in text_bytes(word))
