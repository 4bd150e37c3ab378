"""Trained tokenizers and encoded splits, cached under ``<data-dir>/cache``.

Keys are content hashes, never names or timestamps:

* a trained tokenizer is keyed by its scheme, the sha256 of the train split it
  was trained on, the version of the library that trained it and a hash of the
  scheme's code;
* an encoded split is keyed by the split file's sha256, the tokenizer's
  hash (the sha256 of its saved file; for a pretrained tokenizer, of its own
  file) and the same hash of the code that encodes with it;
* a pretrained tokenizer (``hf:PATH``, ``spm:PATH``) is read from its file.

Split files are re-hashed every time they are opened (``open_split``), so a
changed file or tokenizer can never pick up a stale cache entry. Encoded
splits are ``.npy`` arrays opened memory-mapped, so a second run starts at once.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.corpora import SPLITS
from bench.data.store import SplitData, open_split
from bench.fileio import atomic_path, new_folders_for, write_bytes_atomic, write_text_atomic
from tokenizers_study import (FAMILIES, SchemeSpec, Tokenizer, TokenizerError, load_tokenizer, parse_scheme,
                              train_tokenizer)
from tokenizers_study import base as tokenizer_base
from tokenizers_study import text as tokenizer_text


def _trainer_fingerprint(family: str) -> str:
    """The library version and a hash of the scheme's own code (its module, the shared base and the
    text conventions it encodes with), so that a change to how a scheme is trained or encodes never
    reuses a tokenizer trained before it."""
    from importlib.metadata import version

    library = FAMILIES[family].library
    lib = f"{library}-{version(library)}" if library else "builtin"
    code = hashlib.sha256()
    for module in (inspect.getmodule(FAMILIES[family]), tokenizer_base, tokenizer_text):
        code.update(Path(inspect.getsourcefile(module)).read_bytes())
    return f"{lib}-{code.hexdigest()[:12]}"


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def cached_tokenizer(scheme: str | SchemeSpec, corpus: str, data_dir: str | Path | None = None,
                     train: SplitData | None = None) -> Tokenizer:
    """The scheme (its name, or the spec a run parsed it into) trained on ``corpus``'s train split (``train`` if
    opened already), from the cache or trained now."""
    spec = scheme if isinstance(scheme, SchemeSpec) else parse_scheme(scheme)
    if FAMILIES[spec.family].pretrained:  # loaded from its file, never trained: nothing to cache
        return FAMILIES[spec.family].load(spec)
    train = train or open_split(corpus, "train", data_dir)
    safe = spec.name.replace(":", "-")
    path = (train.data_dir / "cache" / "tokenizers" / corpus /
            f"{safe}.{train.sha256[:16]}.{_trainer_fingerprint(spec.family)}.json")
    if path.is_file():
        try:
            return load_tokenizer(path)
        except TokenizerError as exc:  # a cache is rebuilt, never trusted
            _log(f"{path} is not a readable tokenizer ({exc}); training it again")
    _log(f"training {spec.name} on {corpus} train ({train.size / 1e6:.1f} MB)")
    tokenizer = train_tokenizer(spec, train.read_text())
    sample = getattr(tokenizer, "sample", None)
    if sample:
        _log(f"{spec.name} was trained on every {sample['every_kth_line']}th line of train ({sample['lines']:,} of "
             f"{sample['of_lines']:,} lines, {sample['chars']:,} characters), as its state records")
    write_bytes_atomic(path, tokenizer.to_bytes())
    return tokenizer


def encoded_path(split: SplitData, tokenizer: Tokenizer) -> Path:
    """In the split's data folder, keyed by its sha256, the tokenizer's hash and the code that encodes with it."""
    name = f"{split.split}.{split.sha256[:20]}.{tokenizer.hash[:20]}.{_trainer_fingerprint(tokenizer.spec.family)}.npy"
    return split.data_dir / "cache" / "encoded" / split.corpus / name


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.int32)


def save_encoded(split: SplitData, tokenizer: Tokenizer, ids: np.ndarray) -> Path:
    """Cache a split's ids unless a readable copy is there already (a cache is never rewritten needlessly,
    so a finished cache works on a read-only data folder)."""
    path = encoded_path(split, tokenizer)
    if _load_encoded(path, tokenizer) is None:
        _write_encoded(path, tokenizer, ids)
    return path


def _write_encoded(path: Path, tokenizer: Tokenizer, ids: np.ndarray) -> None:
    ids = np.ascontiguousarray(np.asarray(ids).astype(id_dtype(tokenizer.vocab_size)))
    try:
        with new_folders_for(path):  # the cache folders this write makes: none is left empty if it fails
            try:
                with atomic_path(path) as tmp:
                    with open(tmp, "wb") as f:
                        np.save(f, ids)
                # written after the ids: an entry without its digest (an interrupted write) is encoded again
                write_text_atomic(_digest_path(path), f"{array_digest(ids)} {len(ids)}\n")
            except OSError:
                path.unlink(missing_ok=True)  # ids without their digest would only be encoded again
                raise
    except OSError as exc:
        if exc.errno is None:  # numpy's short write ("N requested and M written"): the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
        raise


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def array_digest(array: np.ndarray) -> str:
    """sha256 of an array's bytes: what a cached array is checked against when it is read back."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()


