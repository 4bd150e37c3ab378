"""Registry of the corpora the toolkit knows: official sources and integrity data.

A corpus is plain data: where its official archive lives, the archive's size
and sha256, and for every split the archive member it comes from, plus the
official size and checksum of that file where one is published. Fetching,
verifying and caching live in the rest of :mod:`bench.data`.

Integrity data and where it comes from:

* Archive sizes and sha256 of the four WikiText archives: the HuggingFace
  ``datasets`` loader for WikiText (``dataset_infos.json``, download checksums).
* WikiText-2 (tokenized) file sizes and CRC32: the official archive's directory;
  the sha256 of the valid and test files were computed on byte-identical copies.
* WikiText-2 raw valid and test: size and sha256 of byte-identical copies.
* enwik8: ``enwik8.zip`` is 36,445,475 bytes (sha256 from the ``datasets``
  loader); its member ``enwik8`` is 100,000,000 bytes with the md5
  ``a1fa5ffd...`` published on the Hutter Prize page and the sha256 below.

Files for which no per-file checksum is recorded (WikiText-2 raw train, all of
WikiText-103) are verified through their archive: the archive's sha256 must
match, and ``zipfile`` checks each member's CRC32 while extracting. A loose copy
of such a file cannot be verified and is accepted only with ``--allow-unverified``.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.errors import BenchError
from tokenizers_study.named_registry import Registry

SPLITS = ("train", "valid", "test")
HELD_OUT = SPLITS[1:]  # the splits a model is scored on, never trained on


def check_split(split: object) -> str:
    """A split asked for by name (``--split``, ``split=``)."""
    if split not in SPLITS:
        raise BenchError(f"--split must be {', '.join(SPLITS[:-1])} or {SPLITS[-1]}, not {split!r}")
    return split


@dataclass(frozen=True)
class FileCheck:
    """Official size and checksums of one file; ``None`` where none is published."""

    size: int
    sha256: str | None = None
    crc32: str | None = None
    md5: str | None = None

    def has_checksum(self) -> bool:
        return any((self.sha256, self.crc32, self.md5))


@dataclass(frozen=True)
class Archive:
    """An official archive: its file name, download addresses and integrity data."""

    filename: str
    urls: tuple[str, ...]
    check: FileCheck


@dataclass(frozen=True)
class SplitSource:
    """Where one split comes from.

    ``member`` is the path inside the archive and ``check`` that file's official
    integrity data. A split that is a byte range of a member (enwik8) gives
    ``byte_range`` as ``(start, stop)``, Python slice semantics with negative
    offsets counted from the end; ``check`` then describes the whole member.
    """

    member: str
    check: FileCheck | None = None
    byte_range: tuple[int | None, int | None] | None = None

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    description: str
    archive: Archive | None
    splits: dict[str, SplitSource]
    homepage: str = ""
    licence: str = ""  # the text's terms of use, for an exported model's card (bench export)

    def split_filename(self, split: str) -> str:
        """File name of a split inside the data folder."""
        source = self.splits[split]
        if source.byte_range is not None:
            return f"{self.name}.{split}"
        return source.filename


def enwik8_split_ranges(holdout: int) -> dict[str, tuple[int | None, int | None]]:
    """The SHA-RNN/AWD-LSTM split: the last ``holdout`` bytes are test, the
    ``holdout`` before them valid, everything earlier train."""
    return {
        "train": (None, -2 * holdout),
        "valid": (-2 * holdout, -holdout),
        "test": (-holdout, None),
    }


def make_enwik8_like(
    name: str,
    archive: Archive,
    member: str,
    member_check: FileCheck,
    holdout: int,
    description: str = "",
    licence: str = "",
) -> CorpusSpec:
    """A corpus cut from one archive member by byte ranges (enwik8 and tests' small copies)."""
    ranges = enwik8_split_ranges(holdout)
    return CorpusSpec(
        name=name,
        description=description,
        archive=archive,
        splits={s: SplitSource(member=member, check=member_check, byte_range=ranges[s]) for s in SPLITS},
        licence=licence,
    )


WIKITEXT_LICENCE = "Creative Commons Attribution-ShareAlike 3.0 (CC BY-SA 3.0), as its homepage states"
_WIKITEXT_HOME = "https://blog.salesforceairesearch.com/the-wikitext-long-term-dependency-language-modeling-dataset/"


def _wikitext_urls(archive_name: str) -> tuple[str, ...]:
    # The original S3 bucket was retired; the dataset's author hosts the same archives.
    return (
        f"https://wikitext.smerity.com/{archive_name}",
        f"https://s3.amazonaws.com/research.metamind.io/wikitext/{archive_name}",
    )


def _wikitext(
    name: str,
    folder: str,
    ext: str,
    archive_name: str,
    archive_check: FileCheck,
    file_checks: dict[str, FileCheck | None],
    description: str,
) -> CorpusSpec:
    return CorpusSpec(
        name=name,
        description=description,
        archive=Archive(archive_name, _wikitext_urls(archive_name), archive_check),
        splits={
            s: SplitSource(member=f"{folder}/wiki.{s}.{ext}", check=file_checks.get(s))
            for s in SPLITS
        },
        homepage=_WIKITEXT_HOME,
        licence=WIKITEXT_LICENCE,
    )


ENWIK8_ARCHIVE_CHECK = FileCheck(
    size=36_445_475,
    sha256="547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
)
ENWIK8_CHECK = FileCheck(
    size=100_000_000,
    sha256="2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8",
    md5="a1fa5ffddb56f4953e226637dabbb36a",
)
ENWIK8_HOLDOUT = 5_000_000

class UnknownCorpus(BenchError):
    """A corpus name that is neither registered nor added by the user."""


REGISTRY: Registry[CorpusSpec] = Registry("corpus", UnknownCorpus)


def _register(spec: CorpusSpec) -> None:
    REGISTRY.register(spec.name, spec)


_register(
    make_enwik8_like(
        "enwik8",
        Archive(
            "enwik8.zip",
            ("http://mattmahoney.net/dc/enwik8.zip", "https://mattmahoney.net/dc/enwik8.zip"),
            ENWIK8_ARCHIVE_CHECK,
        ),
        member="enwik8",
        member_check=ENWIK8_CHECK,
        holdout=ENWIK8_HOLDOUT,
        licence="Wikipedia's text of 2006 (GNU Free Documentation License, Wikipedia's licence then)",
        description="First 10^8 bytes of the English Wikipedia XML dump of 2006-03-03 (Hutter Prize); "
        "train = first 90M bytes, valid = next 5M, test = last 5M.",
    )
)
_register(
    _wikitext(
        "wikitext-2",
        "wikitext-2",
        "tokens",
        "wikitext-2-v1.zip",
        FileCheck(4_475_746, sha256="92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c"),
        {
            "train": FileCheck(10_797_148, crc32="aa2052cd"),
            "valid": FileCheck(
                1_121_681,
                sha256="f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
                crc32="04cbd4c7",
            ),
            "test": FileCheck(
                1_256_449,
                sha256="d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
                crc32="6948ee54",
            ),
        },
        "WikiText-2 v1, tokenized: rare words replaced by <unk> (vocabulary 33,278 with <eos>).",
    )
)
_register(
    _wikitext(
        "wikitext-2-raw",
        "wikitext-2-raw",
        "raw",
        "wikitext-2-raw-v1.zip",
        FileCheck(4_721_645, sha256="ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11"),
        {
            "valid": FileCheck(
                1_146_846, sha256="4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7"
            ),
            "test": FileCheck(
                1_290_590, sha256="173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08"
            ),
        },
        "WikiText-2 v1, raw: the same articles with no <unk> replacement.",
    )
)
_register(
    _wikitext(
        "wikitext-103",
        "wikitext-103",
        "tokens",
        "wikitext-103-v1.zip",
        FileCheck(190_229_076, sha256="242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590"),
        {},
        "WikiText-103 v1, tokenized (vocabulary 267,735).",
    )
)
_register(
    _wikitext(
        "wikitext-103-raw",
        "wikitext-103-raw",
        "raw",
        "wikitext-103-raw-v1.zip",
        FileCheck(191_984_949, sha256="91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794"),
        {},
        "WikiText-103 v1, raw.",
    )
)


def get_corpus(name: str) -> CorpusSpec:
    return REGISTRY[name]
