"""Corpora on disk: fetch (download or mirror), verify, list and load.

Layout of the data folder (``--data-dir``, ``$BENCH_DATA_DIR``, default ``./data``)::

    data/<corpus>/<split file>        e.g. data/wikitext-2/wiki.valid.tokens
    data/<corpus>/manifest.json       one record per split: size, sha256, verified, source
    data/downloads/<archive>          official archives fetched from the network
    data/cache/...                    trained tokenizers and encoded splits (bench.cache)

A split is *verified* when it matches the official size and checksum (or was
extracted from an official archive whose sha256 matched, zipfile checking the
member's CRC32). Anything else is refused unless ``allow_unverified`` is set,
and is then recorded with ``verified: false`` so that everything computed from
it can say so. Files are only moved into place once every requested split has
been obtained and checked, so a refused fetch leaves nothing half-written.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.corpora import REGISTRY, SPLITS, CorpusSpec, FileCheck, SplitSource, get_corpus
from bench.errors import BenchError
from bench.fileio import crc32_file, sha256_bytes, sha256_file, write_bytes_atomic, write_json_atomic

MANIFEST = "manifest.json"
STATUS_OFFICIAL = "official"
STATUS_UNVERIFIED = "unverified"
STATUS_USER = "user"


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    return Path(data_dir or os.environ.get("BENCH_DATA_DIR") or "data")


def resolve_mirror(mirror: str | Path | None = None) -> Path | None:
    value = mirror or os.environ.get("BENCH_DATA_MIRROR")
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise BenchError(f"mirror folder {path} does not exist; pass --mirror DIR with the corpus files or archives")
    return path


def warn(message: str) -> None:
    print(message, file=sys.stderr)


# --------------------------------------------------------------------------- checks


@dataclass
class CheckResult:
    ok: bool
    size: int
    sha256: str
    how: str  # what was compared, e.g. "size+sha256"
    problem: str | None = None


def check_file(path: Path, expected: FileCheck | None, label: str) -> CheckResult:
    """Compare a file with its official size and checksums."""
    size = path.stat().st_size
    sha = sha256_file(path)
    if expected is None or not expected.has_checksum():
        return CheckResult(
            False, size, sha, "", f"{label}: no official checksum is recorded for this file, so it cannot be verified"
        )
    actual = {"size": size, "sha256": sha}
    compared = ["size"]
    mismatches = []
    if size != expected.size:
        mismatches.append("size")
    for algo in ("sha256", "crc32", "md5"):
        want = getattr(expected, algo)
        if want is None:
            continue
        if algo not in actual:
            actual[algo] = crc32_file(path) if algo == "crc32" else _md5_file(path)
        compared.append(algo)
        if actual[algo] != want:
            mismatches.append(algo)
    if not mismatches:
        return CheckResult(True, size, sha, "+".join(compared))
    want_text = ", ".join(
        f"{k} {getattr(expected, k):,}" if k == "size" else f"{k} {getattr(expected, k)}" for k in compared
    )
    got_text = ", ".join(f"{k} {actual[k]:,}" if k == "size" else f"{k} {actual[k]}" for k in compared)
    if "sha256" not in compared:
        got_text += f" (sha256 {sha})"
    return CheckResult(
        False,
        size,
        sha,
        "+".join(compared),
        f"{label} is not the official file: expected {want_text}; got {got_text}",
    )


def _md5_file(path: Path) -> str:
    import hashlib

    h = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- manifest


@dataclass
class SplitRecord:
    """What the data folder knows about one split file."""

    file: str
    size: int
    sha256: str
    status: str  # official | unverified | user
    source: str
    verified_by: str = ""
    problem: str | None = None
    byte_range: list | None = None
    fetched_at: str = ""

    @property
    def verified(self) -> bool:
        return self.status == STATUS_OFFICIAL

    def to_json(self) -> dict:
        record = asdict(self)
        record["verified"] = self.verified
        return record

    @classmethod
    def from_json(cls, data: dict) -> "SplitRecord":
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**fields)


def corpus_dir(data_dir: Path, name: str) -> Path:
    return data_dir / name


def read_manifest(data_dir: Path, name: str) -> dict[str, SplitRecord]:
    path = corpus_dir(data_dir, name) / MANIFEST
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {split: SplitRecord.from_json(rec) for split, rec in data["splits"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} is corrupt ({exc}); delete it and fetch the corpus again") from None


def write_manifest(data_dir: Path, name: str, records: dict[str, SplitRecord], user: bool = False) -> None:
    ordered = {s: records[s].to_json() for s in SPLITS if s in records}
    write_json_atomic(
        corpus_dir(data_dir, name) / MANIFEST,
        {"corpus": name, "user_corpus": user, "splits": ordered},
    )


def known_corpora(data_dir: Path) -> list[str]:
    """Registry corpora plus user corpora present in the data folder."""
    names = list(REGISTRY)
    if data_dir.is_dir():
        for path in sorted(data_dir.iterdir()):
            if path.name not in REGISTRY and (path / MANIFEST).exists():
                names.append(path.name)
    return names


def is_user_corpus(data_dir: Path, name: str) -> bool:
    path = corpus_dir(data_dir, name) / MANIFEST
    if name in REGISTRY or not path.exists():
        return False
    return bool(json.loads(path.read_text()).get("user_corpus"))


# --------------------------------------------------------------------------- obtaining members


@dataclass
class Obtained:
    """A member file obtained into a scratch folder, with how it was checked."""

    path: Path
    source: str
    check: CheckResult


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
        """Refuse a file that failed its check unless unverified data is allowed."""
        if check.ok:
            return
        if not self.allow_unverified:
            raise BenchError(f"{check.problem}. Refused; pass --allow-unverified to accept it "
                             f"(everything computed from it is then labelled verified: false)")
        warn(f"WARNING: {check.problem}.\nWARNING: accepted because of --allow-unverified; "
             f"everything computed from it is labelled verified: false.")

    def loose(self, path: Path, source: SplitSource, origin: str) -> Obtained:
        check = check_file(path, source.check, str(path))
        self.accept(check)
        return Obtained(path, f"{origin} {path}", check)

    def member(self, split: str, source: SplitSource, explicit: Path | None) -> Obtained:
        if explicit is not None:
            if not explicit.is_file():
                raise BenchError(f"--file {split}={explicit}: no such file")
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
        target.parent.mkdir(parents=True, exist_ok=True)
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
            raise BenchError(f"{archive_path} is corrupt ({exc}); delete it and fetch again") from None
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
    data_dir.mkdir(parents=True, exist_ok=True)
    target_dir = corpus_dir(data_dir, name)
    with tempfile.TemporaryDirectory(prefix=f".fetch-{name}-", dir=data_dir) as tmp:
        scratch = Path(tmp)
        fetcher = _Fetcher(spec, data_dir, scratch, mirror_path, allow_unverified, download)
        staged: dict[str, tuple[Path, SplitRecord]] = {}
        for split in splits:
            source = spec.splits[split]
            got = fetcher.member(split, source, files.get(split))
            out = scratch / f"split.{split}"
            if source.byte_range is not None:
                _cut(got.path, source.byte_range, out)
                size, sha = out.stat().st_size, sha256_file(out)
            elif got.path.parent == scratch:
                out = got.path
                size, sha = got.check.size, got.check.sha256
            else:
                shutil.copyfile(got.path, out)
                size, sha = got.check.size, got.check.sha256
            staged[split] = (out, SplitRecord(
                file=spec.split_filename(split),
                size=size,
                sha256=sha,
                status=STATUS_OFFICIAL if got.check.ok else STATUS_UNVERIFIED,
                source=got.source,
                verified_by=got.check.how if got.check.ok else "",
                problem=got.check.problem,
                byte_range=list(source.byte_range) if source.byte_range else None,
                fetched_at=_now(),
            ))
        # Everything obtained and checked: only now touch the corpus folder.
        target_dir.mkdir(parents=True, exist_ok=True)
        records = read_manifest(data_dir, name)
        for split, (path, record) in staged.items():
            os.replace(path, target_dir / record.file)
            records[split] = record
        write_manifest(data_dir, name, records)
    return {s: records[s] for s in splits}


# --------------------------------------------------------------------------- user corpora


def _check_user_name(data_dir: Path, name: str) -> None:
    if name in REGISTRY:
        raise BenchError(f"{name!r} is a registry corpus; give your own corpus another name")
    if not name or "/" in name or name.startswith("."):
        raise BenchError(f"bad corpus name {name!r}; use letters, digits, '-' and '_'")
    target = corpus_dir(data_dir, name)
    if target.exists() and not is_user_corpus(data_dir, name):
        raise BenchError(f"{target} exists and is not a user corpus; choose another name")


def _install_user_corpus(name: str, contents: dict[str, tuple[bytes, str]], data_dir: Path,
                         note: str) -> dict[str, SplitRecord]:
    """Write a user corpus (split -> (bytes, where they came from)); a no-op when identical files are there."""
    target = corpus_dir(data_dir, name)
    existing = read_manifest(data_dir, name)
    digests = {split: sha256_bytes(data) for split, (data, _) in contents.items()}
    if (existing and all(s in existing and existing[s].sha256 == digests[s] for s in SPLITS)
            and all((target / existing[s].file).is_file() for s in SPLITS)):
        return existing
    records = {}
    for split in SPLITS:
        data, source = contents[split]
        dest = target / f"{split}.txt"
        write_bytes_atomic(dest, data)
        records[split] = SplitRecord(file=dest.name, size=len(data), sha256=digests[split], status=STATUS_USER,
                                     source=source, fetched_at=_now(), problem=note)
    write_manifest(data_dir, name, records, user=True)
    return records


def add_user_corpus(name: str, paths: dict[str, str | Path], data_dir: str | Path | None = None
                    ) -> dict[str, SplitRecord]:
    """Copy the user's own train/valid/test files into the data folder, recorded by sha256."""
    data_dir = resolve_data_dir(data_dir)
    _check_user_name(data_dir, name)
    missing = [s for s in SPLITS if s not in paths]
    if missing:
        raise BenchError(f"corpus {name!r} needs train, valid and test files; missing: {', '.join(missing)}")
    for split, path in paths.items():
        if split not in SPLITS:
            raise BenchError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
        if not Path(path).is_file():
            raise BenchError(f"{split} file {path} does not exist")
    contents = {s: (Path(paths[s]).read_bytes(), f"user file {Path(paths[s]).resolve()}") for s in SPLITS}
    return _install_user_corpus(name, contents, data_dir,
                                "user corpus: identified by its sha256, there is no official copy to verify against")


