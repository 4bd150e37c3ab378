"""``<corpus>/manifest.json``: what the data folder knows about each split file it holds."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.data.corpora import REGISTRY, SPLITS
from bench.errors import BenchError
from bench.fileio import write_json_atomic

MANIFEST = "manifest.json"
STATUS_OFFICIAL = "official"
STATUS_UNVERIFIED = "unverified"
STATUS_USER = "user"


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


def timestamp() -> str:
    """The time recorded as a split's ``fetched_at``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
