"""``bench run-matrix``: plan a study, run what is not done, record every outcome in its run folder.

One runner serves one job and N jobs: chains of runs (a cell's phases, in order) are
executed in this process (``--jobs 1``, progress shown on the terminal) or in N
worker processes, each writing its runs' output to the run folder's ``train.log``
(what a worker does: ``bench.study.matrix.worker``). A failed run (divergence, out of memory, an error) is recorded
with its status and error and the matrix goes on; the index ``runs.csv`` is rebuilt from the run folders after
every chain (bench.study.matrix.runs_table).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.fileio import require_folder, update_bytes
from bench.ownership import claim_matrix_folder, record_matrix_owner
from bench.plugins import Plugin, for_other_processes
from bench.run_files import CHECKPOINT, MATRIX_CONFIG
from bench.study.matrix.config import MatrixConfig, register_corpora
from bench.study.matrix.eta import MatrixClock, outcome_of
from bench.study.matrix.grid import load_config
from bench.study.matrix.launch import ClusterSettings
from bench.study.matrix.plan import PlannedRun, plan
from bench.study.matrix.pretrained import PretrainedRun, check_corpora, plan_pretrained, score_pretrained
from bench.study.matrix.run_status import Attempt, RunStatus, wait_for_others
from bench.study.matrix.runs_table import matrix_notes, write_runs_table
from bench.study.matrix.worker import WorkerSettings, init_worker, run_chain, worker_chain


@dataclass
class MatrixOutcome:
    config: MatrixConfig
    results_dir: Path
    chains: list[list[PlannedRun]]
    pretrained: list[PretrainedRun] = field(default_factory=list)
    csv_path: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # run folders kept but not counted as today's runs


@dataclass(frozen=True)
class Execution:
    """How ``bench run-matrix`` runs what a plan has not done: here (``jobs`` processes of ``threads`` CPU threads
    each; by default the cores shared among them) or as cluster jobs (``cluster``)."""

    jobs: int = 1
    threads: int | None = None
    retry_failed: bool = False  # run failed or diverged runs again
    show_progress: bool = True
    cluster: ClusterSettings | None = None

    def check(self) -> None:
        from bench.engine.hardware.device import check_threads

        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise BenchError("run-matrix under torchrun would run the whole matrix in every process; it spreads its "
                             "runs itself (--jobs N here, --launcher slurm --gpus-per-run N on a cluster); under "
                             "torchrun, run one run: torchrun --nproc-per-node N cli.py train ...")
        if self.jobs < 1:
            raise BenchError("--jobs must be at least 1")
        check_threads(self.threads)
        if self.cluster is not None:
            if self.jobs != 1:
                raise BenchError("--jobs runs processes here, but --launcher slurm runs cluster jobs (--max-parallel "
                                 "caps how many run at once); leave --jobs out")
            self.cluster.check()


def run_matrix(config_path: str | Path, results_dir: str | Path | None = None, data_dir: str | Path | None = None,
               execution: Execution = Execution(), dry_run: bool = False,
               records: str | Path | None = None) -> MatrixOutcome:
    """Plan a matrix and, unless ``dry_run``, run what is not done as ``execution`` says; a run whose record is in
    ``records`` (bench.study.matrix.records) and that was not started here is done."""
    from bench.arguments import flag_argument, instance_argument, optional_path, path_argument
    from bench.data.paths import resolve_data_dir

    config_path, dry_run = path_argument(config_path, "the matrix config"), flag_argument(dry_run, "dry_run")
    results_dir, data_dir = optional_path(results_dir, "results_dir"), optional_path(data_dir, "data_dir")
    records = optional_path(records, "records")
    instance_argument(execution, Execution, "execution", "Execution(jobs=2)").check()
    config = load_config(config_path)
    plugins = for_other_processes(execution.cluster is not None) if execution.jobs > 1 or execution.cluster else []
    results = require_folder(results_dir or Path("results") / config.name, "results folder")
    claim_matrix_folder(results, config.path)
    data = resolve_data_dir(data_dir or config.data_dir)
    new_corpora = [data / name for name in config.corpora if not (data / name).exists()]
    try:
        register_corpora(config, data)
        check_corpora(config.pretrained, data)
        outcome = MatrixOutcome(config, results, plan(config, results, data),
                                plan_pretrained(config.pretrained, results, data))
    except BaseException:  # a refused config leaves no corpus of its own behind
        for folder in new_corpora:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    created = not results.exists()
    if records is not None:
        from bench.study.matrix.records import adopt_records

        adopted = adopt_records([run for chain in outcome.chains for run in chain], Path(records), data, dry_run)
        print(f"{adopted} run(s) done from their records in {records}", file=sys.stderr)
    if dry_run:
        return outcome
    try:
        return _execute(outcome, execution, plugins)
    except Exception:  # a full disk, say; Ctrl-C keeps what the runs in progress saved
        if created and not any(results.glob("*/checkpoint.pt")) and not any(results.glob("*/result.json")):
            shutil.rmtree(results, ignore_errors=True)  # nothing worth keeping: no folder left behind
        raise


def _execute(outcome: MatrixOutcome, execution: Execution, plugins: list[Plugin]) -> MatrixOutcome:
    """Run what a planned matrix has not done yet and write its runs.csv."""
    jobs, cluster, retry_failed = execution.jobs, execution.cluster, execution.retry_failed
    config, results = outcome.config, outcome.results_dir
    results.mkdir(parents=True, exist_ok=True)
    record_matrix_owner(results, config.path)
    update_bytes(results / MATRIX_CONFIG, config.path.read_bytes())
    todo = []
    for chain in outcome.chains:
        pending = [r for r in chain if _should_run(r, retry_failed)]
        if pending and all(r.resolved is not None for r in chain):  # a chain with no data cannot run
            todo.append(pending)
    cpu_threads = None if cluster else cpu_threads_per_run(jobs, execution.threads)
    where = ("as Slurm jobs" if cluster else "in-process" if jobs == 1 else f"{jobs} at a time")
    where += f", {cpu_threads} CPU thread(s) each" if cpu_threads else ""
    resumed = {id(run) for chain in todo for run in chain if run.status in (RunStatus.PARTIAL, RunStatus.INTERRUPTED)}
    resuming = len(resumed)
    where = (f"{resuming} of them resume from a checkpoint; " if resuming else "") + where
    print(f"{config.name}: {sum(map(len, outcome.chains))} runs planned, {sum(map(len, todo))} to run ({where})",
          file=sys.stderr)
    finished = (_cluster_chains(todo, outcome, cluster, plugins) if cluster
                else finished_chains(todo, jobs, execution.show_progress, cpu_threads, plugins))
    clock = MatrixClock([run.train_flops or 0.0 for chain in todo for run in chain], jobs if not cluster else len(todo))
    reported = 0
    try:
        for pending, records in finished:
            reported += 1
            _report(pending, records, f"[{reported}/{len(todo)}]", clock, resumed)
            write_runs_table(outcome.chains, config, results, outcome.pretrained)
    except KeyboardInterrupt:
        for pending, records in _rest_after_interrupt(finished):
            reported += 1
            _report(pending, records, f"[{reported}/{len(todo)}]", clock, resumed)
        write_runs_table(outcome.chains, config, results, outcome.pretrained)
        print(f"stopped: {_stopped_counts(outcome.chains, todo)}; run the same command again to resume",
              file=sys.stderr)
        raise
    if cluster is None:  # cluster jobs are collected by the next run-matrix instead
        wait_for_others([run for chain in outcome.chains for run in chain])
    _score_pretrained(outcome, retry_failed, here=cluster is None)
    outcome.csv_path = write_runs_table(outcome.chains, config, results, outcome.pretrained)
    outcome.notes = matrix_notes(results)
    for run in [run for chain in outcome.chains for run in chain] + outcome.pretrained:
        outcome.counts[run.status.value] = outcome.counts.get(run.status.value, 0) + 1
    return outcome


def _report(pending: list[PlannedRun], records: list[Attempt], label: str, clock: MatrixClock, resumed: set) -> None:
    """A chain's outcome: each run's status (from its record) on a line of its own, then the matrix's progress. A
    run ``resumed`` from its checkpoint trained part of its plan here: the clock's rate does not count it."""
    for run, record in zip(pending, records):
        run.status = record.status
        error = f": {record.error}" if record.error else outcome_of(run.run_dir)
        print(f"{label} {run.run_dir.name}: {run.status}{error}", file=sys.stderr)
    trained = [run.status is RunStatus.DONE and id(run) not in resumed for run in pending]
    print(f"    {clock.finished([run.train_flops or 0.0 for run in pending], trained)}", file=sys.stderr)


