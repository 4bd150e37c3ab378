"""The user's own corpora: copied from files, or cut as a prefix of a fetched corpus.

There is no official copy to verify them against, so they are identified by
the sha256 of their files and their records say ``status: user``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from pathlib import Path

from bench.data.contamination import ACCEPTED, overlaps
from bench.data.corpora import HELD_OUT, REGISTRY, SPLITS
from bench.data.integrity import file_problem, text_problem
from bench.data.manifest import (STATUS_USER, SplitRecord, corpus_dir, is_user_corpus, read_manifest, timestamp,
                                 write_manifest)
from bench.data.paths import resolve_data_dir
from bench.data.store import open_split
from bench.errors import BenchError
from bench.fileio import new_folders_for, read_toml, sha256_bytes


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
RESERVED = ("cache", "downloads")  # folders the toolkit keeps in the data folder


def _check_user_name(data_dir: Path, name: str) -> None:
    if name in REGISTRY:
        raise BenchError(f"{name!r} is a registry corpus; give your own corpus another name")
    if not NAME.fullmatch(name):
        raise BenchError(f"bad corpus name {name!r}; use ASCII letters, digits, '-' and '_', starting with a letter "
                         "or digit")
    if name in RESERVED:
        raise BenchError(f"{name!r} is a folder the toolkit keeps in the data folder ({', '.join(RESERVED)}); give "
                         "your corpus another name")
    target = corpus_dir(data_dir, name)
    if target.exists() and not is_user_corpus(data_dir, name):
        raise BenchError(f"{target} exists and is not a user corpus; choose another name")


def _check_replacement(data_dir: Path, name: str, contents: dict[str, tuple[bytes, str]], replace: bool) -> None:
    """A corpus already added with other files is replaced only when asked: runs trained on it name it by its
    files' digests, and would no longer find the text they were trained and scored on."""
    existing = read_manifest(data_dir, name)
    changed = [s for s in SPLITS if existing and s in existing and existing[s].sha256 != sha256_bytes(contents[s][0])]
    if changed and not replace:
        split = changed[0]
        raise BenchError(f"corpus {name!r} is already in {data_dir} with another {', '.join(changed)} (was sha256 "
                         f"{existing[split].sha256[:12]}...; runs trained on it are identified by it): give the new "
                         f"files another corpus name, or put them in its place with bench data add ... --replace")


def _install_user_corpus(name: str, contents: dict[str, tuple[bytes, str]], data_dir: Path,
                         note: str) -> dict[str, SplitRecord]:
    """Write a user corpus (split -> (bytes, where they came from)); a no-op when identical files are there.

    The files and the manifest are written into a scratch folder that then replaces the corpus folder, so
    an interrupted or failed write leaves the previous corpus (or none, and no new data folder) in place.
    """
    target = corpus_dir(data_dir, name)
    existing = read_manifest(data_dir, name)
    digests = {split: sha256_bytes(data) for split, (data, _) in contents.items()}
    if (existing and all(s in existing and existing[s].sha256 == digests[s] for s in SPLITS)
            and all((target / existing[s].file).is_file() for s in SPLITS)):
        accepted = {s: dataclasses.replace(existing[s], source=contents[s][1]) for s in SPLITS
                    if ACCEPTED in contents[s][1] and ACCEPTED not in existing[s].source}
        if accepted:  # added before overlap was a rule, or refused since: its files stay, its manifest says so
            existing = {**existing, **accepted}
            write_manifest(data_dir, name, existing, user=True)
        return existing
    with new_folders_for(target):  # a data folder made for this corpus is removed again if the write fails
        stage = Path(tempfile.mkdtemp(prefix=f".add-{name}-", dir=data_dir))
        umask = os.umask(0)
        os.umask(umask)
        stage.chmod(0o777 & ~umask)  # as mkdir would make it, not mkdtemp's private 0700
        try:
            records = {}
            for split in SPLITS:
                data, source = contents[split]
                (stage / f"{split}.txt").write_bytes(data)
                records[split] = SplitRecord(file=f"{split}.txt", size=len(data), sha256=digests[split],
                                             status=STATUS_USER, source=source, fetched_at=timestamp(), problem=note)
            write_manifest(data_dir, name, records, user=True, folder=stage.name)
            _replace_folder(stage, target)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return records


