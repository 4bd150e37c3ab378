"""How far a matrix has got, told after each finished run: runs done, running and waiting, and the time left,
estimated from the plan's training FLOPs and the rate measured so far (evaluation time is not in the plan)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError
from bench.run_files import RESULT
from bench.text_tables import duration, flops_rate


@dataclass
class MatrixClock:
    planned_flops: list[float]  # each run's planned training FLOPs (0 when unknown)
    at_once: int  # runs that train at the same time
    started: float = field(default_factory=lambda: time.monotonic())
    finished_runs: int = 0
    trained_flops: float = 0.0  # of the runs that trained to their end: the rate's numerator
    dropped_flops: float = 0.0  # planned for runs that ended otherwise (failed, interrupted): neither done nor left

    def finished(self, flops: list[float], trained: list[bool]) -> str:
        """Count these runs as finished, ``trained`` saying which trained their whole plan here (a run that failed
        at once, or one resumed from its checkpoint, would otherwise count its whole plan as trained in no time or
        in part of its time); the line to print."""
        self.finished_runs += len(flops)
        self.trained_flops += sum(f for f, t in zip(flops, trained) if t)
        self.dropped_flops += sum(f for f, t in zip(flops, trained) if not t)
        left = len(self.planned_flops) - self.finished_runs
        running = min(self.at_once, left)
        line = f"{self.finished_runs} finished, {running} running, {left - running} waiting"
        elapsed = time.monotonic() - self.started
        if left and self.trained_flops > 0 and elapsed > 0:
            rate = self.trained_flops / elapsed
            remaining = max(sum(self.planned_flops) - self.trained_flops - self.dropped_flops, 0.0)
            line += (f"; about {duration(remaining / rate)} left ({remaining:.3g} planned training FLOPs at the "
                     f"{flops_rate(rate / 1e12)} measured so far)")
        return line


def outcome_of(run_dir: Path) -> str:
    """What a finished run measured, for its line in the matrix's output: ' (test 2.469 bits/byte, trained 31 s)'."""
    from bench.engine.result import RunResult

    try:
        result = RunResult.read(run_dir / RESULT)
    except BenchError:
        return ""
    split = "test" if "test" in result.metrics else next(iter(result.metrics), None)
    score = f"{split} {result.metrics[split].bits_per_byte:.3f} bits/byte" if split else ""
    took = f"trained {duration(result.training.seconds)}" if result.training else ""
    return f" ({', '.join(part for part in (score, took) if part)})" if score or took else ""
