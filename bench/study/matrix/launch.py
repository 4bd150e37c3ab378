"""A matrix's runs as cluster jobs, through submitit: ``bench run-matrix CONFIG --launcher slurm``.

Each chain of runs (a cell's phases) is one job of a Slurm job array; ``max_parallel``
caps the jobs that run at once. A job receives the resolved run configurations and
checks their run ids, as a local worker does, and takes each run's lock, so two
submissions of one matrix never train a run twice. When a job's time is nearly up,
Slurm signals it (SIGUSR2): the run checkpoints at its next step and the job is
requeued, to resume from that checkpoint. A job of more than one GPU runs the run on
that many processes (DistributedDataParallel), as ``torchrun`` would.

On one machine, a matrix runs through ``--jobs`` (bench.study.matrix.execute), one path with one Ctrl-C behaviour;
submitit's own local executor stands in for Slurm in the tests only (``submit(..., executor="local")``).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import submitit

from bench.errors import BenchError
from bench.plugins import Plugin, load_in_worker
from bench.study.matrix.plan import PlannedRun
from bench.study.matrix.run_status import Attempt, RunStatus
from bench.study.matrix.worker import WorkerSettings, run_chain

LAUNCHERS = ("local", "slurm")


@dataclass(frozen=True)
class ClusterSettings:
    partition: str | None = None
    gpus_per_run: int = 1  # 0: a CPU job
    time_limit_min: float = 240
    max_parallel: int | None = None  # jobs of the array running at once
    wait: bool = False  # wait for the jobs and collect them
    signal_delay_s: int | None = None  # SIGUSR2 this long before the time limit (None: submitit's default)
    threads: int | None = None  # torch CPU threads of each job (--threads)

    def check(self) -> None:
        if self.gpus_per_run < 0:
            raise BenchError(f"--gpus-per-run must be 0 (a CPU job) or more, not {self.gpus_per_run}")
        if self.time_limit_min < 1:
            raise BenchError(f"--time-limit must be at least 1 minute, not {self.time_limit_min}")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise BenchError(f"--max-parallel must be at least 1, not {self.max_parallel}")
        if shutil.which("sbatch") is None:
            raise BenchError("--launcher slurm needs a Slurm cluster (sbatch is not on PATH); use --launcher local")


def cluster_settings(launcher: str, wait: bool | None = None, **given) -> ClusterSettings | None:
    """``--launcher`` and its options as the cluster settings of an Execution (None: this machine's processes);
    the options of cluster jobs are refused with the local launcher, where they would do nothing."""
    if launcher not in LAUNCHERS:
        instead = "; --jobs N runs a matrix in processes of this machine" if launcher == "submitit-local" else ""
        raise BenchError(f"unknown launcher {launcher!r}; launchers: {', '.join(LAUNCHERS)}{instead}")
    options = {"--partition": "partition", "--gpus-per-run": "gpus_per_run", "--time-limit": "time_limit_min",
               "--max-parallel": "max_parallel"}
    if launcher == "local":
        if chosen := [flag for flag, key in options.items() if given.get(key) is not None] + ["--wait"] * bool(wait):
            raise BenchError(f"{', '.join(chosen)} set(s) cluster jobs, but --launcher is local (this machine's "
                             f"processes, --jobs); add --launcher slurm, or leave them out")
        return None
    return ClusterSettings(wait=bool(wait), **{k: v for k, v in given.items() if v is not None})  # the rest: defaults


class ChainJob(submitit.helpers.Checkpointable):
    """One cell's runs as one job; ``checkpoint`` (called by submitit at timeout) requeues the same job, which
    resumes each run from its own checkpoint."""

    def __init__(self, configs: list[dict], threads: int | None = None, plugins: list[Plugin] = ()):
        self.configs = configs
        self.threads = threads
        self.plugins = list(plugins)  # what the matrix's process knew beyond the toolkit

    def __call__(self) -> list[dict]:
        from bench.engine.trainer import TrainingInterrupted

        load_in_worker(self.plugins)
        if submitit.JobEnvironment().num_tasks > 1:
            submitit.helpers.TorchDistributedEnvironment().export()  # RANK, WORLD_SIZE, MASTER_ADDR, ...
        try:
            records = run_chain(self.configs, WorkerSettings(log_to_file=True, show_progress=True,  # train.log
                                                             threads=self.threads))
        except TrainingInterrupted as exc:
            if exc.signal_name == "SIGUSR2":  # time is nearly up: the checkpoint is saved, let submitit requeue
                os.kill(os.getpid(), signal.SIGUSR2)
                time.sleep(60)  # submitit's handler exits this process
            raise
        return [record.to_json() for record in records]


def submit(todo: list[list[PlannedRun]], results_dir: Path, name: str, settings: ClusterSettings,
           plugins: list[Plugin] = (), executor: str = "slurm") -> list:
    """Submit one job per chain to Slurm (``executor="local"``: submitit's stand-in, for the tests); returns the
    submitit jobs."""
    executor = submitit.AutoExecutor(folder=results_dir / ".submitit" / "%j", cluster=executor)
    gpus = settings.gpus_per_run
    executor.update_parameters(name=f"bench-{name}", timeout_min=settings.time_limit_min, gpus_per_node=gpus,
                               tasks_per_node=max(gpus, 1), slurm_partition=settings.partition,
                               slurm_array_parallelism=settings.max_parallel or len(todo))
    if settings.signal_delay_s is not None:
        executor.update_parameters(signal_delay_s=settings.signal_delay_s)
    with executor.batch():
        jobs = [executor.submit(ChainJob([run.resolved.to_json() for run in chain], settings.threads, plugins))
                for chain in todo]
    return jobs


def wait_for(jobs: list, todo: list[list[PlannedRun]]):
    """Yield each chain with its records as its job ends (a job that failed outright: one failed record)."""
    for job, chain in zip(jobs, todo):
        try:
            records = [Attempt.from_json(r) for r in job.results()[0]]  # a job of several tasks: rank 0's
        except Exception as exc:  # the job itself failed: its log is in the .submitit folder
            records = [Attempt(str(chain[0].run_dir), RunStatus.FAILED, f"job {job.job_id} failed: {job_error(exc)}")]
        yield chain, records


def job_error(exc: Exception) -> str:
    """The error a failed job raised, in one line: submitit wraps it in a trace between dashed lines, followed by
    where the logs are; its last line would say only that."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    dashes = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    inside = [line for line in lines[dashes[0] + 1:dashes[1]] if line] if len(dashes) >= 2 else []
    return (inside[-1] if inside else next((line for line in lines if line), type(exc).__name__))[:300]
