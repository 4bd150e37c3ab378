"""What every tokenization scheme provides (the registry of schemes and their names: ``tokenizers_study.registry``).

Every tokenizer is trained on the train split only, is deterministic, serialises
to one JSON file (``to_bytes``) and has a stable hash: the sha256 of those bytes.

Texts are Python strings read with ``surrogateescape`` (see
``tokenizers_study.text``), so a byte sequence that is not valid UTF-8
survives as lone surrogates and every lossless scheme gives it back exactly.

Every vocabulary has a ``<bos>`` token: the document-start context from which
the first real token is predicted. It is never produced by ``encode``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Sequence

import numpy as np

from tokenizers_study.text import UNDECODABLE, char_byte_offsets, text_bytes

FORMAT_VERSION = 1
TRAITS = ("family", "title", "min_size", "lossless_scheme", "sort_rank", "swept", "pretrained")  # declared by every scheme
BOS = "<bos>"
DECODE_BLOCK = 1 << 18  # tokens gathered at once by table_text


@dataclass(frozen=True)
class SchemeSpec:
    """A parsed scheme name: its family and, for trained vocabularies, the size N; for a tokenizer trained
    elsewhere, the path of its file."""

    family: str
    size: int | None = None
    path: str | None = None

    @property
    def name(self) -> str:
        if self.path is not None:
            return f"{self.family}:{self.path}"
        return self.family if self.size is None else f"{self.family}:{self.size}"


@dataclass
class LossReport:
    """Whether decoding gives the text back, and if not, how much is lost."""

    lossless: bool
    lost_words: int = 0  # words that decode to something else (<unk>, normalised, dropped)
    lost_bytes: int = 0  # UTF-8 bytes of those words
    detail: str = ""


class Tokenizer(ABC):
    """Base class of all schemes. A subclass declares the traits (TRAITS), implements every abstract method
    (``_train``, ``state``, ``from_state``, ``vocab_size``, ``bos_id``, ``byte_id``, ``_encode``, ``decode``) and
    says how many bytes each id decodes to, which places every token in the text: either a table ``_id_bytes``
    (each id's bytes, indexed by id) or its own ``_id_byte_lengths`` (each id's byte count) or ``byte_lengths``.
    Registering a class that leaves out any of these is refused in one line (registry.py)."""

    # The traits: what the report and the planner read of a scheme (never its name). Every scheme declares each
    # of TRAITS itself or through a base of its own; registering one that does not is refused (registry.py).
    family: ClassVar[str]  # its name, before the ":" of a scheme name
    title: ClassVar[str]  # what it is in words, for captions and legends: "byte-level BPE"
    min_size: ClassVar[int | None]  # the least vocabulary size N of family:N; None: the scheme takes no size
    min_size_why: ClassVar[str] = ""  # why N is at least min_size, for the error
    # False: a closed vocabulary, whose unknown words decode as <unk> (word:N): its runs are never compared with
    # other tokenizations' (registry.lossless_on) and go to the report's closed-vocabulary table and figure
    lossless_scheme: ClassVar[bool]
    sort_rank: ClassVar[int]  # where its runs come in tables, legends and colours (then by size)
    swept: ClassVar[bool]  # True: each size N is a point of the report's vocabulary sweep, a line per family
    pretrained: ClassVar[bool]  # True: loaded from a file (the scheme's path), never trained here
    library: ClassVar[str | None] = None  # the package that trains or runs it, if not this one
    # Characters the underlying library cannot take; they are encoded as byte tokens.
    escape_pattern: ClassVar[re.Pattern | None] = None

    def __init__(self, spec: SchemeSpec):
        self.spec = spec

    @classmethod
    def form(cls) -> str:
        """How the scheme is written, for help and errors: ``byte``, ``bpe:N``, ``hf:PATH``."""
        if cls.pretrained:
            return f"{cls.family}:PATH"
        return cls.family if cls.min_size is None else f"{cls.family}:N"

    @classmethod
    def sweep_point(cls, spec: SchemeSpec) -> tuple[str, int] | None:
        """Where a scheme's runs sit in the vocabulary sweep: (the line, the vocabulary size); None: not swept."""
        return (cls.family, spec.size) if cls.swept and spec.size is not None else None

    # ---- training and state -------------------------------------------------

    @classmethod
    def train(cls, spec: SchemeSpec, text: str) -> "Tokenizer":
        """Train on the train split's text (deterministically)."""
        return cls._train(spec, text)

    @classmethod
    @abstractmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "Tokenizer": ...

    @abstractmethod
    def state(self) -> dict:
        """Everything needed to rebuild the tokenizer, as JSON-serialisable data."""

    @classmethod
    @abstractmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "Tokenizer": ...

    def to_bytes(self) -> bytes:
        doc = {"format_version": FORMAT_VERSION, "scheme": self.spec.name, "state": self.state()}
        return json.dumps(doc, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    @property
    def hash(self) -> str:
        """sha256 of the saved file: equal hashes mean identical tokenizers."""
        if not hasattr(self, "_hash"):
            self._hash = hashlib.sha256(self.to_bytes()).hexdigest()
        return self._hash

    # ---- vocabulary ---------------------------------------------------------

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @property
    @abstractmethod
    def bos_id(self) -> int: ...

    @property
    def unk_id(self) -> int | None:
        """The id that stands for unknown words; None for lossless schemes."""
        return None

    # Each id's bytes, indexed by id, where every token stands for the same bytes wherever it occurs (a list or a
    # cached_property): one way of saying how many bytes each id decodes to (see the class docstring).
    _id_bytes: list[bytes]

    @abstractmethod
    def byte_id(self, value: int) -> int:
        """The token for one raw byte (byte fallback); ValueError where no one token is a byte (word:N spells no
        bytes, a scheme may cut a byte into several tokens)."""

    def fallback_ids(self) -> np.ndarray:
        """Ids of byte-fallback tokens (empty for schemes where bytes are the vocabulary or no token is a byte)."""
        try:
            return np.array([self.byte_id(b) for b in range(256)], dtype=np.int64)
        except ValueError:  # byte_id's answer for a scheme without one-token bytes
            return np.zeros(0, dtype=np.int64)

    # ---- encoding -----------------------------------------------------------

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (int32), without ``<bos>``."""
        if self.escape_pattern is None or not self.escape_pattern.search(text):
            return np.asarray(self._encode(text), dtype=np.int32)
        pieces: list[np.ndarray] = []
        last = 0
        for match in self.escape_pattern.finditer(text):
            if match.start() > last:
                pieces.append(np.asarray(self._encode(text[last:match.start()]), dtype=np.int32))
            raw = text_bytes(match.group())
            pieces.append(np.array([self.byte_id(b) for b in raw], dtype=np.int32))
            last = match.end()
        if last < len(text):
            pieces.append(np.asarray(self._encode(text[last:]), dtype=np.int32))
        return np.concatenate(pieces)  # the pattern matched: at least one piece

    @abstractmethod
    def _encode(self, text: str) -> Sequence[int] | np.ndarray: ...

    @abstractmethod
    def decode(self, ids: Sequence[int] | np.ndarray) -> str: ...

    def hf_tokenizer_json(self) -> str | None:
        """The scheme as a ``tokenizers`` library file (tokenizer.json) that gives ``<bos>`` and then ``encode``'s
        ids (``tokenizers_study.hf_json`` says which texts it cannot take); None where the library cannot express
        the scheme exactly: ``bench export`` then writes the scheme's own code beside the model."""
        return None

    def byte_lengths(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """How many bytes of ``decode(ids)`` each token produces; they sum to the decoded text's length.

        This places every token in the text (its byte offset is the cumulative sum),
        which is what per-token analyses (loss by position within a word) need.
        """
        return self._id_byte_lengths()[np.asarray(ids)]

    def char_lengths(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """How many characters of ``decode(ids)`` begin in each token; they sum to the decoded text's length.

        A character whose bytes are cut across tokens (byte-level BPE can do that) counts in the token that
        holds its first byte, so the characters of a run of tokens are those the tokens begin.
        """
        ids = np.asarray(ids)
        lengths = self.byte_lengths(ids)
        pieces = self.pieces_text(ids)
        data = text_bytes(pieces)
        if UNDECODABLE.search(pieces) is None:  # valid UTF-8: a character begins at every non-continuation byte
            begins = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
        else:  # undecodable bytes are characters of their own (surrogateescape)
            begins = np.zeros(len(data), dtype=bool)
            begins[char_byte_offsets(pieces)[:-1]] = True
        # per token, the characters begun in its bytes; linear, and one byte per text byte at most (a corpus of
        # hundreds of MB is counted without arrays of 8 bytes per byte)
        starts = np.cumsum(lengths, dtype=np.int64)
        starts -= lengths
        present = lengths > 0
        if present.all():
            return np.add.reduceat(begins, starts, dtype=np.int32) if len(starts) else np.zeros(0, np.int32)
        counts = np.zeros(len(lengths), dtype=np.int32)
        if present.any():  # reduceat would give an empty token the next byte's count
            counts[present] = np.add.reduceat(begins, starts[present], dtype=np.int32)
        return counts

    def source_char_lengths(self, text: str, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Characters of the original ``text`` (``ids`` = its encoding) each token covers, for a character
        budget: :meth:`char_lengths` of a lossless scheme; a lossy one counts what a token replaced."""
        return self.char_lengths(ids)

    def pieces_text(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text the tokens' own bytes spell (``byte_lengths`` of each): ``decode`` unless a decoder adds or
        removes text between tokens (some pretrained tokenizers do)."""
        return self.decode(ids)

    def table_text(self, ids: Sequence[int] | np.ndarray) -> str:
        """The tokens' bytes from the id -> bytes table (``_id_bytes``), joined and decoded: gathered with numpy a
        block of tokens at a time into one byte buffer (a Python list of the ids of a 500 MB split held 4 GB)."""
        ids = np.asarray(ids)
        flat, starts = self._id_bytes_flat
        lengths = self._id_byte_lengths().astype(np.int64)
        blocks = [ids[first:first + DECODE_BLOCK] for first in range(0, len(ids), DECODE_BLOCK)]
        out = np.empty(sum(int(lengths[block].sum()) for block in blocks), dtype=np.uint8)
        filled = 0
        for block in blocks:
            sizes = lengths[block]
            ends = np.cumsum(sizes)
            # byte j of a token comes from its entry in the flat table: its start there, minus where it begins here
            source = np.repeat(starts[block] - (ends - sizes), sizes) + np.arange(int(ends[-1]))  # a block has a token
            out[filled:filled + len(source)] = flat[source]
            filled += len(source)
        return str(out.data, "utf-8", "surrogateescape")

    @cached_property
    def _id_bytes_flat(self) -> tuple[np.ndarray, np.ndarray]:
        """Every id's bytes (``_id_bytes``) end to end, and where each begins."""
        table = self._id_bytes
        starts = np.zeros(len(table), dtype=np.int64)
        starts[1:] = np.cumsum([len(b) for b in table[:-1]])
        return np.frombuffer(b"".join(table), dtype=np.uint8), starts

    def _id_byte_lengths(self) -> np.ndarray:
        """Bytes each id decodes to, from the id -> bytes table of schemes that decode through one
        (``_id_bytes``); the others override this or ``byte_lengths``."""
        return np.array([len(b) for b in self._id_bytes], dtype=np.int32)

    def loss_report(self, text: str, ids: np.ndarray | None = None) -> LossReport:
        """Check ``decode(encode(text)) == text``; subclasses that can lose text say how much."""
        ids = self.encode(text) if ids is None else ids
        decoded = self.decode(ids)
        if decoded == text:
            return LossReport(True)
        at = next((i for i, (a, b) in enumerate(zip(decoded, text)) if a != b), min(len(decoded), len(text)))
        return LossReport(False, lost_words=lost_words(text, decoded), lost_bytes=lost_bytes(text, decoded),
                          detail=f"decoding differs from the text at character {at}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.name} vocab={self.vocab_size}>"


def lost_bytes(text: str, decoded: str) -> int:
    """Bytes of ``text`` that ``decoded`` does not give back, by alignment (difflib): lines first, then the words
    of lines that differ, then the bytes of words that differ; whitespace that decoding drops counts too."""
    lines, back = text.split("\n"), decoded.split("\n")
    lost = max(0, len(lines) - len(back))  # line breaks
    return lost + sum(_lost_in_line(line, other) for line, other in _changed_lines(lines, back))


def lost_words(text: str, decoded: str) -> int:
    """Whitespace-separated words of ``text`` that ``decoded`` does not give back, aligned as :func:`lost_bytes`
    aligns them (a word decoded as ``<unk>``, or changed in any byte, is lost)."""
    count = 0
    for line, other in _changed_lines(text.split("\n"), decoded.split("\n")):
        words = line.split()
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, words, other.split(), autojunk=False).get_opcodes():
            count += i2 - i1 if tag != "equal" else 0
    return count


def _lost_in_line(line: str, other: str) -> int:
    lost = max(0, _spaces(line) - _spaces(other))
    for word, got in _changed_pairs(line.split(), other.split(), ""):
        a, b = text_bytes(word), text_bytes(got)
        if len(a) * len(b) > 10**7:  # too long to align: all of it lost
            lost += len(a)
            continue
        matched = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
        lost += len(a) - sum(m.size for m in matched)
    return lost


ALIGN_LINES = 10_000  # beyond this many lines, lines that make up over 1% of them never anchor an alignment


def _changed_lines(lines: list[str], back: list[str]):
    """The (line, what decoding gave for it) pairs that differ: line by line where decoding kept every line break
    (linear), else aligned by :func:`_changed_pairs`; WikiText repeats its blank line hundreds of thousands of
    times, which an exact alignment of a large split would compare with one another (quadratic), so beyond
    :data:`ALIGN_LINES` lines such popular lines are difflib's junk."""
    if len(lines) == len(back):
        return ((line, other) for line, other in zip(lines, back) if line != other)
    return _changed_pairs(lines, back, "\n", autojunk=len(lines) > ALIGN_LINES)


def _changed_pairs(parts: list[str], back: list[str], joiner: str, autojunk: bool = False):
    """The (part, what decoding gave for it) pairs that differ, aligned by difflib; where a run of parts is
    replaced by a run of another length, the two runs joined by ``joiner`` make one pair."""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, parts, back, autojunk=autojunk).get_opcodes():
        if tag == "equal":
            continue
        if i2 - i1 == j2 - j1:
            yield from zip(parts[i1:i2], back[j1:j2])
        else:
            yield joiner.join(parts[i1:i2]), joiner.join(back[j1:j2])


def _spaces(text: str) -> int:
    """Whitespace bytes other than line breaks (counted apart)."""
    return len(text_bytes(text)) - sum(len(text_bytes(w)) for w in text.split()) - text.count("\n")
