"""What a matrix's worker does with the chains of runs it is handed: run them one after another, each under its
lock, each outcome recorded in its status.json; here for ``--jobs 1``, in a worker process for ``--jobs N``, in a
cluster job (``bench.study.matrix.launch``). A worker receives each run's resolved configuration and checks its run id; it
does not resolve again. A worker process stops what it does when its matrix process dies.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from bench.engine.hardware.distributed import Ranks
from bench.engine.resolve import ResolvedRun
from bench.errors import USER_ERRORS
from bench.plugins import load_in_worker
from bench.run_files import ERROR, TRAIN_LOG
from bench.study.matrix.run_status import Attempt, RunStatus, failure_text, locked_record

ORPHAN_GRACE_SECONDS = 120.0  # for a run in progress to reach its next step and checkpoint
_ORPHANED = threading.Event()  # set in a worker whose matrix process died
_RUNNING = threading.Event()  # set in a worker while it executes a run
_INTERRUPTED = threading.Event()  # set in a worker that got Ctrl-C: it starts nothing more
_MATRIX_STOPPED = None  # in a worker: the multiprocessing Event its matrix sets on Ctrl-C
_PLUGIN_REFUSAL: str | None = None  # in a worker: why a plug-in of its matrix could not be imported here


@dataclass(frozen=True)
class WorkerSettings:
    log_to_file: bool  # write each run's output to its train.log (worker processes)
    show_progress: bool
    threads: int | None = None  # torch threads per worker process on CPU


def worker_chain(runs: list[dict], settings: WorkerSettings) -> list[Attempt]:
    """:func:`run_chain` in a worker process, where Ctrl-C interrupts only while a chain runs (an idle worker
    that died of it would break the pool and kill the runs in progress before they checkpoint), and a chain
    handed out after a Ctrl-C is not started."""
    from bench.engine.trainer import TrainingInterrupted

    if _INTERRUPTED.is_set() or (_MATRIX_STOPPED is not None and _MATRIX_STOPPED.is_set()):
        return []
    if _PLUGIN_REFUSAL is not None:
        return [Attempt(runs[0]["spec"]["out_dir"], RunStatus.FAILED, _PLUGIN_REFUSAL)]
    between_chains = signal.getsignal(signal.SIGINT)
    if between_chains is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run_chain(runs, settings)
    except (TrainingInterrupted, KeyboardInterrupt):
        _INTERRUPTED.set()
        raise
    finally:
        signal.signal(signal.SIGINT, between_chains)


def _note_interrupt(signum, frame) -> None:
    _INTERRUPTED.set()


def run_chain(runs: list[ResolvedRun | dict], settings: WorkerSettings) -> list[Attempt]:
    """Execute runs one after another (a cell's phases); stop at the first that does not finish. A run's
    configuration comes as it is (in this process) or as JSON (from another), checked against its run id."""
    from bench.engine.hardware.device import use_threads

    use_threads(settings.threads)  # never torch's own default, which another process may choose differently
    records = []
    for resolved in runs:
        if _ORPHANED.is_set():  # the matrix that sent this work is gone: start nothing new
            os._exit(1)
        _RUNNING.set()
        try:
            record = run_recorded(resolved, settings)
        finally:
            _RUNNING.clear()
        records.append(record)
        if record.status is not RunStatus.DONE:
            break  # a later phase needs this one's weights
    return records


def run_recorded(resolved: ResolvedRun | dict, settings: WorkerSettings) -> Attempt:
    """Execute one run, catching its failure; the outcome is also written to its status.json. A run that
    another process is training is left alone and reported as running."""
    resolved = resolved if isinstance(resolved, ResolvedRun) else ResolvedRun.from_json(resolved)
    run_dir = Path(resolved.spec.out_dir)
    if not Ranks.from_env().is_main:  # one run on several processes: the main one holds the lock and records
        return _attempt(resolved, run_dir, settings, main=False)
    return locked_record(run_dir, resolved.run_id(), lambda: _attempt(resolved, run_dir, settings))


def _attempt(resolved, run_dir: Path, settings: WorkerSettings, main: bool = True) -> Attempt:
    from bench.engine.run import execute
    from bench.engine.trainer import TrainingInterrupted

    if main:
        (run_dir / ERROR).unlink(missing_ok=True)  # from an earlier attempt
    log = open(run_dir / TRAIN_LOG, "a") if settings.log_to_file and main else nullcontext(None)
    with log as console:
        if console is not None:
            print(f"== {run_dir.name}", file=console, flush=True)
        try:
            result = execute(resolved, console=console, show_progress=settings.show_progress, locked=True)
            return Attempt(str(run_dir), RunStatus.DONE, run_id=result.run_id)
        except (TrainingInterrupted, KeyboardInterrupt) as exc:
            if console is not None:
                print(f"interrupted: {exc}", file=console, flush=True)
            if main:
                Attempt(str(run_dir), RunStatus.INTERRUPTED, failure_text(exc) if str(exc) else "interrupted",
                          resolved.run_id()).write()
            raise
        except BaseException as exc:  # a failed run is recorded and the matrix goes on
            record = Attempt(str(run_dir), _classify(exc), failure_text(exc), resolved.run_id())
            if main:
                (run_dir / ERROR).write_text(traceback.format_exc())
            if console is not None:
                print(f"{record.status}: {record.error}", file=console, flush=True)
            return record


def _classify(exc: BaseException) -> RunStatus:
    from bench.engine.learning import TrainingNotLearning
    from bench.engine.trainer import TrainingDiverged

    if isinstance(exc, TrainingDiverged):
        return RunStatus.DIVERGED
    if isinstance(exc, TrainingNotLearning):
        return RunStatus.NOT_LEARNING
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return RunStatus.OOM
    return RunStatus.FAILED


def init_worker(gpu_queue, parent: int, stopped, plugins: list) -> None:
    global _MATRIX_STOPPED
    _MATRIX_STOPPED = stopped
    # a matrix started in the background (a shell's `&`) ignores Ctrl-C, as the shell asked: so do its workers
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _note_interrupt)  # between chains; see worker_chain
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held since the matrix started this process
    if gpu_queue is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_queue.get())
    threading.Thread(target=_stop_when_orphaned, args=(parent,), daemon=True).start()
    global _PLUGIN_REFUSAL
    try:
        load_in_worker(plugins)
    except USER_ERRORS as exc:  # raised here it would break the pool, its message lost: each chain says it instead
        _PLUGIN_REFUSAL = str(exc)


def _stop_when_orphaned(parent: int) -> None:
    """A worker whose matrix process died would finish its queue and then hang: stop it as on SIGTERM (a run
    in progress checkpoints at its next step), and exit after a grace period whatever it is doing."""
    while os.getppid() == parent:
        time.sleep(1.0)
    _ORPHANED.set()
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + ORPHAN_GRACE_SECONDS
    while _RUNNING.is_set() and time.monotonic() < deadline:
        time.sleep(0.2)
    os._exit(1)
