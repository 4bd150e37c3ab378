"""What a command may write: its own run, its own matrix, its own report, or a new file. Never a file or folder
that belongs to another run, matrix or report, and never an existing file it did not write. Every command that
writes claims its output here, before any work; anything else is refused in one line.

A folder says whose it is by what it holds:

* a **run** folder: ``spec.json``, ``result.json``, ``status.json``, ``checkpoint.pt`` or ``best.pt``;
  its identity is the run id recorded in the first three (which must agree: a folder holding two runs' files
  is nobody's to write into);
* a **matrix**'s results folder: ``owner.json`` saying so, or ``runs.csv``; its identity is the config it was
  run from, recorded in ``owner.json`` (relative to the folder, so that moving a checkout keeps it); a config
  file named ``matrix.toml`` does not make its folder a matrix's;
* a **report** folder: ``owner.json`` saying so, or ``report.md`` with ``report.html``; its identity is the
  results folder it reports, also in ``owner.json``.

A matrix writes its own runs' folders inside its results folder; nothing else writes inside another's folder.
Folders written before ``owner.json`` existed are adopted by the first claim that matches what they hold.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.fileio import update_text
from bench.run_files import BEST, CHECKPOINT, ERROR, LOCK, LOG, RESULT, SPEC, STATUS, TOKENIZER, TRAIN_LOG

RUN_FILES = (SPEC, RESULT, STATUS, CHECKPOINT, BEST)  # a log alone is debris
REPORT_FILES = ("report.md", "report.html")
RUN_DEBRIS = (LOCK, LOG, TOKENIZER, ERROR, TRAIN_LOG)  # a run that never checkpointed
OWNER = "owner.json"


@dataclass(frozen=True)
class Owner:
    kind: str  # "run", "matrix" or "report"
    folder: Path
    identity: str | None  # the run id; the matrix's config; the reported results folder (None: not recorded)

    def describe(self) -> str:
        what = {"run": "run", "matrix": "matrix results folder", "report": "report"}[self.kind]
        return f"{self.folder} is a {what}" + (f" ({self.identity})" if self.identity else "")


def owner_of(folder: Path) -> Owner | None:
    """Whose ``folder`` is, from what it holds; None for a folder that is none of ours (or does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    recorded = _read_owner(folder)
    if recorded.get("kind") == "matrix" or (folder / "runs.csv").exists():
        return Owner("matrix", folder, recorded.get("config"))
    if any((folder / name).exists() for name in RUN_FILES):
        return Owner("run", folder, _run_id(folder))
    if recorded.get("kind") == "report" or all((folder / name).exists() for name in REPORT_FILES):
        return Owner("report", folder, recorded.get("results"))
    return None


def enclosing_owner(path: Path) -> Owner | None:
    """The nearest folder above ``path`` that belongs to a run, matrix or report (None: none). Above, a run is
    told by the JSON files it records its id in: a folder of loose checkpoints is nobody's."""
    for folder in Path(path).absolute().parents:
        owner = owner_of(folder)
        if owner is not None and (owner.kind != "run" or any((folder / n).is_file() for n in RUN_FILES[:3])):
            return owner
    return None


def claim_run_folder(folder: Path, run_id: str, in_matrix: bool = False) -> None:
    """A training run's folder: new, empty, or this run's own; inside no other run, matrix or report folder
    (``in_matrix``: the matrix that plans the run writes it inside its results folder)."""
    owner = owner_of(folder)
    if owner is not None and not (owner.kind == "run" and owner.identity == run_id):
        hint = "choose another --out folder (or leave --out out: the default folder is named by the run id)"
        if owner.kind == "run":  # a run whose id is not recorded is another run too: it cannot be told apart
            raise BenchError(f"{folder} holds another run ({owner.identity or 'its run id not recorded'}, this one "
                             f"is {run_id}); {hint}")
        raise BenchError(f"{owner.describe()}, not this run's folder; {hint}")
    if owner is None:
        _refuse_foreign_files(folder, RUN_DEBRIS, "a run's folder")
    above = enclosing_owner(folder)
    if above is not None and not (in_matrix and above.kind == "matrix"):
        raise BenchError(f"{folder} is inside another folder ({above.describe()}); choose a folder outside it")


def claim_matrix_folder(folder: Path, config_path: Path, name: str) -> None:
    """A matrix's results folder: new, or the results of the same config; inside no run, matrix or report."""
    config = _relative(config_path, folder)
    owner = owner_of(folder)
    if owner is not None:
        if owner.kind != "matrix":
            raise BenchError(f"{owner.describe()}, not a matrix's results folder; choose another --results folder")
        if owner.identity is None and _matrix_name(folder) not in (None, name):
            raise BenchError(f"{folder} holds the results of matrix {_matrix_name(folder)!r}, not {name!r}; choose "
                             f"another --results folder")
        if owner.identity not in (None, config) and not _same_config(folder, config_path):
            was = (folder / owner.identity).resolve()
            raise BenchError(f"{folder} holds the results of the matrix run from {was}, not {config_path.resolve()}; "
                             f"choose another --results folder (or run that config)")
    else:
        _refuse_foreign_files(folder, (), "a matrix's results folder")
    above = enclosing_owner(folder)
    if above is not None:
        raise BenchError(f"{folder} is inside another folder ({above.describe()}); choose a folder outside it")


def _refuse_foreign_files(folder: Path, debris: tuple[str, ...], what: str) -> None:
    """A folder that is nobody's (no run, matrix or report) but holds files: someone else's, not to write into."""
    if not folder.is_dir():
        return
    others = sorted(p.name for p in folder.iterdir() if p.name not in debris and not p.name.startswith("."))
    if others:
        shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
        raise BenchError(f"{folder} already holds other files ({shown}) and is not {what}; give a new or empty "
                         f"folder")


def _same_config(folder: Path, config_path: Path) -> bool:
    """A results folder moved since (its recorded path no longer leads to the config) still belongs to a config
    with the same contents: runs.csv records the config's sha256."""
    import csv

    from bench.fileio import sha256_file

    try:
        with open(folder / "runs.csv", newline="", encoding="utf-8") as handle:
            recorded = {row.get("config_sha256") for row in csv.DictReader(handle)}
        return recorded == {sha256_file(config_path)}
    except (OSError, csv.Error, UnicodeDecodeError):
        return False


def record_matrix_owner(folder: Path, config_path: Path) -> None:
    _record(folder, {"kind": "matrix", "config": _relative(config_path, folder)})


def claim_report_folder(folder: Path, results_dir: Path) -> None:
    """A report folder: new, or the report of the same results folder; inside no run, matrix or report."""
    results = _relative(results_dir, folder)
    owner = owner_of(folder)
    if owner is not None and not (owner.kind == "report" and owner.identity in (None, results)):
        raise BenchError(f"{owner.describe()}, not the report of {results_dir}; choose another --out folder")
    if owner is None:
        _refuse_foreign_files(folder, (), "a report's folder")
    above = enclosing_owner(folder)
    if above is not None:
        raise BenchError(f"{folder} is inside another folder ({above.describe()}); choose a folder outside it")


def record_report_owner(folder: Path, results_dir: Path) -> None:
    _record(folder, {"kind": "report", "results": _relative(results_dir, folder)})


def _record(folder: Path, owner: dict) -> None:
    """owner.json, written only when it changes (a finished study can be looked at on a read-only folder)."""
    update_text(folder / OWNER, json.dumps(owner, indent=2) + "\n")


def claim_output_file(path: Path, option: str, own_folder: Path | None = None, written_by: str | None = None) -> None:
    """A file a command writes: not a folder, in an existing folder that belongs to no other run, matrix or
    report (``own_folder``: the command's own run folder), and new unless it is the command's own output from
    before (``written_by``: the text such a file starts with). Owning the folder is not owning its files: a run's
    weights, checkpoint, result and spec are never replaced by another command, that run's own eval included."""
    path = Path(path)
    if path.is_symlink():  # a link, dangling or not, could lead into a folder the checks below never see
        raise BenchError(f"{option} {path} is a link (to {os.readlink(path)}); give the file's own path")
    if path.is_dir():
        raise BenchError(f"{option} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise BenchError(f"{option} {path}: folder {path.parent} does not exist; create it or choose another path")
    mine = own_folder is not None and path.parent.resolve() == Path(own_folder).resolve()
    owner = owner_of(path.parent)
    if owner is not None and not mine:
        raise BenchError(f"{option} {path}: {owner.describe()}; write outside it")
    if not mine and (above := enclosing_owner(path.parent)) is not None:
        raise BenchError(f"{option} {path}: {above.describe()}; write outside it")
    if path.exists() and not _starts_with(path, written_by):
        raise BenchError(f"{option} {path} exists and was not written by this command; choose a new file name")


def _starts_with(path: Path, text: str | None) -> bool:
    if text is None:
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(text.encode())) == text.encode()
    except OSError:
        return False


def _read_owner(folder: Path) -> dict:
    try:
        recorded = json.loads((folder / OWNER).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _run_id(folder: Path) -> str | None:
    recorded = {}
    for name in RUN_FILES[:3]:
        path = folder / name
        if not path.is_file():
            continue
        try:
            run_id = json.loads(path.read_text()).get("run_id")
        except (OSError, ValueError, AttributeError):
            raise BenchError(f"{path} is not readable JSON; this folder's run cannot be told: choose another folder "
                             f"or delete {folder}") from None
        if run_id:
            recorded[name] = str(run_id)
    if len(set(recorded.values())) > 1:  # say, a result.json copied in from another run
        named = ", ".join(f"{name}: {run_id}" for name, run_id in recorded.items())
        raise BenchError(f"{folder} holds the files of two runs ({named}): whose folder it is cannot be told; "
                         f"choose another folder, or move the other run's files out of it")
    return next(iter(recorded.values()), None)


def _matrix_name(folder: Path) -> str | None:
    from bench.fileio import read_toml

    try:
        return str(read_toml(folder / "matrix.toml").get("matrix", {}).get("name"))
    except (BenchError, OSError, AttributeError):
        return None


def _relative(path: Path, folder: Path) -> str:
    return os.path.relpath(Path(path).resolve(), Path(folder).resolve())
