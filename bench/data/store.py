"""Corpora on disk: verify, list and open the splits of the data folder.

Layout of the data folder (``--data-dir``, ``$BENCH_DATA_DIR``, default ``./data``)::

    data/<corpus>/<split file>        e.g. data/wikitext-2/wiki.valid.tokens
    data/<corpus>/manifest.json       one record per split: size, sha256, verified, source
    data/downloads/<archive>          official archives fetched from the network
    data/cache/...                    trained tokenizers and encoded splits (bench.data.cache)

A split is *verified* when it matches the official size and checksum (or was
extracted from an official archive whose sha256 matched, zipfile checking the
member's CRC32). Every split is re-hashed when it is opened, so a file changed
since it was fetched is never used silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.data.corpora import REGISTRY, SPLITS
from bench.data.integrity import check_file
from bench.data.manifest import (MANIFEST, STATUS_OFFICIAL, STATUS_UNVERIFIED, STATUS_USER, corpus_dir,
                                 is_user_corpus, known_corpora, read_manifest, unknown_corpus, write_manifest)
from bench.data.paths import resolve_data_dir
from bench.errors import BenchError
from bench.fileio import sha256_file
from tokenizers_study.text import read_text_exact


@dataclass
class VerifyRow:
    corpus: str
    split: str
    file: str
    status: str
    intact: bool  # the file is byte for byte what was fetched (and, if official, still matches)
    message: str


def verify(name: str | None = None, data_dir: str | Path | None = None) -> list[VerifyRow]:
    """Re-hash every split present and compare with the manifest and the registry.

    A file that changed since it was fetched is marked unverified in the manifest.
    """
    data_dir = resolve_data_dir(data_dir)
    names = [name] if name else known_corpora(data_dir)
    if name and not (corpus_dir(data_dir, name) / MANIFEST).exists():
        if name not in REGISTRY:
            raise unknown_corpus(name, data_dir)
        raise BenchError(f"corpus {name!r} is not in {data_dir}; nothing to verify (fetch it first: "
                         f"bench data fetch {name})")
    rows = []
    for corpus in names:
        records = read_manifest(data_dir, corpus)
        if not records:
            continue
        changed = False
        spec = REGISTRY.get(corpus)
        for split, record in records.items():
            path = corpus_dir(data_dir, corpus) / record.file
            if not path.is_file():
                rows.append(VerifyRow(corpus, split, record.file, "missing", False,
                                      f"{path} is missing; {_get_it_again(data_dir, corpus)}"))
                continue
            size, sha = path.stat().st_size, sha256_file(path)
            ok = True
            message = "matches the fetched file"
            if (size, sha) != (record.size, record.sha256) and record.status == STATUS_USER:
                ok = False  # a user corpus is its files: a changed file is another corpus, not adopted
                message = (f"{path} changed since it was added (size {record.size:,} -> {size:,}, sha256 "
                           f"{record.sha256[:12]}... -> {sha[:12]}...); {_get_it_again(data_dir, corpus)}")
            elif (size, sha) != (record.size, record.sha256):
                ok = False
                message = (f"{path} changed since it was fetched: expected size {record.size:,}, sha256 "
                           f"{record.sha256}; got size {size:,}, sha256 {sha}; now marked unverified")
                record.status = STATUS_UNVERIFIED
                record.problem = message
                record.size, record.sha256 = size, sha
                changed = True
            elif record.status == STATUS_OFFICIAL and spec is not None:
                source = spec.splits[split]
                if source.byte_range is None and source.check is not None and source.check.has_checksum():
                    result = check_file(path, source.check, str(path))
                    ok, message = result.ok, ("matches the official " + result.how) if result.ok else result.problem
                else:
                    message = f"matches the sha256 recorded when it was verified ({record.verified_by})"
            elif record.status != STATUS_OFFICIAL:
                message = record.problem or record.status
            rows.append(VerifyRow(corpus, split, record.file, record.status, ok, message))
        if changed:
            write_manifest(data_dir, corpus, records, user=is_user_corpus(data_dir, corpus))
    return rows


def _get_it_again(data_dir: Path, name: str) -> str:
    """How to get a corpus's files back: a registry corpus is fetched, a user corpus added again."""
    if name in REGISTRY:
        return f"run: bench data fetch {name}"
    return (f"add the corpus again (delete the folder {corpus_dir(data_dir, name)}, then bench data add {name} "
            f"--train ... --valid ... --test ...)")


