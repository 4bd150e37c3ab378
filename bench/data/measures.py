"""What a run needs to know of each encoded split besides its ids, measured once and cached beside them.

Counting a split's text (the denominators of every metric), checking that the tokenizer gives it back, and for
the train split the characters each token covers (what a character budget counts) decode and walk the whole
split: 5 seconds and 2 GB at enwik8's size, on every start of every run. They depend only on what the encoded ids
depend on (the split file, the tokenizer and the code that encodes), so they are cached under the ids' own key:
``<ids>.measures.json``, and for train ``<ids>.chars.npy`` (in the smallest integer type that holds them) with
its sha256 in the JSON. An entry that is missing, unreadable or does not match is measured again; one that cannot
be written is only measured again next time.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.cache import EncodedCorpus, array_digest, encoded_path
from bench.fileio import atomic_path, write_text_atomic
from tokenizers_study.text import text_counts

VERSION = 1  # of the cached entry's layout
STORED = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int32))  # the smallest that holds the train chars


@dataclass(frozen=True)
class SplitMeasures:
    counts: dict[str, int]  # n_bytes, n_chars, n_words, n_lines of the split's text
    lossless: bool | None  # whether decoding gives the split back (scored splits; None for train)
    chars: np.ndarray | None  # train: the characters of the text each token covers (int32)


def measure_split(encoded: EncodedCorpus, split: str, chars: bool = True) -> SplitMeasures:
    """The split's measures, from the cache or measured now (and cached); ``chars=False``: a cached train split's
    without the characters of its tokens (its counts are all the data's facts need)."""
    ids = encoded.ids[split]
    base = encoded_path(encoded.splits[split], encoded.tokenizer)
    json_path, chars_path = base.with_name(base.name + ".measures.json"), base.with_name(base.name + ".chars.npy")
    cached = _load(json_path, chars_path, len(ids), split == "train", chars)
    if cached is not None:
        return cached
    text = encoded.splits[split].read_text()
    tokenizer = encoded.tokenizer
    if split == "train":
        measures = SplitMeasures(text_counts(text), None, tokenizer.source_char_lengths(text, ids).astype(np.int32))
    else:
        measures = SplitMeasures(text_counts(text), tokenizer.loss_report(text, np.asarray(ids)).lossless, None)
    _save(json_path, chars_path, measures)
    return measures


def _load(json_path: Path, chars_path: Path, n_tokens: int, train: bool, with_chars: bool) -> SplitMeasures | None:
    try:
        entry = json.loads(json_path.read_text())
        if entry.get("version") != VERSION:
            return None
        chars = None
        if train and with_chars:
            chars = np.load(chars_path)
            if chars.dtype not in STORED or chars.shape != (n_tokens,) or array_digest(chars) != entry["chars_sha256"]:
                return None
            chars = chars.astype(np.int32)
        counts = {k: int(entry["counts"][k]) for k in ("n_bytes", "n_chars", "n_words", "n_lines")}
        lossless = entry["lossless"]
        if not train and not isinstance(lossless, bool):
            return None
        return SplitMeasures(counts, lossless, chars)
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        return None


def _save(json_path: Path, chars_path: Path, measures: SplitMeasures) -> None:
    entry = {"version": VERSION, "counts": measures.counts, "lossless": measures.lossless}
    try:
        if measures.chars is not None:
            most = int(measures.chars.max()) if len(measures.chars) else 0
            stored = measures.chars.astype(next(t for t in STORED if most <= np.iinfo(t).max))
            with atomic_path(chars_path) as scratch, open(scratch, "wb") as handle:
                np.save(handle, stored)
            entry["chars_sha256"] = array_digest(stored)
        write_text_atomic(json_path, json.dumps(entry) + "\n")  # after the chars: an entry is whole or absent
    except OSError as exc:  # a read-only data folder: measured again next time
        print(f"could not cache the measures of {json_path.name} ({exc.strerror or exc}); they are measured again "
              f"at the next start", file=sys.stderr)
