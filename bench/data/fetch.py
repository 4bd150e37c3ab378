"""Fetching a registry corpus: from a mirror folder, an explicit file or the official download.

Every file is checked against its official size and checksum (see
:mod:`bench.data.integrity`); one that does not match is refused unless
``allow_unverified`` is set, and is then recorded with ``verified: false`` so
that everything computed from it can say so. Files are only moved into place
once every requested split has been obtained and checked, so a refused fetch
leaves nothing half-written.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bench.data.corpora import SPLITS, CorpusSpec, SplitSource, get_corpus
from bench.data.integrity import CheckResult, check_file, file_problem, text_problem
from bench.data.manifest import (STATUS_OFFICIAL, STATUS_UNVERIFIED, SplitRecord, corpus_dir, read_manifest,
                                 timestamp, write_manifest)
from bench.data.paths import resolve_data_dir, resolve_mirror
from bench.errors import BenchError
from bench.fileio import sha256_file


def warn(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass
class Obtained:
    """A member file obtained into a scratch folder, with how it was checked."""

    path: Path
    source: str
    check: CheckResult


def _mirror_candidates(mirror: Path, spec: CorpusSpec, source: SplitSource) -> list[Path]:
    paths = [mirror / source.member, mirror / spec.name / source.filename, mirror / source.filename]
    return list(dict.fromkeys(paths))


def _archive_candidates(mirror: Path, spec: CorpusSpec) -> list[Path]:
    assert spec.archive is not None
    return list(dict.fromkeys([mirror / spec.archive.filename, mirror / spec.name / spec.archive.filename]))


def _first_existing(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


class _Fetcher:
    """Obtains members for one fetch call, opening each archive at most once."""

    def __init__(self, spec: CorpusSpec, data_dir: Path, scratch: Path, mirror: Path | None,
                 allow_unverified: bool, download: bool):
        self.spec = spec
        self.data_dir = data_dir
        self.scratch = scratch
        self.mirror = mirror
        self.allow_unverified = allow_unverified
        self.download = download
        self._archive: tuple[Path, CheckResult] | None = None
        self._members: dict[str, Obtained] = {}

    def accept(self, check: CheckResult) -> None:
        """Refuse a file that failed its check unless unverified data is allowed; an empty one always."""
        if check.ok:
            return
        if check.size == 0:
            raise BenchError(f"{check.problem.split(' is not the official file')[0]} is empty; a corpus split "
                             f"must hold text")
        if not self.allow_unverified:
            raise BenchError(f"{check.problem}. Refused; pass --allow-unverified to accept it "
                             f"(everything computed from it is then labelled verified: false)")
        warn(f"WARNING: {check.problem}.\nWARNING: accepted because of --allow-unverified; "
             f"everything computed from it is labelled verified: false.")

    def _corrupt(self, archive_path: Path, why: str):
        mine = self.mirror is not None and archive_path.parent.resolve() == self.mirror.resolve()
        fix = ("replace it with the official archive, or fetch without --mirror to download it" if mine
               else "delete it and fetch again")
        raise BenchError(f"{archive_path} is corrupt ({why}); {fix}")

    def loose(self, path: Path, source: SplitSource, origin: str) -> Obtained:
        check = check_file(path, source.check, str(path))
        self.accept(check)
        return Obtained(path, f"{origin} {path}", check)

    def member(self, split: str, source: SplitSource, explicit: Path | None) -> Obtained:
        if explicit is not None:
            problem = file_problem(explicit)
            if problem:
                raise BenchError(f"--file {split}={explicit} {problem}; give a text file")
            problem = text_problem(explicit.read_bytes())
            if problem:
                raise BenchError(f"--file {split}={explicit} {problem}: a corpus split must hold text")
            size = explicit.stat().st_size
            if source.byte_range is not None and not len(range(size)[slice(*source.byte_range)]):
                start, stop = ("" if bound is None else bound for bound in source.byte_range)
                raise BenchError(f"{self.spec.name} {split}: --file {explicit} has {size:,} bytes, too few for this "
                                 f"split, which is cut from the whole file (bytes [{start}:{stop}] as a Python "
                                 f"slice); give the whole {self.spec.name} file, or add your own corpus with bench "
                                 f"data add")
            return self.loose(explicit, source, "file")
        if source.member in self._members:
            return self._members[source.member]
        if self.mirror is not None:
            obtained = self.from_mirror(split, source)
        elif self.download:
            archive_path, url = self.fetch_archive()
            obtained = self.from_archive(archive_path, f"downloaded from {url}:", source)
        else:
            raise BenchError(f"{self.spec.name} {split}: no mirror given and downloads are off; "
                             f"pass --mirror DIR or --file {split}=PATH")
        self._members[source.member] = obtained
        return obtained

    def from_mirror(self, split: str, source: SplitSource) -> Obtained:
        """A loose file with an official checksum is used as is; otherwise the archive is preferred,
        because extracting from a verified archive verifies the file."""
        assert self.mirror is not None
        loose_candidates = _mirror_candidates(self.mirror, self.spec, source)
        loose = _first_existing(loose_candidates)
        archive = _first_existing(_archive_candidates(self.mirror, self.spec)) if self.spec.archive else None
        checkable = source.check is not None and source.check.has_checksum()
        if loose is not None and (checkable or archive is None):
            return self.loose(loose, source, "mirror")
        if archive is not None:
            return self.from_archive(archive, "mirror archive", source)
        looked = ", ".join(str(p) for p in loose_candidates)
        archive_name = f" or {self.spec.archive.filename}" if self.spec.archive else ""
        raise BenchError(
            f"{self.spec.name} {split}: {source.filename} not found in mirror {self.mirror} "
            f"(looked for {looked}{archive_name}); pass --file {split}=PATH to use another file"
        )

    def fetch_archive(self) -> tuple[Path, str]:
        """The official archive in data/downloads, downloaded unless a verified copy is there."""
        archive = self.spec.archive
        if archive is None:
            raise BenchError(f"{self.spec.name} has no official archive to download")
        target = self.data_dir / "downloads" / archive.filename
        if target.is_file() and check_file(target, archive.check, str(target)).ok:
            return target, "an earlier download"
        errors = []
        for url in archive.urls:
            tmp = self.scratch / (archive.filename + ".part")
            try:
                warn(f"downloading {url} ({archive.check.size / 1e6:.1f} MB)")
                _download(url, tmp)
            except OSError as exc:
                errors.append(f"{url}: {exc}")
                continue
            if not check_file(tmp, archive.check, url).ok:
                return tmp, url  # left in the scratch folder: a bad archive is never kept
            target.parent.mkdir(parents=True, exist_ok=True)  # only for a verified archive: no empty folder
            os.replace(tmp, target)
            return target, url
        raise BenchError(
            f"could not download {archive.filename} ({'; '.join(errors)}); "
            f"without internet, pass --mirror DIR holding the archive or its extracted files"
        )

    def from_archive(self, archive_path: Path, origin: str, source: SplitSource) -> Obtained:
        archive = self.spec.archive
        assert archive is not None
        if self._archive is None or self._archive[0] != archive_path:
            if not zipfile.is_zipfile(archive_path):  # before any warning about its checksum
                self._corrupt(archive_path, "not a zip file")
            check = check_file(archive_path, archive.check, str(archive_path))
            self.accept(check)
            self._archive = (archive_path, check)
        archive_check = self._archive[1]
        out = self.scratch / source.member.replace("/", "__")
        try:
            with zipfile.ZipFile(archive_path) as zf, zf.open(source.member) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)  # zipfile raises on a CRC32 mismatch
        except KeyError:
            raise BenchError(f"{archive_path} has no member {source.member}; it is not the official archive") from None
        except (zipfile.BadZipFile, OSError) as exc:
            self._corrupt(archive_path, str(exc))
        if archive_check.ok:
            # Member checks are still applied where the registry has them.
            member_check = check_file(out, source.check, f"{source.member} in {archive_path}")
            if source.check is None or not source.check.has_checksum():
                member_check = CheckResult(True, member_check.size, member_check.sha256,
                                           "archive sha256+member crc32")
            self.accept(member_check)
        else:
            member_check = CheckResult(False, out.stat().st_size, sha256_file(out), "", archive_check.problem)
        return Obtained(out, f"{origin} {archive_path}:{source.member}", member_check)


def _download(url: str, dest: Path) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "tokenization-bench"})
    with urllib.request.urlopen(request, timeout=60) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)


def _cut(src: Path, byte_range: tuple[int | None, int | None], dest: Path) -> None:
    data = src.read_bytes()
    start, stop = byte_range
    dest.write_bytes(data[slice(start, stop)])


def fetch(
    name: str,
    data_dir: str | Path | None = None,
    mirror: str | Path | None = None,
    allow_unverified: bool = False,
    files: dict[str, str | Path] | None = None,
    splits: tuple[str, ...] = SPLITS,
    download: bool = True,
) -> dict[str, SplitRecord]:
    """Obtain, check and install the given splits of a registry corpus."""
    spec = get_corpus(name)
    data_dir = resolve_data_dir(data_dir)
    mirror_path = resolve_mirror(mirror)
    files = {k: Path(v) for k, v in (files or {}).items()}
    for split in list(splits) + list(files):
        if split not in spec.splits:
            raise BenchError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
    splits = tuple(dict.fromkeys(list(splits) + list(files)))
    if not splits:
        raise BenchError(f"no split to fetch; give --splits with some of {', '.join(SPLITS)}")
    target = corpus_dir(data_dir, name)
    in_the_way = [target] if target.exists() and not target.is_dir() else [
        target / spec.split_filename(s) for s in splits if (target / spec.split_filename(s)).is_dir()]
    if in_the_way:  # checked before any work: the corpus folder or a split's file would be a folder or a file
        raise BenchError(f"{in_the_way[0]} is in the way ({'a file' if in_the_way[0].is_file() else 'a folder'} where "
                         f"the corpus {'folder' if in_the_way[0] == target else 'file'} goes); move it away")
    created = not data_dir.exists()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f".fetch-{name}-", dir=data_dir) as tmp:
            fetcher = _Fetcher(spec, data_dir, Path(tmp), mirror_path, allow_unverified, download)
            staged = {split: _stage(fetcher, split, files.get(split)) for split in splits}
            # Everything obtained and checked: only now touch the corpus folder.
            return _install(data_dir, name, staged)
    except BaseException:
        if created and not any(data_dir.iterdir()):  # a failed fetch leaves no empty data folder behind
            data_dir.rmdir()
        raise


def _install(data_dir: Path, name: str, staged: dict[str, tuple[Path, SplitRecord]]) -> dict[str, SplitRecord]:
    target_dir = corpus_dir(data_dir, name)
    target_dir.mkdir(parents=True, exist_ok=True)
    records = read_manifest(data_dir, name)
    for split, (path, record) in staged.items():
        os.replace(path, target_dir / record.file)
        records[split] = record
    write_manifest(data_dir, name, records)
    return {s: records[s] for s in staged}


def _stage(fetcher: _Fetcher, split: str, explicit: Path | None) -> tuple[Path, SplitRecord]:
    """One split obtained, cut if need be, in the scratch folder, with its record."""
    source = fetcher.spec.splits[split]
    got = fetcher.member(split, source, explicit)
    out = fetcher.scratch / f"split.{split}"
    if source.byte_range is not None:
        _cut(got.path, source.byte_range, out)
        size, sha = out.stat().st_size, sha256_file(out)
    elif got.path.parent == fetcher.scratch:
        out = got.path
        size, sha = got.check.size, got.check.sha256
    else:
        shutil.copyfile(got.path, out)
        size, sha = got.check.size, got.check.sha256
    if size == 0:
        raise BenchError(f"{fetcher.spec.name} {split}: {got.source} is empty; a corpus split must hold text")
    return out, SplitRecord(
        file=fetcher.spec.split_filename(split),
        size=size,
        sha256=sha,
        status=STATUS_OFFICIAL if got.check.ok else STATUS_UNVERIFIED,
        source=got.source,
        verified_by=got.check.how if got.check.ok else "",
        problem=got.check.problem,
        byte_range=list(source.byte_range) if source.byte_range else None,
        fetched_at=timestamp(),
    )
