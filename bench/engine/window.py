"""The training steps since the last read: each one's loss and whether its update was skipped, kept on the device.

Reading a number the device computed makes the host wait until the device has caught up (a host
synchronisation): a step that read its loss would drain the GPU's queue every step. The trainer adds each step
here and reads the window only where it needs the numbers (a log line, a validation, a checkpoint, a stop), with
one transfer; a loss that is not finite (divergence) is found there and named with its step.
"""

from __future__ import annotations

import math

import torch

from bench.engine.hardware.distributed import Ranks
from bench.errors import BenchError


class TrainingDiverged(BenchError):
    """The training loss became NaN or infinite."""


class TrainingWindow:
    def __init__(self, ranks: Ranks):
        self.ranks = ranks
        self._steps: list[int] = []  # the steps added and not yet read
        self._losses: list[torch.Tensor] = []  # their mean losses over this process's rows, on the device
        self._skipped: list[torch.Tensor] = []  # with a loss scaler, its skip flag of each (1.0: update skipped)
        self._read: list[float] = []  # losses of the whole batch read since the last mean

    def add(self, step: int, loss: torch.Tensor, skipped: torch.Tensor | None) -> None:
        self._steps.append(step)
        self._losses.append(loss.detach())
        if skipped is not None:
            self._skipped.append(skipped)

    def read(self) -> int:
        """Reads the steps added since the last read (every process takes part) and returns how many of them had
        their update skipped; raises TrainingDiverged at the first whose loss is not finite."""
        if not self._steps:
            return 0
        # every process's rows hold as many tokens: the whole batch's loss is the mean of the processes' means
        losses = self.ranks.sum(torch.stack(self._losses).double()) / self.ranks.world
        flags = [torch.stack(self._skipped).double()] if self._skipped else []
        values = torch.cat([losses, *flags]).tolist()  # the one wait for the device
        steps, n = self._steps, len(self._steps)
        self._steps, self._losses, self._skipped = [], [], []
        for step, loss in zip(steps, values[:n]):
            if not math.isfinite(loss):
                raise TrainingDiverged(f"training loss became {loss} at step {step}; "
                                       f"try a lower lr or stronger clipping (--set lr=..., --set clip=...)")
        self._read.extend(values[:n])
        return int(sum(values[n:]))

    def mean(self) -> float:
        """The mean loss of the steps read since the last mean (call :meth:`read` first)."""
        total = 0.0
        for loss in self._read:  # in step order, as the log always summed it (sum() of floats may compensate)
            total += loss
        mean = total / len(self._read)
        self._read = []
        return mean