def _load_encoded(path: Path, tokenizer: Tokenizer) -> np.ndarray | None:
    """The cached ids, memory-mapped; None when absent or not trustworthy (no digest, or ids that do not match
    the digest written with them: cut short, edited, garbage; ids outside the vocabulary), so that they are
    encoded again."""
    if not path.is_file():
        return None
    try:
        ids = np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as exc:
        _log(f"{path} is not a readable array ({exc}); encoding again")
        return None
    outside = len(ids) and ids.max() >= tokenizer.vocab_size
    if ids.ndim != 1 or ids.dtype != id_dtype(tokenizer.vocab_size) or outside:
        _log(f"{path} does not hold ids of {tokenizer.spec.name}; encoding again")
        return None
    try:
        recorded = _digest_path(path).read_text().split()
    except OSError:
        recorded = []
    if recorded != [array_digest(ids), str(len(ids))]:
        _log(f"{path} does not match the digest written with it (cut short or changed); encoding again")
        return None
    return ids


def encoded_split(tokenizer: Tokenizer, split: SplitData) -> np.ndarray:
    """Token ids of a split (memory-mapped, read-only), encoding and caching them on first use."""
    path = encoded_path(split, tokenizer)
    ids = _load_encoded(path, tokenizer)
    if ids is None:
        _log(f"encoding {split.corpus} {split.split} with {tokenizer.spec.name}")
        _write_encoded(path, tokenizer, tokenizer.encode(split.read_text()))
        ids = np.load(path, mmap_mode="r")
    return ids


@dataclass
class EncodedCorpus:
    """A corpus under one tokenization: the tokenizer, and each split's ids and provenance."""

    corpus: str
    tokenizer: Tokenizer
    splits: dict[str, SplitData]
    ids: dict[str, np.ndarray]

    @property
    def verified(self) -> bool:
        return all(s.verified for s in self.splits.values())


def encode_corpus(corpus: str, scheme: str | SchemeSpec, data_dir: str | Path | None = None,
                  splits: tuple[str, ...] = SPLITS) -> EncodedCorpus:
    opened = {s: open_split(corpus, s, data_dir) for s in dict.fromkeys(("train",) + tuple(splits))}
    tokenizer = cached_tokenizer(scheme, corpus, train=opened["train"])
    ids = {s: encoded_split(tokenizer, opened[s]) for s in splits}
    return EncodedCorpus(corpus, tokenizer, {s: opened[s] for s in splits}, ids)
