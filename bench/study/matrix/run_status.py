"""Where a matrix run stands on disk: ``status.json`` beside its result.

``status.json`` records the outcome of the last attempt (status, one-line error,
run id); ``result.json`` is written only by a run that finished. A run is
``done`` when its folder holds the finished result of this very run id,
``running`` while another process holds its lock, a recorded failure, ``partial``
with a checkpoint, and ``new`` without.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from bench.engine.lock import RunLock, RunLocked, is_locked
from bench.engine.result import DONE, RunResult, finished_result
from bench.errors import BenchError
from bench.fileio import write_json_atomic
from bench.run_files import CHECKPOINT, STATUS


class RunStatus(StrEnum):
    """Where a run of a study stands; ``done`` is the only status of a finished run (its result's)."""

    NEW = "new"
    PARTIAL = "partial"  # a checkpoint exists: running it again resumes
    DONE = DONE
    FAILED = "failed"
    DIVERGED = "diverged"
    NOT_LEARNING = "not-learning"  # stopped: validation not clearly below its unigram floor (bench.engine.learning)
    OOM = "oom"
    NO_DATA = "no data"
    RUNNING = "running"  # another process holds the run's lock
    INTERRUPTED = "interrupted"  # stopped by a signal (Ctrl-C): running it again resumes from its checkpoint

    @property
    def failed(self) -> bool:
        return self in (RunStatus.FAILED, RunStatus.DIVERGED, RunStatus.NOT_LEARNING, RunStatus.OOM)


@dataclass
class Attempt:
    """The outcome of one attempt at a run."""

    run_dir: str
    status: RunStatus
    error: str = ""
    run_id: str = ""

    def to_json(self) -> dict:
        return {**asdict(self), "status": self.status.value}

    def write(self) -> None:
        write_json_atomic(Path(self.run_dir) / STATUS, self.to_json())

    @classmethod
    def from_json(cls, data: dict) -> "Attempt":
        return cls(data["run_dir"], RunStatus(data["status"]), data.get("error", ""), data.get("run_id", ""))

    @classmethod
    def read(cls, run_dir: Path) -> "Attempt | None":
        path = run_dir / STATUS
        if not path.is_file():
            return None
        try:
            return cls.from_json({**json.loads(path.read_text()), "run_dir": str(run_dir)})
        except (ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{path} is not a readable status ({type(exc).__name__}: {exc}); delete it (the run "
                             f"is then planned from its checkpoint or from the start)") from None


def locked_record(run_dir: Path, run_id: str, attempt: Callable[[], Attempt]) -> Attempt:
    """Make one attempt at a run while holding its lock and write its outcome to status.json; a run that
    another process holds is left alone and reported as running."""
    try:
        with RunLock(run_dir):
            record = attempt()
            record.write()
    except RunLocked as exc:
        return Attempt(str(run_dir), RunStatus.RUNNING, str(exc), run_id)
    return record


def failure_text(exc: BaseException) -> str:
    """A failure as status.json records it: one line."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


def folder_status(run_dir: Path, run_id: str) -> tuple[RunStatus, str, RunResult | None]:
    """Where a run stands by its folder alone, its last attempt's error, and its result if it finished: finished
    by its result, else running by its lock, else the outcome its status.json records (failed, interrupted, ...),
    else partial or new."""
    record = Attempt.read(run_dir)
    error = record.error if record else ""
    result = finished_result(run_dir, run_id)
    if result is not None:
        return RunStatus.DONE, error, result
    status = current_status(run_dir, run_id)
    if status in (RunStatus.PARTIAL, RunStatus.NEW) and record is not None and record.status is not RunStatus.DONE:
        status = record.status
    return status, error, None


def current_status(run_dir: Path, run_id: str) -> RunStatus:
    if finished_result(run_dir, run_id) is not None:
        return RunStatus.DONE
    if is_locked(run_dir):
        return RunStatus.RUNNING
    record = Attempt.read(run_dir)
    if record is not None and record.status.failed:
        return record.status
    if (run_dir / CHECKPOINT).is_file():
        return RunStatus.PARTIAL
    return RunStatus.NEW


def wait_for_others(runs: list, poll_seconds: float = 2.0) -> None:
    """Runs (``PlannedRun``) that another process holds: wait until each lock is released, then take each run's
    status from its folder, so that this process's runs.csv is complete too (Ctrl-C stops waiting)."""
    held = [run for run in runs if run.status is RunStatus.RUNNING and run.run_dir is not None]
    if held:
        print(f"waiting for {len(held)} run(s) that another process is training", file=sys.stderr, flush=True)
    while any(is_locked(run.run_dir) for run in held):
        time.sleep(poll_seconds)
    for run in held:
        run.status = current_status(run.run_dir, run.run_id)
