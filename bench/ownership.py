"""What a command may write: its own run, its own matrix, its own report, or a new file. Never a file or folder
that belongs to another run, matrix or report, and never an existing file it did not write. Every command that
writes claims its output here, before any work; anything else is refused in one line.

A folder says whose it is by what it holds:

* a **run** folder: ``spec.json``, ``result.json``, ``status.json``, ``checkpoint.pt`` or ``best.pt``;
  its identity is the run id recorded in the first three (which must agree: a folder holding two runs' files
  is nobody's to write into);
* a **matrix**'s results folder: ``owner.json`` saying so, or ``runs.csv``; its identity is the config it was
  run from, recorded in ``owner.json``, or else the config's contents, whose sha256 each of its run folders'
  ``cell.json`` records; a config file named ``matrix.toml`` does not make its folder a matrix's;
* a **report** folder: ``owner.json`` saying so, or ``report.md`` with ``report.html``; its identity is the
  results folder it reports, recorded in ``owner.json`` only: a report whose ``owner.json`` is lost is
  nobody's to rebuild.

``bench reproduce``'s folder of runs trained again says so in ``owner.json`` (kind ``reproduction``, naming the
results folder it reproduces); its run folders are its own.

``owner.json`` records a path twice, relative to the folder (moving a checkout keeps it) and absolute (moving
the folder alone keeps it): either leading to the config or results folder claims it.
A matrix writes its own runs' folders inside its results folder; nothing else writes inside another's folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.fileio import write_text_atomic
from bench.run_files import BEST, CELL, CHECKPOINT, ERROR, LOCK, LOG, RESULT, SPEC, STATUS, TOKENIZER, TRAIN_LOG

RUN_FILES = (SPEC, RESULT, STATUS, CHECKPOINT, BEST)  # a log alone is debris
REPORT_FILES = ("report.md", "report.html")
RUN_DEBRIS = (LOCK, LOG, TOKENIZER, ERROR, TRAIN_LOG, CELL)  # a run that never checkpointed
OWNER = "owner.json"
REPRODUCTION = "reproduction"  # owner.json's kind for bench reproduce's folder (see claim_reproduction_folder)
ABSOLUTE = "_absolute"  # owner.json's key for a path's absolute form


@dataclass(frozen=True)
class Owner:
    kind: str  # "run", "matrix" or "report"
    folder: Path
    identity: str | None = None  # a run's id (None: not recorded)
    places: tuple[Path, ...] = ()  # where each path owner.json records leads: the matrix's config, the results

    def names(self, path: Path) -> bool:
        """Whether owner.json names ``path`` (the config of a matrix, the results folder of a report)."""
        return Path(path).resolve() in self.places

    def source(self) -> str:
        """Where the recorded config or results folder is, or where it was when recorded: never a path that
        seems to lead somewhere it does not."""
        found = next((place for place in self.places if place.exists()), None)
        return str(found) if found else f"{self.places[-1]}, which does not exist"

    def describe(self) -> str:
        if self.kind == "run":
            return f"{self.folder} is a run" + (f" ({self.identity})" if self.identity else "")
        if self.kind == "matrix":
            return f"{self.folder} is a matrix results folder" + (f" (run from {self.source()})" if self.places
                                                                  else "")
        return f"{self.folder} is " + (f"the report of {self.source()}" if self.places else "a report")


def owner_of(folder: Path) -> Owner | None:
    """Whose ``folder`` is, from what it holds; None for a folder that is none of ours (or does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    recorded = _read_owner(folder)
    if recorded.get("kind") == "matrix" or (folder / "runs.csv").exists():
        return Owner("matrix", folder, places=_places(folder, recorded, "config"))
    if any((folder / name).exists() for name in RUN_FILES):
        return Owner("run", folder, _run_id(folder))
    if recorded.get("kind") == "report" or all((folder / name).exists() for name in REPORT_FILES):
        return Owner("report", folder, places=_places(folder, recorded, "results"))
    return None


def _places(folder: Path, recorded: dict, key: str) -> tuple[Path, ...]:
    """Where owner.json's ``key`` leads: its path relative to the folder, then its absolute path."""
    paths = [folder / recorded[key]] if isinstance(recorded.get(key), str) else []
    if isinstance(recorded.get(f"{key}{ABSOLUTE}"), str):
        paths.append(Path(recorded[f"{key}{ABSOLUTE}"]))
    return tuple(path.resolve() for path in paths)


def enclosing_owner(path: Path) -> Owner | None:
    """The nearest folder above ``path`` that belongs to a run, matrix or report (None: none). Above, a run is
    told by the JSON files it records its id in: a folder of loose checkpoints is nobody's."""
    for folder in Path(path).absolute().parents:
        owner = owner_of(folder)
        if owner is not None and (owner.kind != "run" or any((folder / n).is_file() for n in RUN_FILES[:3])):
            return owner
    return None


def refuse_others_folder(folder: Path, what: str) -> None:
    """A folder that is not a run's, a matrix's or a report's to write into (a data folder, an archive's folder):
    refused when it is one of theirs or inside one."""
    owner = owner_of(folder) or enclosing_owner(folder)
    if owner is not None:
        raise BenchError(f"{what} {folder} would be written inside another command's folder: {owner.describe()}; "
                         f"give a folder outside it")


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


def claim_matrix_folder(folder: Path, config_path: Path) -> None:
    """A matrix's results folder: new, or the results of the same config (the one owner.json names, or one with
    the contents its runs' cell.json record); inside no run, matrix or report."""
    owner = owner_of(folder)
    if owner is not None:
        if owner.kind != "matrix":
            raise BenchError(f"{owner.describe()}, not a matrix's results folder; choose another --results folder")
        if not owner.names(config_path) and not _same_config(folder, config_path):
            if not owner.places:
                raise BenchError(f"{folder} holds the results of a matrix whose {OWNER} is missing or unreadable, run "
                                 f"from a config other than {config_path} (its runs' cell.json record its sha256); "
                                 f"choose another --results folder")
            was = owner.places[-1]
            again = "run that config" if was.exists() else f"put the config back at {was} and run it from there"
            raise BenchError(f"{folder} holds the results of the matrix run from {owner.source()}, not "
                             f"{config_path.resolve()}; choose another --results folder (or {again})")
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
    with the same contents: each of its run folders' cell.json records the config's sha256."""
    from bench.fileio import sha256_file

    try:
        recorded = {json.loads(path.read_text()).get("config_sha256") for path in folder.glob(f"*/{CELL}")}
        return recorded == {sha256_file(config_path)}
    except (OSError, ValueError, AttributeError):
        return False


def record_matrix_owner(folder: Path, config_path: Path) -> None:
    _record(folder, "matrix", "config", config_path)


def claim_report_folder(folder: Path, results_dir: Path) -> None:
    """A report folder: new, or the report of the same results folder; inside no run, matrix or report."""
    owner = owner_of(folder)
    if owner is not None and owner.kind == "report" and not owner.places:
        raise BenchError(f"{folder} is a report whose {OWNER} is missing or unreadable: the results it reports cannot "
                         f"be told; choose another --out folder (or delete {folder} to rebuild it there)")
    if owner is not None and not (owner.kind == "report" and owner.names(results_dir)):
        raise BenchError(f"{owner.describe()}, not the report of {results_dir}; choose another --out folder")
    if owner is None:
        _refuse_foreign_files(folder, (), "a report's folder")
    above = enclosing_owner(folder)
    if above is not None:
        raise BenchError(f"{folder} is inside another folder ({above.describe()}); choose a folder outside it")


def record_report_owner(folder: Path, results_dir: Path) -> None:
    _record(folder, "report", "results", results_dir)


def claim_reproduction_folder(folder: Path, results_dir: Path) -> None:
    """``bench reproduce``'s folder of runs trained again: new, empty, or the reproduction of the same results
    folder (its owner.json says so); inside no run, matrix or report. Its run folders are its own to write."""
    owner = owner_of(folder)
    if owner is not None:
        raise BenchError(f"{owner.describe()}, not a folder of bench reproduce; choose another --out folder")
    recorded = _read_owner(folder)
    if recorded.get("kind") != REPRODUCTION:
        _refuse_foreign_files(folder, (), "a folder of bench reproduce")
    elif Path(results_dir).resolve() not in (was := _places(folder, recorded, "results")):
        raise BenchError(f"{folder} holds the reproduction of {was[-1] if was else 'another results folder'}, not of "
                         f"{results_dir}; choose another --out folder")
    above = enclosing_owner(folder)
    if above is not None:
        raise BenchError(f"{folder} is inside another folder ({above.describe()}); choose a folder outside it")


def record_reproduction_owner(folder: Path, results_dir: Path) -> None:
    _record(folder, REPRODUCTION, "results", results_dir)


def is_reproduction(folder: Path) -> bool:
    """Whether ``folder`` is the folder ``bench reproduce`` trained runs again in (its owner.json says so)."""
    return _read_owner(folder).get("kind") == REPRODUCTION


def _record(folder: Path, kind: str, key: str, path: Path) -> None:
    """owner.json, written only when it does not name ``path`` already (a finished study, moved or not, can be
    looked at on a read-only folder)."""
    recorded = _read_owner(folder)
    if recorded.get("kind") == kind and Path(path).resolve() in _places(folder, recorded, key):
        return
    owner = {"kind": kind, key: _relative(path, folder), f"{key}{ABSOLUTE}": str(Path(path).resolve())}
    write_text_atomic(folder / OWNER, json.dumps(owner, indent=2) + "\n")


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


def _relative(path: Path, folder: Path) -> str:
    return os.path.relpath(Path(path).resolve(), Path(folder).resolve())
