"""``bench run-matrix`` and ``bench report``: a whole study and its report."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import data_dir_option, echo_err, plugin_option
from bench.errors import BenchError
from bench.metrics import figure_metrics

PLAN_COLUMNS = ["phase", "status", "vocab", "params_total", "bptt", "train_tokens", "train_chars", "train_flops", "run",
                "problem"]


def run_matrix_command(
    config: Path = typer.Argument(..., help="Matrix config (TOML), e.g. configs/quick.toml."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (one row per run) and stop."),
    jobs: int = typer.Option(1, "--jobs", help="Runs at a time (processes; one GPU each where there are several)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads per run (default: "
                                          "$OMP_NUM_THREADS, else the cores shared among the --jobs runs); "
                                          "a run's own `threads` setting wins.", show_default=False),
    results: Optional[Path] = typer.Option(None, "--results", help="Results folder (default: results/<matrix "
                                           "name>)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed or diverged runs again."),
    records: Optional[Path] = typer.Option(None, "--records", help="A folder of finished runs' records trained "
                                           "elsewhere (bench records export): a run not started here whose whole "
                                           "record is there is done, its folder made from the record."),
    data_dir: Optional[Path] = data_dir_option(),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    launcher: str = typer.Option("local", "--launcher", help="local: processes of this machine (--jobs); slurm: "
                                 "a Slurm job array through submitit."),
    partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition."),
    gpus_per_run: Optional[int] = typer.Option(None, "--gpus-per-run", help="GPUs of each job (default 1; 0: a "
                                               "CPU job; more than 1: one run on that many processes, "
                                               "DistributedDataParallel).",
                                               show_default=False),
    time_limit: Optional[int] = typer.Option(None, "--time-limit", help="Minutes per job (default 240); a job "
                                             "whose time is up checkpoints and is requeued.", show_default=False),
    max_parallel: Optional[int] = typer.Option(None, "--max-parallel", help="Jobs of the array running at once."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the cluster jobs and write runs.csv when they end "
                              "(otherwise run the same command later to collect them)."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Run every model x tokenizer x dataset x seed of a config; finished runs are skipped, interrupted ones
    resume, failures are recorded. Writes runs.csv beside the per-run folders."""
    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.matrix.launch import cluster_settings
    from bench.study.matrix.run_status import RunStatus
    from bench.text_tables import text_table

    cluster = cluster_settings(launcher, partition=partition, gpus_per_run=gpus_per_run, time_limit_min=time_limit,
                               max_parallel=max_parallel, wait=wait or None, threads=threads)
    execution = Execution(jobs=jobs, threads=threads, retry_failed=retry_failed, show_progress=not quiet,
                          cluster=cluster)
    outcome = run_matrix(config, results, data_dir, execution, dry_run=dry_run, records=records)
    if dry_run:
        rows = [run.row() for chain in outcome.chains for run in chain] + [r.row() for r in outcome.pretrained]
        axes = [k for k in rows[0] if k not in PLAN_COLUMNS] if rows else []
        print(text_table(rows, axes + PLAN_COLUMNS))
        total = sum(r.get("train_flops") or 0 for r in rows)
        new = [r for r in rows if r.get("status") != "done"]
        print(f"{len(rows)} runs, {len(new)} to train; estimated training compute {total:.4g} FLOPs in all, "
              f"{sum(r.get('train_flops') or 0 for r in new):.4g} still to train; results in {outcome.results_dir}")
        return
    print(f"{outcome.config.name}: " + ", ".join(f"{n} {s}" for s, n in sorted(outcome.counts.items())))
    print(f"runs table: {outcome.csv_path}")
    for note in outcome.notes:
        echo_err(f"note: {note}")
    unfinished = sum(n for s, n in outcome.counts.items() if s != RunStatus.DONE)
    if unfinished:
        raise BenchError(f"{unfinished} run(s) did not finish (see status and error in {outcome.csv_path})")


def report_command(
    results: Path = typer.Argument(..., metavar="RESULTS_DIR", help="A matrix's results folder (its run folders)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: reports/<matrix name>)."),
    metric: str = typer.Option("byte", "--metric", help="The loss every figure draws: " + ", ".join(
        f"{m.name} ({m.unit})" for m in figure_metrics()) + ". The tables show every metric."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Write report.md, a self-contained report.html and every figure (PNG and SVG) from a matrix's results."""
    from bench.study.report.report import build_report

    path = build_report(results, out, metric)
    print(f"report: {path} (and {path.with_suffix('.html')})")


def compare_command(
    first: Path = typer.Argument(..., metavar="A", help="A run folder, or a matrix's results folder."),
    second: Path = typer.Argument(..., metavar="B", help="Another of the same kind."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Two runs, or two matrices' results, side by side on the same test text: the same metrics, and A - B with
    its interval (over documents for two runs; over seeds, with a Holm-adjusted p-value, for two matrices)."""
    from bench.fileio import json_text
    from bench.study.report.compare import compare_paths
    from bench.text_tables import text_table

    compared = compare_paths(first, second)
    if as_json:
        print(json_text({"rows": compared.rows, "notes": compared.notes}))
        return
    print(text_table(compared.rows, compared.columns))
    for note in compared.notes:
        print(note)


def reproduce_command(
    results: Path = typer.Argument(..., metavar="RESULTS", help="A matrix's results folder, a committed reference "
                                   "(runs.csv and matrix.toml), or a `bench train` run folder."),
    runs: Optional[int] = typer.Option(None, "--runs", help="Reproduce the first N recorded runs (default: all)."),
    run: Optional[list[str]] = typer.Option(None, "--run", help="Reproduce this run (its run id or a prefix of it; "
                                            "repeatable)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the runs are trained again (default: "
                                       "reproductions/<RESULTS' name>): a new folder, or this reproduction's from "
                                       "before; never inside RESULTS or another run, matrix or report."),
    reproduced: Optional[Path] = typer.Option(None, "--reproduced", help="A folder that already holds the runs "
                                              "trained again (the demo's results, an earlier --out): compare, train "
                                              "nothing. Never RESULTS, a folder inside it, or a copy of it."),
    jobs: int = typer.Option(1, "--jobs", help="Runs at a time, as run-matrix."),
    brief: bool = typer.Option(False, "--brief", help="The machines and the summary line, not each metric."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads per run (default: as many as the "
                                          "recorded runs used, where they agree).", show_default=False),
    data_dir: Optional[Path] = data_dir_option(),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Train recorded runs again from their recorded configuration and say how close they come: each metric's
    recorded and new value, their difference (in the seeds' standard deviations where the study has several),
    bit-identical where they are, and what differs between the two machines. Exits 1 when a difference exceeds its
    tolerance (a quarter of the seeds' standard deviation, else 1% relative), and when a chosen recorded run was not
    compared (its records disagree, its folder is gone, its training failed): each is named."""
    from bench.study.matrix.reproduce import reproduce
    from bench.text_tables import text_table

    outcome = reproduce(results, runs, run or [], out, reproduced, jobs, data_dir, threads, show_progress=not quiet)
    if not brief:
        print(text_table([d.row() for d in outcome.differences],
                         ["run", "metric", "recorded", "new", "difference", "relative", "seed sd", "verdict"]))
    for line in outcome.machines or ["the same machine, as recorded (CPU model, extensions, torch, threads)"]:
        print(f"machine: {line}")
    print(outcome.summary())
    if (problem := outcome.problem()) is not None:
        raise BenchError(problem)
