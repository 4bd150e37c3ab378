"""Whether a run is learning: the unigram floor its validation must clearly beat, and gradients that stay zero.

A model that predicts every token from its frequency alone (a unigram model of the train split, add-one
smoothing) scores its tokenization's *unigram floor*; a finished model that is not clearly below it (by
:data:`CLEARLY_BELOW`) has learned little of the context, whatever its loss says, and the report flags it.

The trainer stops a run only on evidence that it will not learn (:func:`stalled_at_floor`): once a share of its
budget is spent (``not_learning_after``), its last :data:`PATIENCE` validations are all after warmup, none of them
:data:`STARTED_BELOW` below the floor (at it or above it), and none :data:`PROGRESS` better than the best
validation before them. Such a run is stopped as ``not-learning``, never a result. The constants come from a
grid of 139 CPU runs (``experiments/not_learning_grid.py``, ``results/reference/not-learning-rule.md``): the rule
stops none of its 43 runs that learn and all 25 flat ones that do not; the rule it replaces, "2% below the
floor at a quarter of the budget", stopped 5 of the 43 (and 9 of the 12 runs of ``configs/seeds.toml``), since
a run can sit at its floor for a while and then learn.

A parameter family (the class of the modules that hold them) whose gradient is exactly zero for
:data:`ZERO_GRADIENT_STEPS` steps in a row is not training: a warning in the log and the result.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from bench.errors import BenchError

CLEARLY_BELOW = 0.10  # a finished model must be at least 10% below its unigram floor (bits per character)
STARTED_BELOW = 0.02  # a validation not 2% below the floor (at it, or above it) has not started to learn
PATIENCE = 3  # validations in a row at the floor, after warmup, before a run is judged not learning
PROGRESS = 0.005  # ... none of them better than the best validation before them by 0.5% (relative)
ZERO_GRADIENT_STEPS = 50


class TrainingNotLearning(BenchError):
    """Validation stayed at the unigram floor after the share of the budget set by ``not_learning_after``."""


def clearly_below(bits: float, floor: float, margin: float = CLEARLY_BELOW) -> bool:
    return bits <= (1.0 - margin) * floor


def stalled_at_floor(validations: list[tuple[int, float]], floor: float, warmup_steps: int,
                     patience: int = PATIENCE, progress: float = PROGRESS) -> bool:
    """Whether the last ``patience`` of ``validations`` ((step, bits per character), in order) are all after
    warmup, none :data:`STARTED_BELOW` below ``floor`` (at it or above it), and none ``progress`` (relative)
    better than the best validation before them; with no validation before them there is nothing to measure
    progress against."""
    if len(validations) <= patience:
        return False
    before, window = validations[:-patience], validations[-patience:]
    best_before = min(bpc for _, bpc in before)
    return all(step > warmup_steps and not clearly_below(bpc, floor, STARTED_BELOW)
               and bpc > (1.0 - progress) * best_before for step, bpc in window)


def not_learning_message(validations: list[tuple[int, float]], floor: float, used: float) -> str:
    """The one line of a run stopped by :func:`stalled_at_floor`."""
    (first, _), (step, bpc) = validations[-PATIENCE], validations[-1]
    return (f"not learning: validation has not come {STARTED_BELOW:.0%} below the unigram floor ({floor:.4f} "
            f"bits/char) in the {PATIENCE} validations from step {first} to step {step} ({bpc:.4f} there, "
            f"{used:.0%} of the budget), none {PROGRESS:.1%} better than the best before them; raise lr, shorten "
            f"warmup or change the recipe (stop_if_not_learning=false trains on regardless)")


def validations_to_judge(planned_steps: int, warmup_steps: int, eval_every: int) -> tuple[int, int]:
    """A run's planned validations (every ``eval_every`` steps, and the last step's; only that one with
    ``eval_every`` 0), and how many of them come after warmup: :func:`stalled_at_floor` can judge a run with
    :data:`PATIENCE` of those and one validation more (its last validation is always past ``not_learning_after``)."""
    if eval_every <= 0:
        return 1, int(planned_steps > warmup_steps)
    total = planned_steps // eval_every + bool(planned_steps % eval_every)
    judged = total - min(warmup_steps, planned_steps) // eval_every
    return total, judged


def too_few_validations(resolved) -> str | None:
    """Why the not-learning stop cannot judge a run (``ResolvedRun``): fewer validations after its warmup than
    :func:`stalled_at_floor` needs, or none before them; None where it can, where the stop is off, or where the
    steps are not known in advance (a time budget)."""
    from bench.engine.budget import mean_step_tokens, steps_for

    train, tokens = resolved.train, resolved.size().planned_tokens
    if not train.stop_if_not_learning or tokens is None:
        return None
    planned = steps_for(tokens, mean_step_tokens(train))
    total, judged = validations_to_judge(planned, train.warmup_steps, train.eval_every)
    if judged >= PATIENCE and total > PATIENCE:
        return None
    return (f"the not-learning stop cannot judge this run: it plans {total} validation(s) in {planned} steps, "
            f"{judged} of them after warmup ({train.warmup_steps} steps), and needs {PATIENCE} after warmup and one "
            f"before them; it will not be stopped as not-learning (validate more often, eval_every, to have it "
            f"judged)")


def unigram_log_probs(train_ids: np.ndarray, vocab_size: int, bos_id: int) -> np.ndarray:
    """Log probability of each token under a unigram model of ``train_ids`` (add-one smoothing; ``<bos>``, never
    predicted, gets none)."""
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size).astype(np.float64) + 1.0
    counts[bos_id] = 0.0
    return np.log(counts / counts.sum(), where=counts > 0, out=np.full(vocab_size, -np.inf))


def unigram_nll(log_probs: np.ndarray, ids: np.ndarray) -> float:
    """Total NLL (nats) of ``ids`` under a unigram model."""
    return float(-log_probs[np.asarray(ids, dtype=np.int64)].sum())


class ZeroGradients:
    """How many steps in a row each parameter family's gradient has been exactly zero, counted on the device (no
    host synchronisation in a step; read at log steps)."""

    def __init__(self, model: nn.Module, device: torch.device):
        families: dict[str, list[nn.Parameter]] = {}
        for module in model.modules():
            owned = [p for p in module.parameters(recurse=False) if p.requires_grad]
            if owned:
                families.setdefault(type(module).__name__, []).extend(owned)
        self.names = list(families)
        self.params = [families[name] for name in self.names]
        self.in_a_row = torch.zeros(len(self.names), dtype=torch.int64, device=device)
        self.warned: set[str] = set()

    def update(self) -> None:
        """After the backward pass (and unscaling): count families whose every gradient is zero."""
        zero = []
        for params in self.params:
            grads = [p.grad for p in params if p.grad is not None]
            if not grads:  # unused in this step: not evidence either way
                zero.append(torch.zeros((), dtype=torch.bool, device=self.in_a_row.device))
                continue
            zero.append(torch.stack(torch._foreach_norm(grads)).float().max() == 0)
        # in place: a CUDA graph (bench.engine.hardware.cuda_graphs) replays the counts in the tensor it captured
        self.in_a_row.add_(1).mul_(torch.stack(zero).to(self.in_a_row.device))

    def new_warnings(self, step: int) -> list[str]:
        """A line for each family that has just reached :data:`ZERO_GRADIENT_STEPS` zero steps in a row."""
        lines = []
        for name, count in zip(self.names, self.in_a_row.tolist()):
            if count >= ZERO_GRADIENT_STEPS and name not in self.warned:
                self.warned.add(name)
                lines.append(f"the gradients of every {name} were exactly zero for the {count} steps up to step "
                             f"{step}: those weights are not training (underflow in a low precision without loss "
                             f"scaling, or an output that is multiplied by zero)")
        return lines
