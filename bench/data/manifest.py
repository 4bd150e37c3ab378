"""``<corpus>/manifest.json``: what the data folder knows about each split file it holds."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.data.corpora import REGISTRY, SPLITS, UnknownCorpus
from bench.errors import BenchError
from bench.fileio import write_json_atomic

MANIFEST = "manifest.json"
STATUS_OFFICIAL = "official"
STATUS_UNVERIFIED = "unverified"
STATUS_USER = "user"
STATUSES = (STATUS_OFFICIAL, STATUS_UNVERIFIED, STATUS_USER)


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


FIELDS = {"file": str, "size": int, "sha256": str, "status": str, "source": str}


def _load(data_dir: Path, name: str) -> dict | None:
    """The manifest's JSON, checked for shape and types; None when there is none."""
    path = corpus_dir(data_dir, name) / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("splits"), dict):
            raise ValueError("no table of splits")
        for split, record in data["splits"].items():
            if split not in SPLITS or not isinstance(record, dict):
                raise ValueError(f"splits.{split} is not a split record")
            for key, kind in FIELDS.items():
                if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
                    raise ValueError(f"splits.{split}.{key} must be a {kind.__name__}")
            if Path(record["file"]).name != record["file"] or record["status"] not in STATUSES:
                raise ValueError(f"splits.{split} names a file outside its folder or an unknown status")
        return data
    except (ValueError, OSError) as exc:
        fix = (f"delete the folder {path.parent} and add the corpus again (bench data add {name} ...)"
               if name not in REGISTRY else "delete it and fetch the corpus again")
        raise BenchError(f"{path} is corrupt ({exc}); {fix}") from None


def read_manifest(data_dir: Path, name: str) -> dict[str, SplitRecord]:
    data = _load(data_dir, name)
    return {split: SplitRecord.from_json(rec) for split, rec in data["splits"].items()} if data else {}


def write_manifest(data_dir: Path, name: str, records: dict[str, SplitRecord], user: bool = False,
                   folder: str | None = None) -> None:
    """The manifest of corpus ``name``, in its folder (or in ``folder``, a scratch folder that becomes it)."""
    ordered = {s: records[s].to_json() for s in SPLITS if s in records}
    write_json_atomic(
        corpus_dir(data_dir, folder or name) / MANIFEST,
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


def unknown_corpus(name: str, data_dir: Path) -> UnknownCorpus:
    """The error for a name that is neither a registry corpus nor a user corpus of ``data_dir``: it lists both, or
    says that the data folder does not exist (a mistyped --data-dir)."""
    if not data_dir.is_dir():
        return UnknownCorpus(f"{REGISTRY.unknown(name)}; the data folder {data_dir} does not exist: give the folder "
                             f"that holds your corpora (bench data list --data-dir DIR shows them)")
    users = [n for n in known_corpora(data_dir) if n not in REGISTRY]
    mine = f"user corpora in {data_dir}: {', '.join(users)}" if users else f"no user corpus in {data_dir}"
    return UnknownCorpus(REGISTRY.unknown(name, users, known=f"{', '.join(REGISTRY)}; {mine}"))


def is_user_corpus(data_dir: Path, name: str) -> bool:
    if name in REGISTRY:
        return False
    data = _load(data_dir, name)
    return bool(data and data.get("user_corpus"))
