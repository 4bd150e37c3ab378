"""A text as normalised words, hashed in passages of :data:`SHINGLE_WORDS` words (shingles) and in short lines, read
in chunks with numpy: the measure that bench.data.contamination compares splits by.

Words are runs of letters and digits, lowercased: punctuation, spacing and line breaks only separate them, so a
copy that is lowercased, re-punctuated, re-spaced, or has its lines cut or joined has the same words. A shingle is
a run of :data:`SHINGLE_WORDS` words, across line ends; a word changed here and there breaks only the shingles
that hold it. A line of fewer words than a shingle (a heading, a list item) is hashed whole as well, as it may hold
no shingle of its own. Hashes are 64-bit: between a train of 10^8 shingles and a test of 10^6, a match by chance
has odds of about 1 in 200,000 (and would cover one shingle's words). Byte positions are those of the text itself
(normalising keeps lengths), so a passage found can be shown as written.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Iterator

import numpy as np

SHINGLE_WORDS = 10  # chosen on the table of results/reference/contamination-threshold.md
CHUNK_BYTES = 1 << 22  # read in pieces so that memory stays small whatever the text's size

# ASCII letters and digits are word bytes (lowercased), other ASCII bytes separate words; bytes of other scripts are
# word bytes unless they spell a separator (see _other_scripts).
_CODES = np.array([ord(chr(b).lower()) if chr(b).isalnum() else 0 for b in range(128)] + list(range(128, 256)),
                  dtype=np.uint8)
_MASK = (1 << 64) - 1
_BYTE_BASE = 0x9E3779B97F4A7C15
_LONG = 256  # bytes: a longer word is hashed by Python (one 8-byte step at a time for all words costs)
_KEEP = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # the first n bytes of 8
_WORD_BASE = 0xD6E8FEB86659FD93


@dataclass(frozen=True)
class Chunk:
    """The words of one piece of a text (positions in the whole text) and the hashes they make.

    A shingle belongs to the piece of its last word: the pieces' shingles, joined, are the text's, the i-th
    starting at the text's i-th word."""

    word_starts: np.ndarray  # int64
    word_ends: np.ndarray
    shingles: np.ndarray  # uint64
    short_lines: np.ndarray  # uint64: the hash of each line of 1 to SHINGLE_WORDS - 1 words
    short_starts: np.ndarray  # int64: where each such line starts (its first byte) and ends (after its newline)
    short_ends: np.ndarray
    short_first_words: np.ndarray  # int64: index in the text of its first word
    short_sizes: np.ndarray  # its number of words


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (as :func:`_mix_one`): every bit of the result depends on every bit of ``h``."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


SEPARATOR, CASED = 1, 2


@cache
def _classes() -> np.ndarray:
    """What each character of the Basic Multilingual Plane is in a word: SEPARATOR for all but letters, digits and
    marks (Unicode categories L, N, M), as in ASCII; CASED for those whose lowercase differs. Characters beyond
    the plane (emoji, rare scripts) are word characters as they are."""
    chars = (chr(c) for c in range(1 << 16))
    return np.array([SEPARATOR if unicodedata.category(ch)[0] not in "LNM" else CASED if ch.lower() != ch else 0
                     for ch in chars], dtype=np.uint8)


