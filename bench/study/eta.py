"""How far a matrix has got, told after each finished run: runs done, running and waiting, and the time left,
estimated from the plan's training FLOPs and the rate measured so far (evaluation time is not in the plan)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bench.tables import duration, flops_rate


@dataclass
class MatrixClock:
    planned_flops: list[float]  # each run's planned training FLOPs (0 when unknown)
    at_once: int  # runs that train at the same time
    started: float = field(default_factory=lambda: time.monotonic())
    done: int = 0
    done_flops: float = 0.0

    def finished(self, flops: list[float]) -> str:
        """Count these runs as finished; the line to print."""
        self.done += len(flops)
        self.done_flops += sum(flops)
        left = len(self.planned_flops) - self.done
        running = min(self.at_once, left)
        line = f"{self.done} done, {running} running, {left - running} waiting"
        elapsed = time.monotonic() - self.started
        if left and self.done_flops > 0 and elapsed > 0:
            rate = self.done_flops / elapsed
            remaining = max(sum(self.planned_flops) - self.done_flops, 0.0)
            line += (f"; about {duration(remaining / rate)} left ({remaining:.3g} planned training FLOPs at the "
                     f"{flops_rate(rate / 1e12)} measured so far)")
        return line