def _rest_after_interrupt(finished: Iterator) -> Iterator:
    """The chains a runner still yields once Ctrl-C was taken outside it (here, between two chains): told of it, it
    starts nothing more and yields the runs in progress as they stop, so that the closing line counts them; a
    runner that took it itself has ended and yields nothing."""
    try:
        chain = finished.throw(KeyboardInterrupt)
    except (KeyboardInterrupt, StopIteration):
        return
    yield chain
    try:
        yield from finished
    except KeyboardInterrupt:  # the runner's end of an interruption, or a second Ctrl-C: stop waiting
        return


def _stopped_counts(chains: list[list[PlannedRun]], todo: list[list[PlannedRun]]) -> str:
    """Where the runs of a matrix stopped by Ctrl-C stand, whichever invocation left them so, e.g. "2 runs finished,
    2 interrupted (both saved a checkpoint), 2 not started"."""
    runs, here = [run for chain in chains for run in chain], {id(run) for chain in todo for run in chain}
    done = [run for run in runs if run.status is RunStatus.DONE]
    before = sum(id(run) not in here for run in done)
    parts = [f"{len(done)} run{'s' * (len(done) != 1)} finished" + (f" ({before} before this command)" if before
                                                                    else "")]
    halfway = (RunStatus.INTERRUPTED, RunStatus.PARTIAL)  # stopped part way, by this command or an earlier one
    stopped = [run for run in runs if run.status in halfway]
    if stopped:
        saved = sum((run.run_dir / CHECKPOINT).is_file() for run in stopped)
        parts.append(f"{len(stopped)} interrupted ({_saved(saved, len(stopped))})")
    labels = {RunStatus.NEW: "not started", RunStatus.RUNNING: "running in another process"}
    others = Counter(labels.get(run.status, str(run.status)) for run in runs
                     if run.status is not RunStatus.DONE and run.status not in halfway)
    return ", ".join(parts + [f"{n} {label}" for label, n in others.items()])


