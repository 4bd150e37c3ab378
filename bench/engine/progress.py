"""What a training run has done so far, and how it is stopped between steps.

:class:`Progress` is saved with every checkpoint; :class:`SignalGuard` turns SIGINT,
SIGTERM and SIGUSR2 (a cluster job's time is nearly up) into a request checked after
each step, so that a run always stops at a step boundary with a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path


def read_log_lines(path: Path) -> list[str]:
    """The lines of a log.jsonl; a torn last line (a write cut by a kill) is left out."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            lines.pop()
    return lines


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    pos: int = 0  # column of the next segment in the train rows
    tokens: int = 0  # training tokens seen (targets)
    chars: int = 0  # characters of training text seen (those the target tokens begin)
    seconds: float = 0.0  # training time, evaluation excluded
    best_valid_bpc: float | None = None
    best_step: int | None = None
    validated_step: int | None = None  # the step of the last validation (a resume does not repeat it)
    started_at: str = ""  # when the run's first attempt started
    wall_seconds: float = 0.0  # wall time of every attempt up to its last checkpoint
    threads: int | None = None  # CPU threads of the first attempt: a resumed run uses as many (the same sums)
    observed_dtypes: dict | None = None  # per module family, the dtypes its first step ran in (precision.DtypeWatch)
    skipped_steps: int = 0  # updates the loss scaler skipped (float16: inf or NaN gradients)
    warnings: list[str] = field(default_factory=list)  # e.g. a parameter family whose gradients stayed zero
    started_from: dict | None = None  # init_from's weights by content: their run id and weights_sha256
    validations: list = field(default_factory=list)  # (step, valid bits/char) of each: the not-learning rule's evidence

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class SignalGuard:
    """Turns the first SIGINT/SIGTERM into a flag checked between steps; a second one stops at once."""

    def __init__(self):
        self.stop = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            # SIGUSR2: a cluster job's time is nearly up (Slurm's --signal, submitit)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored, as a shell's `&` does with Ctrl-C
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.stop = signal.Signals(signum).name
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
