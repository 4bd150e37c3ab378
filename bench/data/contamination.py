"""Contamination between a corpus's splits: the share of a held-out split's bytes in passages that train (or the
other held-out split) also holds, compared as normalised words (bench.data.shingles).

Two texts share a passage where they share a run of :data:`MIN_PASSAGE_WORDS` words or more whose every
:data:`~bench.data.shingles.SHINGLE_WORDS`-word stretch both hold, lowercased, with punctuation, spacing and line
ends ignored: a copy that is lowercased, re-punctuated, re-spaced, has its lines cut or joined, or has a word changed
here and there (:data:`GAP_WORDS` in a row) is still found, all but the words changed. Shorter shared runs do not
count: independent articles share stock phrases and sentences. A line of fewer words than a shingle (a heading, a
list item) holds no such run: it counts when the other split holds it as a line and it occurs once in its own split
(a line the split repeats is a heading or a markup tag), weighed by the share of the split that short lines make,
so that headings such as ``= = Career = =`` weigh nothing while a split made of short lines is judged by them whole.

:data:`MAX_SHARE` comes from results/reference/contamination-threshold.md (experiments/contamination_table.py).
Natural shares: WikiText-2 (official valid and test, train its first 565 articles) 0.102% (valid in train: the
Boat Race background and a listed-building paragraph that other articles repeat), 0.006% (test in train), 0.002%
(between valid and test); the generators of the WikiText-103 and enwik8 stand-ins with held-out articles 0.084% and
0.117% at most. Hostile, built from WikiText-2: a paste of a few paragraphs of test into train (7,000 bytes, 0.56% of
test) 0.563% to 0.624% from five places of test, lowercased, re-punctuated, its lines cut or joined or a word of
each changed 0.574% to 0.578%; pastes of up to half of test 1.2% to 50%, the whole test so changed 98.5% to 100%, a
test made only of short lines that train holds 50.5%. :data:`MAX_SHARE` is 2.1 times the highest natural share and
2.3 times under the lowest hostile one. The stand-ins as ``bench data synthesize`` writes them (every split drawn from
the same articles) share 32% and 83%: their held-out splits are near-duplicates of train. On the WikiText-103
stand-in (542 MB) the check takes about 20 s of CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.shingles import SHINGLE_WORDS, chunks

MAX_SHARE = 0.0025
MIN_PASSAGE_WORDS = 50  # about 300 bytes: longer than the stock phrases and sentences independent articles share
GAP_WORDS = 1  # a word changed inside a copied passage leaves it one passage
ACCEPTED = "accepted with --allow-overlap"
PAIRS = (("valid", "train"), ("test", "train"), ("test", "valid"), ("valid", "test"))  # (measured, found in)
EXAMPLE_CHARS = 60


@dataclass(frozen=True)
class Overlap:
    """How much of ``split`` lies in passages, or short lines, that ``other`` also holds."""

    split: str
    other: str
    passage_bytes: int  # in runs of words that ``other`` also holds (from the first byte of a run to its last)
    short_line_bytes: int  # in lines of fewer words, each once in ``split``, that ``other`` holds, outside those runs
    all_short_line_bytes: int  # in all of ``split``'s lines of fewer words, shared or not
    split_bytes: int
    example: str  # the first shared passage or line of ``split`` as written, or ""

    @property
    def share(self) -> float:
        if not self.split_bytes:
            return 0.0
        short_weight = self.all_short_line_bytes / self.split_bytes  # the share of the split that short lines make
        return (self.passage_bytes + self.short_line_bytes * short_weight) / self.split_bytes

    @property
    def too_much(self) -> bool:
        return self.share > MAX_SHARE

    def describe(self) -> str:
        words = " ".join(self.example.split())
        shown = words if len(words) <= EXAMPLE_CHARS else words[:EXAMPLE_CHARS - 3] + "..."
        return (f"{self.share:.2%} of the {self.split} file's bytes are in passages or lines the {self.other} file "
                f"also holds, compared lowercased without punctuation (such as {shown!r})")

    def label(self) -> str:
        """What a corpus accepted with its overlap records in the split's source."""
        return f"{self.describe()}, {ACCEPTED}"

    def refusal(self, corpus: str) -> str:
        why = "a model would be scored on text it was trained on"
        if self.other != "train":
            why = "checkpoints chosen on valid would be scored on text that chose them"
        return (f"corpus {corpus!r}: {self.describe()}, more than {MAX_SHARE * 100:g}%; {why}: give a {self.split} "
                f"file held out from {self.other}, or study text a model has read with bench data add ... "
                f"--allow-overlap")


class _Lookup:
    """A set of hashes that marks which of them a stream of others holds: sorted, behind a bit table that most
    hashes not in the set fail (a train file's passages are tens of millions; a held-out split's, far fewer)."""

    def __init__(self, hashes: np.ndarray):
        self.keys, self.order = np.unique(hashes, return_inverse=True)  # order: each hash's place among the keys
        bits = max(10, (16 * len(self.keys)).bit_length())
        self.shift = np.uint64(64 - bits)
        self.table = np.zeros(1 << bits, dtype=bool)
        self.table[self.keys >> self.shift] = True

    def mark(self, hashes: np.ndarray, found: np.ndarray) -> None:
        """Set ``found`` (one flag per key) where ``hashes`` holds the key."""
        if not len(self.keys):
            return
        candidates = hashes[self.table[hashes >> self.shift]]
        at = np.minimum(np.searchsorted(self.keys, candidates), len(self.keys) - 1)
        found[at[self.keys[at] == candidates]] = True