def _saved(saved: int, stopped: int) -> str:
    """How many interrupted runs resume: one stopped before its first checkpoint starts anew, and the line must not
    say otherwise."""
    if saved == stopped:
        return {1: "it saved a checkpoint", 2: "both saved a checkpoint"}.get(saved, f"all {saved} saved a checkpoint")
    if saved == 0:
        return "before its first checkpoint: it starts anew" if stopped == 1 else \
            "before their first checkpoint: they start anew"
    return f"{saved} saved a checkpoint, " + ("the other starts anew" if stopped - saved == 1 else
                                              "the others start anew")


def _score_pretrained(outcome: MatrixOutcome, retry_failed: bool, here: bool) -> None:
    """Score the [[pretrained]] models in this process (not on a cluster's login node: there they wait)."""
    todo = [run for run in outcome.pretrained if _should_run(run, retry_failed)]
    if todo and not here:
        print(f"{len(todo)} pretrained model run(s) left for `bench run-matrix` without --launcher, on a machine "
              f"meant for it", file=sys.stderr)
        return
    for k, run in enumerate(todo, 1):
        score_pretrained(run)
        error = f": {run.problem}" if run.problem else ""
        print(f"[pretrained {k}/{len(todo)}] {run.run_dir.name}: {run.status}{error}", file=sys.stderr)
        write_runs_table(outcome.chains, outcome.config, outcome.results_dir, outcome.pretrained)


def _should_run(run: PlannedRun | PretrainedRun, retry_failed: bool) -> bool:
    return (run.status in (RunStatus.NEW, RunStatus.PARTIAL, RunStatus.INTERRUPTED)
            or (retry_failed and run.status.failed))


def cpu_threads_per_run(jobs: int, threads: int | None) -> int | None:
    """Torch threads per run on CPU (none on GPUs unless asked): ``threads``, or the cores shared among the runs; a
    warning when the runs at a time ask for more threads than the machine has cores."""
    from bench.engine.hardware.device import available_cores, cuda_devices, default_threads

    if threads is None and cuda_devices():
        return None
    chosen, cores = threads or default_threads(jobs), available_cores()
    if jobs * chosen > cores:
        print(f"warning: {jobs} runs x {chosen} threads is more than this machine's {cores} cores; "
              f"every step will wait for a busy core (lower --jobs or --threads)", file=sys.stderr)
    return chosen


def finished_chains(todo: list[list[PlannedRun]], jobs: int, show_progress: bool, threads: int | None,
                    plugins: list[Plugin] = ()) -> Iterator[tuple[list[PlannedRun], list[Attempt]]]:
    """Run each chain and yield it with its records as it finishes: here, or in ``jobs`` processes. Ctrl-C
    stops the matrix: the runs in progress checkpoint, nothing new starts, and KeyboardInterrupt is raised once
    their records are yielded."""
    if jobs == 1:
        yield from _chains_here(todo, show_progress, threads)
    else:
        yield from _chains_in_workers(todo, jobs, threads, plugins)


def _chains_here(todo: list[list[PlannedRun]], show_progress: bool, threads: int | None
                 ) -> Iterator[tuple[list[PlannedRun], list[Attempt]]]:
    from bench.engine.trainer import TrainingInterrupted

    settings = WorkerSettings(log_to_file=False, show_progress=show_progress, threads=threads)
    for pending in todo:
        try:
            records = run_chain([r.resolved for r in pending], settings)
        except (TrainingInterrupted, KeyboardInterrupt):
            yield pending, _records_on_disk(pending)
            raise KeyboardInterrupt from None
        yield pending, records


