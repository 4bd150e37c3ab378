"""Whether a run is learning: the unigram floor its validation must clearly beat, and gradients that stay zero.

A model that predicts every token from its frequency alone (a unigram model of the train split, add-one
smoothing) scores its tokenization's *unigram floor*; a finished model that is not clearly below it (by
:data:`CLEARLY_BELOW`) has learned little of the context, whatever its loss says, and the report flags it. The
trainer stops a run that has not even started: not :data:`STARTED_BELOW` below its floor once a share of its
budget is spent (``not_learning_after``) and warmup is over, as ``not-learning``, never a result. The two margins
differ because a run at a quarter of its budget may still be on its way (the demo's closed-vocabulary SHA-RNN:
4% below at 42% of its budget, 10% at the end), while the GPU study's SHA-RNN ended 0-1% above its floor.

A parameter family (the class of the modules that hold them) whose gradient is exactly zero for
:data:`ZERO_GRADIENT_STEPS` steps in a row is not training: a warning in the log and the result.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from bench.errors import BenchError

CLEARLY_BELOW = 0.10  # a finished model must be at least 10% below its unigram floor (bits per character)
STARTED_BELOW = 0.02  # a run past not_learning_after of its budget must be at least 2% below it
ZERO_GRADIENT_STEPS = 50


class TrainingNotLearning(BenchError):
    """Validation stayed at the unigram floor after the share of the budget set by ``not_learning_after``."""


def clearly_below(bits: float, floor: float, margin: float = CLEARLY_BELOW) -> bool:
    return bits <= (1.0 - margin) * floor


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
        # in place: a CUDA graph (bench.engine.cuda_graphs) replays the counts in the tensor it captured
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