def add_prefix_corpus(name: str, source: str, sizes: dict[str, int], data_dir: str | Path | None = None
                      ) -> dict[str, SplitRecord]:
    """A small corpus cut from the start of each split of a fetched corpus (at a line boundary).

    Useful for quick studies and tests; it is a user corpus (not an official split),
    and its record names the source file and its sha256.
    """
    data_dir = resolve_data_dir(data_dir)
    _check_user_name(data_dir, name)
    contents = {}
    for split in SPLITS:
        size = sizes.get(split)
        if not isinstance(size, int) or size < 1:
            raise BenchError(f"corpus {name!r}: {split}_bytes must be a positive integer")
        original = open_split(source, split, data_dir)
        data = original.path.read_bytes()[:size]
        cut = data.rfind(b"\n") + 1 if len(data) == size and b"\n" in data else len(data)
        contents[split] = (data[:cut], f"first {cut:,} bytes of {source} {split} (sha256 {original.sha256}, "
                                       f"{original.status})")
    return _install_user_corpus(name, contents, data_dir,
                                f"derived corpus: a prefix of {source}, not an official split")


# --------------------------------------------------------------------------- verify, list, load


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
    if name and name not in REGISTRY and not (corpus_dir(data_dir, name) / MANIFEST).exists():
        get_corpus(name)  # raises the unknown-corpus message
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
                rows.append(VerifyRow(corpus, split, record.file, "missing", False, f"{path} is missing; fetch again"))
                continue
            size, sha = path.stat().st_size, sha256_file(path)
            ok = True
            message = "matches the fetched file"
            if (size, sha) != (record.size, record.sha256):
                ok = False
                message = (f"{path} changed since it was fetched: expected size {record.size:,}, sha256 "
                           f"{record.sha256}; got size {size:,}, sha256 {sha}; now marked unverified")
                record.status = STATUS_UNVERIFIED if record.status != STATUS_USER else STATUS_USER
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
        records = read_manifest(data_dir, corpus)
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

    @property
    def verified(self) -> bool:
        return self.status == STATUS_OFFICIAL

    def read_text(self) -> str:
        from bench.fileio import read_text_exact

        return read_text_exact(self.path)

    def provenance(self) -> dict:
        return {"corpus": self.corpus, "split": self.split, "file": str(self.path), "size": self.size,
                "sha256": self.sha256, "status": self.status, "verified": self.verified}


def open_split(name: str, split: str, data_dir: str | Path | None = None) -> SplitData:
    """Locate a fetched split and re-hash it, so that a changed file is never used silently."""
    data_dir = resolve_data_dir(data_dir)
    if split not in SPLITS:
        raise BenchError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
    records = read_manifest(data_dir, name)
    if not records:
        if name not in REGISTRY:
            get_corpus(name)
        raise BenchError(f"corpus {name!r} is not in {data_dir}; run: bench data fetch {name} --mirror DIR "
                         f"(or set BENCH_DATA_DIR to the folder that has it)")
    record = records.get(split)
    if record is None:
        raise BenchError(f"{name} has no {split} split in {data_dir}; run: bench data fetch {name} --splits {split}")
    path = corpus_dir(data_dir, name) / record.file
    if not path.is_file():
        raise BenchError(f"{path} is missing; run: bench data fetch {name}")
    sha = sha256_file(path)
    if sha != record.sha256:
        raise BenchError(f"{path} changed since it was fetched (sha256 {sha}, recorded {record.sha256}); "
                         f"fetch it again, or run `bench data verify {name}` to keep it as unverified")
    return SplitData(name, split, path, record.size, sha, record.status)