@dataclass
class _Workers:
    """A pool of worker processes with every chain submitted, and this process's Ctrl-C still held."""

    pool: Any  # concurrent.futures.ProcessPoolExecutor
    futures: dict  # future -> its chain
    stopped: Any  # the event that tells every worker to stop
    held: set  # the signal mask to go back to: Ctrl-C is taken while waiting for the workers
    interrupted: bool  # a Ctrl-C came while the pool was being built


def _start_workers(todo: list[list[PlannedRun]], jobs: int, threads: int | None, plugins: list[Plugin]) -> _Workers:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from bench.engine.hardware.device import cuda_devices

    ctx = mp.get_context("spawn")
    n_gpus = cuda_devices()
    gpu_queue = None
    if n_gpus > 1:  # one GPU per worker, round robin
        gpu_queue = ctx.Queue()
        for k in range(jobs):
            gpu_queue.put(k % n_gpus)
    settings = WorkerSettings(log_to_file=True, show_progress=True, threads=threads)  # lines in each train.log
    stopped = ctx.Event()
    # Workers are started with Ctrl-C held (blocked, not lost): one that got it while still importing would die and
    # break the pool. Each worker takes it once its handler is set (init_worker), this process once it waits for
    # them. Meanwhile another of this process's threads may take it, and Python would raise it here wherever the
    # main thread is, the pool half built: it is noted instead, and acted on once the pool has its runs.
    noted, previous = [], signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:  # ignored (a shell's `&`): the workers must inherit that, not a handler
        signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=init_worker,
                                   initargs=(gpu_queue, os.getpid(), stopped, list(plugins)))
        futures = {pool.submit(worker_chain, [r.resolved.to_json() for r in pending], settings): pending
                   for pending in todo}
    finally:
        signal.signal(signal.SIGINT, previous)
    return _Workers(pool, futures, stopped, held, bool(noted))


def _chains_in_workers(todo: list[list[PlannedRun]], jobs: int, threads: int | None, plugins: list[Plugin]
                       ) -> Iterator[tuple[list[PlannedRun], list[Attempt]]]:
    """The chains in ``jobs`` worker processes: a first Ctrl-C stops every worker at its next step (each saves a
    checkpoint), a second stops waiting for them."""
    from concurrent.futures import as_completed

    from bench.engine.trainer import TrainingInterrupted

    workers = _start_workers(todo, jobs, threads, plugins)
    waiting, interrupted, abandon = set(workers.futures), workers.interrupted, False
    if interrupted:
        _stop_all(workers.stopped, waiting)
    try:
        while waiting:
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, workers.held)
                for future in as_completed(set(waiting)):
                    waiting.discard(future)
                    if future.cancelled():
                        continue
                    pending = workers.futures[future]
                    try:
                        records = future.result()
                    except (TrainingInterrupted, KeyboardInterrupt):  # the worker got the Ctrl-C too
                        records, interrupted = _records_on_disk(pending), True
                        _stop_all(workers.stopped, waiting)
                    except Exception as exc:  # the worker process itself died
                        records = [Attempt(str(pending[0].run_dir), RunStatus.FAILED, f"worker died: {exc}")]
                    yield pending, records
            except KeyboardInterrupt:
                abandon = interrupted  # a second Ctrl-C: stop waiting for the runs in progress
                if abandon:
                    raise
                interrupted = True
                _stop_all(workers.stopped, waiting)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, workers.held)
        workers.pool.shutdown(wait=not abandon, cancel_futures=True)
    if interrupted:
        raise KeyboardInterrupt


def _cluster_chains(todo: list[list[PlannedRun]], outcome: MatrixOutcome, cluster: ClusterSettings,
                    plugins: list[Plugin]) -> Iterator[tuple[list[PlannedRun], list[Attempt]]]:
    from bench.study.matrix.launch import submit, wait_for

    jobs = submit(todo, outcome.results_dir, outcome.config.name, cluster, plugins)
    print(f"submitted {len(jobs)} job(s): {', '.join(job.job_id for job in jobs)}; their logs are in "
          f"{outcome.results_dir / '.submitit'}", file=sys.stderr)
    if cluster.wait:
        yield from wait_for(jobs, todo)


def _stop_all(stopped, waiting) -> None:
    """Start nothing more: cancel what the pool has not handed out, and tell the workers about the rest."""
    stopped.set()
    for future in waiting:
        future.cancel()


def _records_on_disk(pending: list[PlannedRun]) -> list[Attempt]:
    """After an interruption: what each run of a chain recorded in its status.json, up to the one stopped."""
    records = []
    for run in pending:
        record = Attempt.read(run.run_dir)
        if record is None:
            break
        records.append(record)
        if record.status is not RunStatus.DONE:
            break
    return records
