"""A matrix's run folders checked against each other before a report, a comparison or the matrix trusts them.

A run folder's ``cell.json`` (the matrix's record: matrix, config sha256, cell, run id) must agree with the run's
own records: ``result.json`` and ``spec.json`` record the same run id, the result's spec is that cell (model,
preset, tokenization, corpus, seed), the checkpoints are of that run, and the matrix and config are the results
folder's (those of its ``matrix.toml``, the config the matrix last ran, or else those most of its folders
record). A folder where they disagree (a record edited, copied or linked in from another run, a folder moved in
from another matrix) is *inconsistent*: named, with what disagrees, and left out, never relabelled. A finished
run folder without ``cell.json`` is not part of the matrix (its settings changed, or the record was deleted):
such folders are counted in one line.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.fileio import sha256_file
from bench.run_files import BEST, CELL, CHECKPOINT, MATRIX_CONFIG, RESULT, SPEC
from tokenizers_study import TokenizerError, is_pretrained, parse_scheme

IDENTITY_AXES = ("model", "preset", "dataset", "seed")  # a cell's axes that the result's spec names as they are


@dataclass(frozen=True)
class Inconsistent:
    run_dir: str
    problem: str

    def line(self) -> str:
        return f"{self.run_dir} ({self.problem})"


def matrix_identity(results_dir: Path, records: list[dict]) -> tuple[str | None, str | None]:
    """(matrix name, config sha256) of the results folder: those of its matrix.toml where it is readable and
    records hold its sha256 (a matrix.toml edited or lost since says nothing more), else those most records hold."""
    config = results_dir / MATRIX_CONFIG
    shas = Counter(record.get("config_sha256") for record in records)
    last_run = sha256_file(config) if config.is_file() else None
    sha = last_run if last_run in shas else (shas.most_common(1)[0][0] if shas else None)
    names = Counter(record.get("matrix") for record in records if record.get("config_sha256") == sha)
    return _matrix_name(config) or (names.most_common(1)[0][0] if names else None), sha


def _matrix_name(config: Path) -> str | None:
    try:
        name = tomllib.loads(config.read_text())["matrix"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def record_problem(run_dir: Path, record: dict, identity: tuple[str | None, str | None]) -> str | None:
    """What in ``run_dir`` disagrees with its cell record ``record``, or None."""
    name, sha = identity
    if (record.get("matrix"), record.get("config_sha256")) != (name, sha) and sha is not None:
        return (f"its {CELL} is of matrix {record.get('matrix')!r} (config sha256 "
                f"{str(record.get('config_sha256'))[:12]}...), not this results folder's {name!r} ({sha[:12]}...)")
    return (run_files_problem(run_dir, record.get("run_id"), f"its {CELL}")
            or _cell_against_result(run_dir / RESULT, record.get("cell") or {}))


def run_files_problem(run_dir: Path, run_id: str | None = None, named_by: str | None = None) -> str | None:
    """What in a run folder is not of run ``run_id`` (default: the one its result.json names): a result or spec
    linked or copied in from another run, a checkpoint of another run."""
    if run_id is None:
        run_id, named_by = _json_field(run_dir / RESULT, "run_id"), f"its {RESULT}"
    for file in (RESULT, SPEC, BEST, CHECKPOINT):
        path = run_dir / file
        if path.is_symlink():
            return f"its {file} is a link (to {path.readlink()}), not the run's own file"
        recorded = _checkpoint_run_id(path) if file in (BEST, CHECKPOINT) else _json_field(path, "run_id")
        if recorded is not None and recorded != run_id:
            return f"its {file} is of run {recorded}, {named_by} of run {run_id}"
    return None


def unrecorded_finished(results_dir: Path) -> list[str]:
    """The run folders with a result but no cell record: not part of the matrix."""
    return sorted(p.parent.name for p in results_dir.glob(f"*/{RESULT}") if not (p.parent / CELL).exists())


def summary_lines(inconsistent: list[Inconsistent], unrecorded: list[str]) -> list[str]:
    """What the report, compare and run-matrix say about folders they leave out: inconsistent ones by name,
    the others counted."""
    lines = []
    if inconsistent:
        lines.append(f"{len(inconsistent)} run folder(s) left out, their records disagree: "
                     + "; ".join(entry.line() for entry in inconsistent)
                     + f"; move them out, or run `bench run-matrix CONFIG` again to rewrite the matrix's {CELL}")
    if unrecorded:
        lines.append(f"{len(unrecorded)} finished run folder(s) are not part of the matrix (no {CELL}: their settings "
                     f"changed, or the record was deleted) and are left out")
    return lines


def _json_field(path: Path, key: str):
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # missing, or damaged: the reader of the file says so in its own words
    return data.get(key) if isinstance(data, dict) else None


def _cell_against_result(path: Path, cell: dict) -> str | None:
    spec = _json_field(path, "spec")
    if not isinstance(spec, dict):
        return None
    differ = [axis for axis in IDENTITY_AXES if axis in cell and axis in spec and cell[axis] != spec[axis]]
    if "tokenizer" in cell and not _same_tokenizer(cell["tokenizer"], spec.get("tokenizer")):
        differ.append("tokenizer")
    if differ:
        shown = ", ".join(f"{axis} {cell.get(axis)!r} in {CELL}, {spec.get(axis)!r} in {RESULT}" for axis in differ)
        return f"{CELL} names another cell than the run: {shown}"
    return None


def _same_tokenizer(in_cell, in_result) -> bool:
    """A cell names its scheme as the config wrote it (an hf: file relative to the config), the result as resolved."""
    if in_cell == in_result or not isinstance(in_cell, str) or not isinstance(in_result, str):
        return in_cell == in_result  # equal names are one scheme, also a plug-in's this process did not import
    if is_pretrained(in_cell) or is_pretrained(in_result):  # its file is in the run id (the data's identity)
        return is_pretrained(in_cell) and is_pretrained(in_result)
    try:
        return parse_scheme(in_cell).name == parse_scheme(in_result).name
    except TokenizerError:  # a name no scheme reads is another tokenizer than any the run records
        return False


def _checkpoint_run_id(path: Path) -> str | None:
    """The run id a checkpoint records, read without loading its tensors (None: no readable checkpoint there, which
    the command that loads it reports)."""
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - a damaged checkpoint is reported by whoever loads its weights
        return None
    return payload.get("run_id") if isinstance(payload, dict) else None