@dataclass
class ListRow:
    corpus: str
    split: str
    present: bool
    file: str
    size: int | None
    status: str
    verified: bool


def list_corpora(data_dir: str | Path | None = None) -> list[ListRow]:
    data_dir = resolve_data_dir(data_dir)
    rows = []
    for corpus in known_corpora(data_dir):
        try:
            records = read_manifest(data_dir, corpus)
        except BenchError as exc:  # one corpus's broken manifest does not hide the others
            rows.append(ListRow(corpus, "-", False, MANIFEST, None, f"corrupt: {exc}", False))
            continue
        spec = REGISTRY.get(corpus)
        for split in SPLITS:
            record = records.get(split)
            if record is None:
                file = spec.split_filename(split) if spec else f"{split}.txt"
                rows.append(ListRow(corpus, split, False, file, None, "absent", False))
            else:
                present = (corpus_dir(data_dir, corpus) / record.file).is_file()
                rows.append(ListRow(corpus, split, present, record.file, record.size,
                                    record.status if present else "missing", record.verified and present))
    return rows


@dataclass(frozen=True)
class SplitData:
    """One split on disk, checked against its manifest when it was opened."""

    corpus: str
    split: str
    path: Path
    size: int
    sha256: str
    status: str
    data_dir: Path  # the data folder it was opened from, which holds its caches

    @property
    def verified(self) -> bool:
        return self.status == STATUS_OFFICIAL

    def read_text(self) -> str:
        return read_text_exact(self.path)

    def provenance(self) -> dict:
        return {"corpus": self.corpus, "split": self.split, "file": str(self.path), "size": self.size,
                "sha256": self.sha256, "status": self.status, "verified": self.verified}


_HASHED: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256, in this process


def _hash_once(path: Path) -> str:
    """The file's sha256, computed once per process while the file is unchanged (same inode, size and modification
    time to the nanosecond): a run opens its splits several times, a matrix many runs' (every split file of
    enwik8's size costs a third of a second to hash); a new process hashes again."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        _HASHED[key] = sha256_file(path)
    return _HASHED[key]


def open_split(name: str, split: str, data_dir: str | Path | None = None) -> SplitData:
    """Locate a fetched split and check its sha256 (once per process while unchanged), so that a changed file is
    never used silently."""
    data_dir = resolve_data_dir(data_dir)
    if split not in SPLITS:
        raise BenchError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
    records = read_manifest(data_dir, name)
    if not records:
        if name not in REGISTRY:
            raise unknown_corpus(name, data_dir)
        raise BenchError(f"corpus {name!r} is not in {data_dir}; run: bench data fetch {name} --mirror DIR "
                         f"(or set BENCH_DATA_DIR to the folder that has it)")
    record = records.get(split)
    if record is None:
        raise BenchError(f"{name} has no {split} split in {data_dir}; run: bench data fetch {name} --splits {split}")
    path = corpus_dir(data_dir, name) / record.file
    if not path.is_file():
        raise BenchError(f"{path} is missing; {_get_it_again(data_dir, name)}")
    sha = _hash_once(path)
    if sha != record.sha256:
        raise BenchError(f"{path} changed since it was fetched (sha256 {sha}, recorded {record.sha256}); "
                         f"fetch it again, or run `bench data verify {name}` to keep it as unverified")
    return SplitData(name, split, path, record.size, sha, record.status, data_dir)
