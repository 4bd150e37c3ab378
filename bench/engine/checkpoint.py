"""Checkpoints: state_dicts plus the spec, written atomically, never pickled modules.

A *training* checkpoint (``checkpoint.pt``) holds everything needed to resume
exactly: model, optimizer, the step and data position, the recurrent state
carried between batches, and every random number generator. A *model*
checkpoint (``best.pt``) holds the weights, the spec and the tokenizer, enough
to evaluate or sample without the data folder's caches.
"""

from __future__ import annotations

import random
import reprlib
from pathlib import Path

import numpy as np
import torch

from bench.engine.exported import WEIGHTS, export_payload, is_export
from bench.errors import BenchError
from bench.fileio import atomic_path

FORMAT = 1


def save(path: str | Path, payload: dict) -> None:
    payload = {"format": FORMAT, **payload}
    with atomic_path(path) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:  # torch reports a failed write (a full disk, say) as a RuntimeError
            raise BenchError(f"cannot write {path}: {str(exc).splitlines()[0]}; the disk may be full or the "
                             f"folder not writable") from None


def locate(path: str | Path) -> Path:
    """The checkpoint a path names: a .pt file, a run folder's best (else final, else latest) weights, or an
    exported folder's weights (bench export)."""
    path = Path(path)
    if is_export(path):
        return path / WEIGHTS
    if path.is_dir():
        for name in ("best.pt", "final.pt", "checkpoint.pt"):
            if (path / name).is_file():
                path = path / name
                break
    if not path.is_file():
        raise BenchError(f"no checkpoint at {path}; give a .pt file or a run folder that has best.pt")
    return path


def load(path: str | Path) -> dict:
    path = locate(path)
    payload = {"format": FORMAT, **export_payload(path.parent)} if is_export(path.parent) else _read(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise BenchError(f"{path} is not a checkpoint of this toolkit (format {FORMAT})")
    missing = [key for key in ("resolved", "model", "tokenizer") if key not in payload]
    if missing:
        raise BenchError(f"{path} has no {', '.join(missing)}: it was written by an older version of the toolkit; "
                         f"evaluate it with that version, or train the run again")
    _check_parts(payload, path)
    _check_finite(payload["model"], path)
    return payload


def _read(path: Path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file
        first = str(exc).split(". ")[0].splitlines()[0] if str(exc) else ""
        raise BenchError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {first}); it is damaged or not "
                         f"a checkpoint: restore it, or train the run again (a run whose checkpoint.pt is deleted "
                         f"starts from its start)") from None


def unreadable(path: Path, part: str, problem: str) -> BenchError:
    """The refusal of a checkpoint whose recorded ``part`` cannot be read back (``problem``: why, one line)."""
    return BenchError(f"{path} is not a readable checkpoint (its recorded {part}: {problem}); it was edited or is "
                      f"damaged: restore it, or train the run again")


def _check_parts(payload: dict, path: Path) -> None:
    """The parts its readers take apart are of their kind: an edited file may hold anything there."""
    def check(part: str, value, kind: type = dict):
        if not isinstance(value, kind):
            raise unreadable(path, part, "missing" if value is None else f"{reprlib.repr(value)} is not a "
                                                                         f"{kind.__name__}")
        return value

    resolved = check("configuration", payload["resolved"])
    for key, part in (("spec", "spec"), ("train", "train config"), ("model", "model config")):
        check(part, resolved.get(key))
    check("data facts", resolved.get("data", {}))
    check("tokenizer", payload["tokenizer"], str)
    for split, record in check("data", payload.get("data", {})).items():
        check(f"data of {split}", record)
    for name, tensor in check("weights", payload["model"]).items():
        check(f"weights {name}", tensor, torch.Tensor)


def _check_finite(weights: dict, path: Path) -> None:
    """NaN or infinite weights (an edited or damaged file) would be trained from into a loss of NaN, read as a
    divergence ("lower the lr"), or scored as NaN: they are refused here, by name, before anything is written."""
    bad = [name for name, tensor in weights.items() if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise BenchError(f"{path} holds weights that are not finite (NaN or infinite values in {', '.join(bad[:3])}"
                         f"{more}): no model to train from or evaluate; use another checkpoint, or train that run "
                         f"again")


def rng_state(jitter: np.random.Generator) -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "jitter": jitter.bit_generator.state}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict, jitter: np.random.Generator) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_tuple(state["python"]))
    jitter.bit_generator.state = state["jitter"]
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(value):
    if isinstance(value, list):
        return tuple(_as_tuple(v) for v in value)
    return value


def load_weights(model: torch.nn.Module, state_dict: dict, source) -> None:
    """The weights of a checkpoint (``source`` names it) into ``model``: the one way weights are loaded."""
    try:
        model.load_state_dict(state_dict)
    except RuntimeError as exc:  # missing, unexpected or mis-shaped tensors
        raise BenchError(f"the weights in {source} do not fit this model ({str(exc).splitlines()[0]} ...); use "
                         f"weights of the same model and sizes (a damaged or edited checkpoint fits none)") from None
