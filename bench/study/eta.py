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