class _HeldOut:
    """A held-out split's words, passages and short lines, with sets to find them in another split."""

    def __init__(self, data: bytes, shingle_words: int, passage_words: int):
        parts = list(chunks(data, shingle_words))
        self.data, self.size, self.passage_words = data, shingle_words, passage_words

        def joined(field: str, dtype: type) -> np.ndarray:
            return np.concatenate([getattr(c, field) for c in parts] or [np.zeros(0, dtype=dtype)])

        self.starts, self.ends = joined("word_starts", np.int64), joined("word_ends", np.int64)
        self.passages = _Lookup(joined("shingles", np.uint64))
        self.lines = _Lookup(joined("short_lines", np.uint64))
        self.line_starts, self.line_ends = joined("short_starts", np.int64), joined("short_ends", np.int64)
        self.line_first_words, self.line_sizes = joined("short_first_words", np.int64), joined("short_sizes", np.int64)

    def flags(self) -> tuple[np.ndarray, np.ndarray]:
        """Fresh flags for :meth:`_Lookup.mark`: one per distinct passage, one per distinct short line."""
        return np.zeros(len(self.passages.keys), dtype=bool), np.zeros(len(self.lines.keys), dtype=bool)

    def overlap(self, split: str, other: str, found_passages: np.ndarray, found_lines: np.ndarray) -> Overlap:
        shared = found_passages[self.passages.order]  # by shingle, in order: shingle i starts at word i
        count = np.concatenate(([0], np.cumsum(shared)))
        words = np.arange(len(self.starts))
        first = np.maximum(words - self.size + 1, 0)  # the shingles that hold word w start at first .. w
        last = np.minimum(words, len(shared) - 1) + 1
        starts, ends = _passages(count[np.maximum(last, first)] > count[first], self.passage_words)
        passage_bytes = int((self.ends[ends - 1] - self.starts[starts]).sum())
        marks = np.zeros(len(self.starts) + 1, dtype=np.int64)
        marks[starts] += 1  # passages are apart: no word starts one and ends another
        marks[ends] -= 1
        in_passages = np.concatenate(([0], np.cumsum(np.cumsum(marks)[:-1] > 0)))
        outside = in_passages[self.line_first_words + self.line_sizes] == in_passages[self.line_first_words]
        once = np.bincount(self.lines.order, minlength=len(self.lines.keys))[self.lines.order] == 1
        lines = found_lines[self.lines.order] & outside & once  # a line the split repeats is a heading or a tag
        line_bytes = self.line_ends - self.line_starts
        if len(starts):
            example = (int(self.starts[starts[0]]), int(self.ends[ends[0] - 1]))
        elif lines.any():
            example = (int(self.line_starts[np.argmax(lines)]), int(self.line_ends[np.argmax(lines)]))
        else:
            example = (0, 0)
        return Overlap(split, other, passage_bytes, int(line_bytes[lines].sum()), int(line_bytes.sum()),
                       len(self.data), self.data[example[0]:min(example[1], example[0] + 4 * EXAMPLE_CHARS)]
                       .decode("utf-8", "replace"))


def _passages(covered: np.ndarray, passage_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(first word, word after the last) of each passage: a run of covered words, over gaps of up to GAP_WORDS
    words (a word changed), of ``passage_words`` words or more."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], covered.view(np.int8), [0]))))
    starts, ends = edges[0::2], edges[1::2]
    gap = starts[1:] - ends[:-1] > GAP_WORDS  # a run after a wider gap starts a passage; one after a narrower, not
    starts, ends = starts[np.append(True, gap)[:len(starts)]], ends[np.append(gap, True)[:len(ends)]]
    long = ends - starts >= passage_words
    return starts[long], ends[long]


def overlaps(splits: dict[str, bytes], shingle_words: int = SHINGLE_WORDS,
             passage_words: int = MIN_PASSAGE_WORDS) -> list[Overlap]:
    """The overlap of each pair in :data:`PAIRS` (``splits`` maps train, valid and test to their bytes); the
    defaults are the rule's, others are for measuring it. Linear in the bytes; memory holds the held-out splits'
    words, never train's."""
    held = {split: _HeldOut(splits[split], shingle_words, passage_words)
            for split in dict.fromkeys(s for s, _ in PAIRS)}
    found = {(split, other): held[split].flags() for split, other in PAIRS}
    for other in dict.fromkeys(o for _, o in PAIRS):
        wanted = [(held[split], found[split, o]) for split, o in PAIRS if o == other]
        for chunk in chunks(splits[other], shingle_words):
            for index, (passages, lines) in wanted:
                index.passages.mark(chunk.shingles, passages)
                index.lines.mark(chunk.short_lines, lines)
    return [held[split].overlap(split, other, *found[split, other]) for split, other in PAIRS]


def measure_files(train: str | Path, valid: str | Path, test: str | Path) -> list[Overlap]:
    """:func:`overlaps` of three files, for measuring a corpus (as the figures above were)."""
    return overlaps({"train": Path(train).read_bytes(), "valid": Path(valid).read_bytes(),
                     "test": Path(test).read_bytes()})
