"""From a matrix config to run specs: the grid of cells, the matching rules, run folder names.

A cell is one point of the grid (``model``, ``preset``, ``tokenizer``, ``dataset``, ``seed``,
``match`` and any other axis). Matching rules say what is held equal across tokenizations:

* ``chars``: the same characters of training text and of context (each converted to tokens
  with the tokenizer's characters per token at resolution);
* ``tokens``: the same number of training tokens and a context of the same number of tokens;
* ``steps``: the same number of optimizer steps on segments of the same number of tokens;
* ``flops``: the same training compute (each model's FLOPs per token times tokens), with the same context
  in characters: the comparison a compute-limited study makes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

from bench.engine.budget import LIMITS, limit_for
from bench.engine.spec import RunSpec, recorded_names, validate_spec
from bench.errors import USER_ERRORS, BenchError
from bench.run_files import run_folder_name
from bench.study.matrix.config import MatrixConfig, read_config
from tokenizers_study import read_scheme

CORE_AXES = ("model", "preset", "tokenizer", "dataset", "seed", "match")
# rule -> (the [budget] key that is held equal, the [context] key that is held equal)
MATCH_RULES = {"chars": ("chars", "chars"), "tokens": ("tokens", "tokens"), "steps": ("steps", "tokens"),
               "flops": ("flops", "chars")}


def expand(config: MatrixConfig) -> list[dict]:
    """Every cell of the grid and of the [[include]] grids, in order, without duplicates."""
    cells, seen = [], set()
    for grid in [config.axes] + config.includes:
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            cell = dict(zip(keys, values))
            cell.setdefault("seed", 0)
            cell.setdefault("match", config.default_match)
            cell.setdefault("preset", config.shared.get("preset", "tiny"))
            key = json.dumps(cell, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                cells.append(cell)
    return cells


def match_overrides(config: MatrixConfig, match: str) -> dict:
    """Budget and context for one matching rule; the presets' own budgets are switched off."""
    if match not in MATCH_RULES:
        raise BenchError(f"{config.path}: unknown match rule {match!r}; allowed: {', '.join(MATCH_RULES)}")
    budget_key, context_key = MATCH_RULES[match]
    budget, context = config.budget, config.context
    if budget_key not in budget and "epochs" not in budget:
        raise BenchError(f"{config.path}: match = {match} needs [budget] {budget_key} = N")
    if context_key not in context:
        held = " (equal context in characters)" if context_key == "chars" else ""
        raise BenchError(f"{config.path}: match = {match} needs [context] {context_key} = N{held}")
    out: dict[str, Any] = {limit.field: None for limit in LIMITS if limit.unit != "minutes"}
    out[limit_for(budget_key).field] = budget.get(budget_key)
    if "epochs" in budget:
        out["max_epochs"] = budget["epochs"]
    if context_key == "chars":
        out["context_chars"] = context["chars"]
    else:
        out["bptt"] = context["tokens"]
        out["context_chars"] = None
    return out


def cell_spec(config: MatrixConfig, cell: dict, phase: dict | None, init_from: str | None = None) -> RunSpec:
    """The validated spec of one cell (and phase): shared settings, then the matching rule's budget and
    context, then per-model, per-tokenizer, the cell's own axes and the phase's settings; validated once
    (``load_config`` checks every cell), a phase's ``init_from = "previous"`` set to ``init_from`` after."""
    key = (cell_label(cell), phase["name"] if phase else None)
    if key not in config.cell_specs:
        config.cell_specs[key] = _validated_cell_spec(config, cell, phase)
    spec = config.cell_specs[key]
    if phase and phase.get("init_from") == "previous" and init_from:
        spec = dataclasses.replace(spec, overrides={**spec.overrides, "init_from": init_from})
    return spec


def _validated_cell_spec(config: MatrixConfig, cell: dict, phase: dict | None) -> RunSpec:
    overrides: dict[str, Any] = {k: v for k, v in config.shared.items() if k != "preset"}
    overrides.update(match_overrides(config, cell["match"]))
    overrides.update(config.per_model.get(cell["model"], {}))
    overrides.update(config.per_tokenizer.get(cell["tokenizer"], {}))
    overrides.update({k: v for k, v in cell.items() if k not in CORE_AXES})
    if phase:
        overrides.update({k: v for k, v in phase.items() if k not in ("name", "init_from")})
    try:
        spec = RunSpec(model=cell["model"], preset=cell["preset"],
                       tokenizer=_pretrained_path(str(cell["tokenizer"]), config.path.parent),
                       dataset=cell["dataset"], seed=cell["seed"], overrides=overrides,
                       data_dir=config.data_dir)
        return validate_spec(spec)
    except USER_ERRORS as exc:
        raise BenchError(f"{config.path}: cell {cell_label(cell)}: {exc}") from None


def _pretrained_path(scheme: str, config_dir: Path) -> str:
    """A pretrained tokenizer's path (hf:PATH, spm:PATH) is relative to the config file, like corpora's."""
    spec, family = read_scheme(scheme)
    if family is not None and family.pretrained and spec.path and not Path(spec.path).is_absolute():
        return dataclasses.replace(spec, path=str(config_dir / spec.path)).name
    return scheme


def cell_specs(config: MatrixConfig) -> list[RunSpec]:
    """Every cell and phase as a spec: checks the whole config before any data is touched."""
    return [cell_spec(config, cell, phase) for cell in expand(config) for phase in config.phases or [None]]


def cell_label(cell: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cell.items())


def cell_folder_name(cell: dict, phase: dict | None, run_id: str) -> str:
    parts = [cell["model"], cell["preset"], str(cell["tokenizer"]).replace(":", ""), cell["dataset"],
             f"s{cell['seed']}", cell["match"]]
    # a renamed setting names the folder as its run id hashes it: renaming an axis finds the runs it made
    parts += [f"{k}{v}" for k, v in recorded_names(cell).items() if k not in CORE_AXES]
    if phase:
        parts.append(phase["name"])
    return run_folder_name(parts, run_id)


def load_config(path: str | Path, with_plugins: bool = True) -> MatrixConfig:
    """Read and check a matrix config: its tables, and every cell must make a valid spec before anything runs."""
    config = read_config(path, with_plugins)
    cell_specs(config)
    return config