def _replace_folder(new: Path, target: Path) -> None:
    """Put ``new`` in place of ``target`` (which may not exist) with two renames."""
    old = target.with_name(f".old-{target.name}-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)


def read_user_files(name: str, paths: dict[str, str | Path], data_dir: str | Path | None = None,
                    allow_overlap: bool = False) -> dict[str, tuple[bytes, str]]:
    """The user's train/valid/test files, checked (name, presence, text, held out from train and from each other)
    and read; nothing is written. ``allow_overlap`` accepts a held-out split found inside train, or sharing more
    than bench.data.contamination allows with train or the other held-out split (a study of what a model or
    compressor does with text it has read), and labels its source with the overlap."""
    data_dir = resolve_data_dir(data_dir)
    _check_user_name(data_dir, name)
    missing = [s for s in SPLITS if s not in paths]
    if missing:
        raise BenchError(f"corpus {name!r} needs train, valid and test files; missing: {', '.join(missing)}")
    contents = {}
    for split, path in paths.items():
        if split not in SPLITS:
            raise BenchError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
        problem = file_problem(Path(path))
        if problem:
            raise BenchError(f"{split} file {path} {problem}; give a text file")
        data = Path(path).read_bytes()
        problem = text_problem(data)
        if problem:
            raise BenchError(f"{split} file {path} {problem}: a corpus split must hold text")
        contents[split] = (data, f"user file {Path(path).resolve()}")
    train = contents["train"][0]
    contained = {}
    for split in HELD_OUT:
        if contents[split][0] == train:
            raise BenchError(f"corpus {name!r}: the {split} file is the same text as the train file; a model would be "
                             f"scored on the text it was trained on: give a held-out {split} file")
        if (at := train.find(contents[split][0])) >= 0:
            contained[split] = f"the {split} file is contained in the train file (from byte {at:,})"
            if not (allow_overlap or _accepted_before(data_dir, name, contents, split)):
                raise BenchError(f"corpus {name!r}: {contained[split]}; a model would be scored on text it was "
                                 f"trained on: give a held-out {split} file, or study text a model has read with "
                                 f"bench data add ... --allow-overlap")
    if contents["valid"][0] == contents["test"][0]:
        raise BenchError(f"corpus {name!r}: the valid and test files are the same text; checkpoints chosen on valid "
                         f"would be scored on the text that chose them: give a separate test file")
    for overlap in overlaps({split: data for split, (data, _) in contents.items()}):
        if overlap.too_much:
            if not (allow_overlap or _accepted_before(data_dir, name, contents, overlap.split)):
                raise BenchError(overlap.refusal(name))
            data, source = contents[overlap.split]
            contents[overlap.split] = (data, f"{source}; {overlap.label()}")
    for split, why in contained.items():  # too short to count as a shared passage, it is still labelled
        data, source = contents[split]
        if ACCEPTED not in source:
            contents[split] = (data, f"{source}; {why}, {ACCEPTED}")
    return contents


def _accepted_before(data_dir: Path, name: str, contents: dict[str, tuple[bytes, str]], split: str) -> bool:
    """Whether these very files were added with their overlap accepted: a config's [corpora] table, which has no
    flag, then names them again."""
    existing = read_manifest(data_dir, name)
    return (split in existing and ACCEPTED in existing[split].source
            and all(s in existing and existing[s].sha256 == sha256_bytes(contents[s][0]) for s in SPLITS))


def add_user_corpora(corpora: dict[str, dict[str, str | Path]], data_dir: str | Path | None = None,
                     allow_overlap: bool = False, replace: bool = False) -> dict[str, dict[str, SplitRecord]]:
    """Copy the user's corpora into the data folder, recorded by sha256; every corpus is checked and read
    before any is written, so a bad file installs none of them. One added before with other files is refused
    unless ``replace``."""
    data_dir = resolve_data_dir(data_dir)
    contents = {name: read_user_files(name, paths, data_dir, allow_overlap) for name, paths in corpora.items()}
    for name, files in contents.items():
        _check_replacement(data_dir, name, files, replace)
    note = "user corpus: identified by its sha256, there is no official copy to verify against"
    return {name: _install_user_corpus(name, files, data_dir, note) for name, files in contents.items()}


def add_user_corpus(name: str, paths: dict[str, str | Path], data_dir: str | Path | None = None,
                    allow_overlap: bool = False, replace: bool = False) -> dict[str, SplitRecord]:
    """One user corpus (see :func:`add_user_corpora`)."""
    return add_user_corpora({name: paths}, data_dir, allow_overlap, replace)[name]


def add_prefix_corpus(name: str, source: str, sizes: dict[str, int], data_dir: str | Path | None = None,
                      replace: bool = False) -> dict[str, SplitRecord]:
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
        if size > original.size:  # else the "prefix" would silently be the whole split
            raise BenchError(f"corpus {name!r}: {split}_bytes {size:,} is more than {source}'s {split} split "
                             f"({original.size:,} bytes); give at most that")
        data = original.path.read_bytes()[:size]
        cut = data.rfind(b"\n") + 1 if len(data) == size and b"\n" in data else len(data)
        if not data[:cut].strip():
            raise BenchError(f"corpus {name!r}: the first {size:,} bytes of {source} {split} hold no text line; "
                             f"raise {split}_bytes")
        contents[split] = (data[:cut], f"first {cut:,} bytes of {source} {split} (sha256 {original.sha256}, "
                                       f"{original.status})")
    _check_replacement(data_dir, name, contents, replace)
    return _install_user_corpus(name, contents, data_dir,
                                f"derived corpus: a prefix of {source}, not an official split")


def corpora_from_toml(path: str | Path) -> dict[str, dict[str, Path]]:
    """User corpora of a config file (``[corpora.NAME]`` with train, valid and test paths); relative paths
    are taken from the file's folder."""
    path = Path(path)
    table = read_toml(path).get("corpora", {})
    if not isinstance(table, dict) or not table:
        raise BenchError(f"{path} has no [corpora.NAME] tables; add one with train, valid and test paths")
    corpora = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: corpora.{name} must be a table with train, valid and test paths")
        unknown = sorted(set(entry) - set(SPLITS))
        if unknown:
            raise BenchError(f"{path}: corpora.{name} has unknown keys {unknown}; allowed: {', '.join(SPLITS)}")
        corpora[name] = {split: (path.parent / str(p)) for split, p in entry.items()}
    return corpora