def _other_scripts(raw: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Set the codes of 2- and 3-byte UTF-8 separators (dashes, quotes, no-break spaces) to 0; return where the
    characters with a lowercase of their own start."""
    at = np.flatnonzero(raw >= 0xC2)  # the lead bytes of 2- to 4-byte characters (and stray bytes)
    lead = raw[at]
    padded = np.concatenate((raw, np.zeros(2, dtype=np.uint8))).astype(np.uint32)
    cased = []
    for width, mask, chosen in ((2, 0x1F, lead < 0xE0), (3, 0x0F, (lead >= 0xE0) & (lead < 0xF0))):
        where = at[chosen]
        point = padded[where] & mask
        for k in range(1, width):
            point = (point << 6) | (padded[where + k] & 0x3F)
        kind = _classes()[point & 0xFFFF]
        blank = where[kind == SEPARATOR]
        for k in range(width):
            codes[np.minimum(blank + k, len(codes) - 1)] = 0
        cased.append(where[kind == CASED])
    return np.concatenate(cased)


def _pieces(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, piece) of ``data`` cut after a newline (else a space: a line of more than CHUNK_BYTES is read as
    several) at most CHUNK_BYTES apart."""
    start = 0
    while start < len(data):
        end = min(start + CHUNK_BYTES, len(data))
        if end < len(data):
            cut = data.rfind(b"\n", start, end) + 1 or data.rfind(b" ", start, end) + 1
            end = cut if cut > start else end  # a piece with neither: a word may be cut in two (it counts as two)
        yield start, data[start:end]
        start = end


def _word_hashes(piece: bytes, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 cased: np.ndarray) -> np.ndarray:
    """Each word's hash (:func:`word_hash` of its lowercased bytes), computed 8 bytes at a time for all words at
    once; a word with a character of another script that has a lowercase, or of over _LONG bytes, by Python."""
    padded = np.concatenate((codes, np.zeros(8, dtype=np.uint8)))
    eights = np.ndarray((len(codes) + 1,), dtype="<u8", buffer=padded, strides=(1,))  # the 8 bytes from each byte
    lengths = ends - starts
    hashes = _mix((eights[starts] & _KEEP[np.minimum(lengths, 8)]) + lengths.astype(np.uint64))
    at = np.flatnonzero(lengths > 8)
    for offset in range(8, _LONG, 8):  # the few longer words, 8 bytes more at a time
        if not len(at):
            break
        left = np.minimum(lengths[at] - offset, 8)
        hashes[at] = _mix(hashes[at] * np.uint64(_BYTE_BASE) + (eights[starts[at] + offset] & _KEEP[left]))
        at = at[lengths[at] > offset + 8]
    odd = at.tolist()
    if len(cased):
        odd = sorted(set(odd) | set((np.searchsorted(starts, cased, side="right") - 1).tolist()))
    if odd:
        hashes[odd] = np.array([word_hash(piece[starts[w]:ends[w]].decode("utf-8", "surrogateescape").lower()
                                          .encode("utf-8", "surrogateescape")) for w in odd], dtype=np.uint64)
    return hashes


def word_hash(word: bytes) -> int:
    """The hash of a lowercased word, as :func:`_word_hashes` computes it for many at once."""
    mask = _MASK
    h = _mix_one((int.from_bytes(word[:8], "little") + len(word)) & mask)
    for offset in range(8, len(word), 8):
        h = _mix_one((h * _BYTE_BASE + int.from_bytes(word[offset:offset + 8], "little")) & mask)
    return h


def _mix_one(h: int) -> int:
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    return h ^ (h >> 31)


def chunks(data: bytes, size: int = SHINGLE_WORDS) -> Iterator[Chunk]:
    """The text's chunks: its words, its shingles of ``size`` words and its short lines, in order."""
    carry = np.zeros(0, dtype=np.uint64)  # the last size - 1 words' hashes, which begin the next piece's shingles
    words_before = 0
    powers = [np.uint64(pow(_WORD_BASE, k, 1 << 64)) for k in range(size)]
    for offset, piece in _pieces(data):
        raw = np.frombuffer(piece, dtype=np.uint8)
        codes = _CODES[raw]
        cased = np.zeros(0, dtype=np.int64) if piece.isascii() else _other_scripts(raw, codes)
        inside = np.concatenate(([False], codes != 0, [False]))
        edges = np.flatnonzero(inside[1:] != inside[:-1])  # each word's start, then its end
        starts, ends = edges[0::2], edges[1::2]
        words = _word_hashes(piece, codes, starts, ends, cased)
        newlines = np.flatnonzero(raw == 10)
        line_ends = newlines + 1 if piece.endswith(b"\n") else np.append(newlines + 1, len(piece))
        line_starts = np.concatenate(([0], line_ends[:-1]))
        first_word = np.searchsorted(starts, line_starts)
        sizes = np.diff(np.append(first_word, len(starts)))
        short = np.flatnonzero((sizes > 0) & (sizes < size))
        line_hashes = np.zeros(len(short), dtype=np.uint64)
        stream = np.concatenate((carry, words))
        grams = stream.copy()  # grams[i]: the hash of the k words from stream[i], for k = 1 .. size
        for k in range(1, size + 1):
            ending = short[sizes[short] == k]
            line_hashes[sizes[short] == k] = grams[len(carry) + first_word[ending]]
            if k < size:
                grams = grams[:-1] + stream[k:] * powers[k]
        yield Chunk(word_starts=starts + offset, word_ends=ends + offset, shingles=grams, short_lines=line_hashes,
                    short_starts=line_starts[short] + offset, short_ends=line_ends[short] + offset,
                    short_first_words=first_word[short] + words_before, short_sizes=sizes[short])
        words_before += len(words)
        carry = stream[-(size - 1):] if size > 1 else carry
