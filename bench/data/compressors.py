"""Classical compressors as baselines: bits per byte of a split, alone (cold) and given the train split (primed).

A language model's bits per byte are a code length; a general-purpose compressor
gives one too. A model that does not beat ``xz`` on the same bytes has learned
less about the text than a dictionary coder, and its differences from other models
say little about tokenization. Each method is run two ways:

* **cold**: the compressed size of the split alone (headers included), in bits
  per byte of the split;
* **primed**: the bits for the split given the train split, measured the same way
  for every method as size(train + split) - size(train): what the split costs a
  compressor that has read train first. How far train can help is each method's
  own limit, stated in ``priming`` (a deflate window is 32 KiB, so priming gzip
  barely helps; an xz dictionary of 64 MiB holds all of WikiText-2's train).

brotli is not among the methods: its encoder carries a built-in dictionary of about 120 KB of web text (RFC 7932,
appendix A), so its figure for a split "alone" is not that of the split alone. It was also the slowest, 45% of the
baselines' CPU time on WikiText-2, and never the best (primed: 1.885 bits per byte against xz's 1.866).

A split under :data:`MIN_SPLIT_BYTES` gets no bits per byte at all (its compressed
sizes are kept): a container's fixed bytes would be most of the figure.

Results are cached under ``<data-dir>/cache/baselines``, keyed by the sha256 of
the split files and the method table's version, so a changed file is never read
from the cache. An entry is trusted only when it matches the digest written with
it, names the sha256 and size of each split file it was measured on, and every
figure in it follows from its compressed sizes; else it is measured again. A
cache that cannot be written (a read-only or full disk) costs nothing but the
time: the figures are measured and shown, and the output says they were not cached.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from bench.data.corpora import HELD_OUT, SPLITS
from bench.data.store import SplitData, open_split
from bench.errors import BenchError
from bench.fileio import sha256_bytes, write_json_atomic

# Bump when a method or its settings change: cached figures of another version are not reused.
METHODS_VERSION = 3

# A split of fewer bytes gets no bits per byte, cold or primed: a container's fixed bytes (for one byte of input,
# xz -9e writes 60, bzip2 37, gzip 21) would be much of the figure (3 bytes of text: 61 to 160 bits per byte),
# and a primed difference a matter of block rounding. At 4 KiB of text xz's header is about 4% of its output.
MIN_SPLIT_BYTES = 4096


@dataclass(frozen=True)
class Method:
    name: str
    settings: str  # what the figure is, in words a reader can reproduce
    priming: str  # how much of train can help, for this method
    compress: Callable[[bytes], bytes]
    # CPU seconds per MB of WikiText-2 on a 2-core AMD EPYC: the longest compressions are started first, so that the
    # last ones to finish are short and no core waits alone at the end (xz -9e on WikiText-2's train alone takes 7 s)
    seconds_per_mb: float


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=22).compress(data)


def _ppmd(data: bytes) -> bytes:
    import pyppmd

    return pyppmd.compress(data, max_order=PPMD_ORDER, mem_size=PPMD_MEMORY)


# Chosen on WikiText-2 valid among orders 6, 8, 16 and 32 (primed: 1.604, 1.549, 1.530, 1.694 bits per byte;
# order 32 exhausts its memory and restarts). Never chosen on test.
PPMD_ORDER, PPMD_MEMORY = 16, 256 << 20

METHODS = (
    Method("gzip -9", "gzip.compress(level 9, mtime 0): deflate, 10-byte header", "32 KiB window: only the end "
           "of train can help", lambda d: gzip.compress(d, compresslevel=9, mtime=0), 0.06),
    Method("bzip2 -9", "bz2.compress(level 9): 900 kB blocks", "independent 900 kB blocks: train barely helps",
           lambda d: bz2.compress(d, 9), 0.06),
    Method("xz -9e", "lzma.compress(preset 9 | PRESET_EXTREME): LZMA2, 64 MiB dictionary", "the last 64 MiB of "
           "train", lambda d: lzma.compress(d, preset=9 | lzma.PRESET_EXTREME), 0.7),
    Method("zstd -22", "zstandard level 22 (--ultra -22): 128 MiB window", "the last 128 MiB of train", _zstd, 0.7),
    Method("PPMd", f"pyppmd (PPMd var. H) order {PPMD_ORDER}, {PPMD_MEMORY >> 20} MiB model memory",
           f"all of train until the {PPMD_MEMORY >> 20} MiB model is full (then it restarts)", _ppmd, 0.36),
)


@dataclass(frozen=True)
class Baseline:
    method: str
    split: str
    bits_per_byte_cold: float | None  # none for a split under MIN_SPLIT_BYTES
    bits_per_byte_primed: float | None  # none for the train split itself, and for a split under MIN_SPLIT_BYTES
    compressed_bytes_cold: int
    primed_bytes: int | None  # size(train + split) - size(train)
    split_bytes: int
    settings: str
    priming: str

    @property
    def too_small(self) -> bool:
        return self.split_bytes < MIN_SPLIT_BYTES


@dataclass(frozen=True)
class BaselineTable:
    corpus: str
    splits: dict[str, dict]  # split -> {"sha256", "size", "status"}
    baselines: list[Baseline]
    methods_version: int = METHODS_VERSION
    cache: str = field(default="", compare=False)  # whether the figures were read from the cache or cached now

    def best_primed(self, split: str = "test") -> Baseline | None:
        rows = [b for b in self.baselines if b.split == split and b.bits_per_byte_primed is not None]
        return min(rows, key=lambda b: b.bits_per_byte_primed, default=None)

    def to_json(self) -> dict:
        return {"corpus": self.corpus, "splits": self.splits, "methods_version": self.methods_version,
                "baselines": [asdict(b) for b in self.baselines]}

    @classmethod
    def from_json(cls, data: dict) -> "BaselineTable":
        return cls(data["corpus"], data["splits"], [Baseline(**b) for b in data["baselines"]],
                   data["methods_version"])


def _cache_path(data_dir: Path, corpus: str, splits: dict[str, SplitData], measured: tuple[str, ...]) -> Path:
    key = hashlib.sha256(json.dumps({"version": METHODS_VERSION, "splits": {s: d.sha256 for s, d in splits.items()},
                                     "measured": list(measured)}, sort_keys=True).encode()).hexdigest()[:20]
    return data_dir / "cache" / "baselines" / f"{corpus}-{key}.json"


def _digest(entry: dict) -> str:
    return sha256_bytes(json.dumps(entry, sort_keys=True).encode())


def _cached(path: Path, corpus: str, opened: dict[str, SplitData], splits: tuple[str, ...]) -> BaselineTable | None:
    """The cached table, or None when there is none or it is not trustworthy (then it is measured again)."""
    if not path.is_file():
        return None
    methods = {m.name: m for m in METHODS}
    try:
        stored = json.loads(path.read_text())
        digest = stored.pop("sha256", None)
        table = BaselineTable.from_json(stored)
        # every figure recomputed from the entry's sizes and the split files' sizes: an edited figure differs
        rederived = [_baseline(methods[b.method], b.split, opened[b.split].size, b.compressed_bytes_cold,
                               b.primed_bytes) for b in table.baselines]
        measured_on = {s: (d["sha256"], d["size"]) for s, d in table.splits.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # a cache is rebuilt, never trusted
        problem = f"is not a readable baselines table ({exc})"
    else:
        if digest != _digest(stored):
            problem = "does not match the digest written with it (edited or cut short)"
        elif (table.corpus, table.methods_version, measured_on) != (
                corpus, METHODS_VERSION, {s: (d.sha256, d.size) for s, d in opened.items()}):
            problem = "was measured on other files or with other methods"
        elif ([(b.method, b.split) for b in table.baselines] != [(m.name, s) for m in METHODS for s in splits]
              or table.baselines != rederived):
            problem = "holds figures that do not follow from its compressed sizes (edited)"
        else:
            return replace(table, cache=f"read from the cache ({path})")
    print(f"{path} {problem}; measuring again", file=sys.stderr)
    return None


def compressor_baselines(corpus: str, splits: tuple[str, ...] = HELD_OUT, data_dir: str | Path | None = None,
                         progress: bool = False) -> BaselineTable:
    """Every method on each of ``splits`` of a fetched corpus, cold and primed with its train split; cached when
    the data folder can be written (``cache`` of the table says whether it was)."""
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits or len(set(splits)) < len(splits):
        raise BenchError(f"bad --splits {','.join(splits) or '(none)'}; use train, valid or test, comma-separated, "
                         f"each once")
    opened = {s: open_split(corpus, s, data_dir) for s in dict.fromkeys(("train",) + tuple(splits))}
    cache = _cache_path(opened["train"].data_dir, corpus, opened, tuple(splits))
    table = _cached(cache, corpus, opened, tuple(splits))
    if table is not None:
        return table
    if progress:  # minutes on a large train split: say so before the first one
        print(f"measuring compressor baselines of {corpus} ({', '.join(splits)}, primed with train)", file=sys.stderr)
    table = _measure(corpus, opened, tuple(splits), progress)
    entry = table.to_json()
    try:
        write_json_atomic(cache, {**entry, "sha256": _digest(entry)})
    except OSError as exc:  # the figures stand without a cache; they are measured again next time
        note = f"measured now, not cached ({exc.filename or cache}: {exc.strerror or exc})"
        print(f"compressor baselines of {corpus}: {note}", file=sys.stderr)
        return replace(table, cache=note)
    return replace(table, cache=f"measured now, cached in {cache}")


def _measure(corpus: str, opened: dict[str, SplitData], splits: tuple[str, ...], progress: bool) -> BaselineTable:
    """Each compression is a task of a thread pool (the compressors release the GIL): the train split alone,
    each split alone, train followed by each split."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    texts = {s: d.path.read_bytes() for s, d in opened.items()}
    empty = [s for s in splits if not texts[s]]
    if empty:
        raise BenchError(f"{corpus} {empty[0]} is empty: there are no bits per byte to measure; fetch it again")
    jobs = {(m.name, "train"): (m, ("train",)) for m in METHODS}
    for m in METHODS:
        for split in splits:
            jobs[(m.name, split)] = (m, (split,))
            if split != "train":
                jobs[(m.name, "train+" + split)] = (m, ("train", split))
    job_bytes = {key: sum(len(texts[p]) for p in parts) for key, (_, parts) in jobs.items()}
    # the longest first (Method.seconds_per_mb says why)
    jobs = dict(sorted(jobs.items(), key=lambda job: job[1][0].seconds_per_mb * job_bytes[job[0]], reverse=True))
    sizes: dict[tuple[str, str], int] = {}
    workers = max(1, min(4, os.cpu_count() or 1))  # xz -9e alone needs about 700 MB while it compresses
    with ThreadPoolExecutor(workers) as pool, tqdm(
            total=sum(job_bytes.values()), unit="B", unit_scale=True,
            disable=not (progress and sys.stderr.isatty()), desc=f"compressing {corpus}") as bar:
        futures = {pool.submit(lambda m, parts: len(m.compress(b"".join(texts[p] for p in parts))), *job): key
                   for key, job in jobs.items()}
        for future in as_completed(futures):
            key = futures[future]
            sizes[key] = future.result()
            bar.update(job_bytes[key])
    rows = [_baseline(m, split, len(texts[split]), sizes[(m.name, split)],
                      None if split == "train" else sizes[(m.name, "train+" + split)] - sizes[(m.name, "train")])
            for m in METHODS for split in splits]
    described = {s: {"sha256": d.sha256, "size": d.size, "status": d.status} for s, d in opened.items()}
    return BaselineTable(corpus, described, rows)


def _baseline(m: Method, split: str, n: int, cold: int, primed: int | None) -> Baseline:
    """A row from its compressed sizes (of a measurement, or of a cached entry being checked)."""
    if n < MIN_SPLIT_BYTES:
        return Baseline(m.name, split, None, None, cold, primed, n, m.settings, m.priming)
    # Block and header effects can make train + split compress smaller than train: no rate, not a negative one.
    rate = None if primed is None or primed <= 0 else 8 * primed / n
    return Baseline(m.name, split, 8 * cold / n, rate, cold, primed, n, m.settings, m.priming)
