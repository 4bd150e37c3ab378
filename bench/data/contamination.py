"""Contamination between a corpus's splits at the level of lines: the share of a held-out split's bytes that lie
in long lines the train split (or the other held-out split) also holds.

A line is compared with its whitespace runs made one space and its ends stripped, so re-spaced or re-ordered
copies are found; lines shorter than :data:`MIN_LINE_BYTES` are left out, as independent texts share headings
and boilerplate (WikiText-2's valid and test share 189 lines such as ``= = Career = =``). The share is weighed
by bytes: a few shared headings weigh little, a pasted article much.

On WikiText-2 (official valid and test; train the mirror's first 565 of its 600 articles) 11.3% of valid's and
12.9% of test's non-blank lines are in train, and valid and test share 189 lines, but all are headings: 9 of
valid's and 6 of test's are of 32 bytes or more, none of 55. The shares are valid in train 0.030%, test in train
0.019%, test in valid and valid in test 0. Hostile corpora built from it: half of test appended to train 49%,
test's lines shuffled or re-spaced into train 98%, test made valid + test 46% (test in valid). :data:`MAX_SHARE`
is over a hundred times WikiText-2's share and under a seventh of the least hostile one's.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MIN_LINE_BYTES = 32  # about six words: shorter lines (headings, markup) recur in independent texts
MAX_SHARE = 0.05
ACCEPTED = "accepted with --allow-overlap"
PAIRS = (("valid", "train"), ("test", "train"), ("test", "valid"), ("valid", "test"))  # (measured, found in)


@dataclass(frozen=True)
class Overlap:
    """How much of ``split`` lies in long lines that ``other`` also holds."""

    split: str
    other: str
    shared_bytes: int
    split_bytes: int
    example: str  # the first such line of ``split``, or ""

    @property
    def share(self) -> float:
        return self.shared_bytes / self.split_bytes if self.split_bytes else 0.0

    @property
    def too_much(self) -> bool:
        return self.share > MAX_SHARE

    def describe(self) -> str:
        shown = self.example if len(self.example) <= 60 else self.example[:57] + "..."
        return (f"{self.share:.1%} of the {self.split} file's bytes are in lines the {self.other} file also holds "
                f"(such as {shown!r})")

    def label(self) -> str:
        """What a corpus accepted with its overlap records in the split's source."""
        return f"{self.describe()}, {ACCEPTED}"

    def refusal(self, corpus: str) -> str:
        why = "a model would be scored on text it was trained on"
        if self.other != "train":
            why = "checkpoints chosen on valid would be scored on text that chose them"
        return (f"corpus {corpus!r}: {self.describe()}, more than {MAX_SHARE:.0%}; {why}: give a {self.split} file "
                f"held out from {self.other}, or study text a model has read with bench data add ... --allow-overlap")


def _normal(raw: bytes) -> bytes:
    line = b" ".join(raw.split())
    if not line.isascii():  # other scripts' spaces (no-break, ideographic) count as whitespace too
        line = " ".join(line.decode("utf-8", "surrogateescape").split()).encode("utf-8", "surrogateescape")
    return line


def _lines(data: bytes) -> Iterator[tuple[bytes, int]]:
    """(normalised line, bytes it takes in ``data``) of each long line, read as a stream: train may be 90 MB."""
    for raw in io.BytesIO(data):
        if len(raw) >= MIN_LINE_BYTES:  # spaces only shorten a line: most short lines need no normalising
            line = _normal(raw)
            if len(line) >= MIN_LINE_BYTES:
                yield line, len(raw)


def overlaps(splits: dict[str, bytes]) -> list[Overlap]:
    """The overlap of each pair in :data:`PAIRS` (``splits`` maps train, valid and test to their bytes). Linear in
    the bytes; memory holds the held-out splits' long lines, never train's."""
    held: dict[str, dict[bytes, int]] = {split: {} for split in dict.fromkeys(s for s, _ in PAIRS)}
    for split, index in held.items():
        for line, size in _lines(splits[split]):
            index[line] = index.get(line, 0) + size
    found: dict[tuple[str, str], set[bytes]] = {pair: set() for pair in PAIRS}
    for other in dict.fromkeys(o for _, o in PAIRS):
        wanted = [(split, found[split, o]) for split, o in PAIRS if o == other]
        for line, _ in _lines(splits[other]):
            for split, shared in wanted:
                if line in held[split]:
                    shared.add(line)
    result = []
    for split, other in PAIRS:
        index, shared = held[split], found[split, other]
        example = next((line for line in index if line in shared), b"")  # the index keeps the file's order
        result.append(Overlap(split, other, sum(index[line] for line in shared), len(splits[split]),
                              example.decode("utf-8", "replace")))
    return result


def measure_files(train: str | Path, valid: str | Path, test: str | Path) -> list[Overlap]:
    """:func:`overlaps` of three files, for measuring a corpus (as WikiText-2's figures above were)."""
    return overlaps({"train": Path(train).read_bytes(), "valid": Path(valid).read_bytes(),
                     "test": Path(test).read_bytes()})
