"""``bench speed``: training and evaluation throughput on this machine, a profile of the step, a batch sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import (MODEL_HELP, PRESET_HELP, SET_HELP, data_dir_option, each_once, parse_pairs,
                                   sizing_dataset_option, sizing_tokenizer_option, split_list, vocab_size_option,
                                   plugin_option)
from bench.errors import BenchError
from bench.text_tables import duration, flops_rate, text_table

CATEGORY_NAMES = {"recurrent": "recurrent (LSTM)", "attention": "attention", "forward": "rest of the forward",
                  "backward": "rest of the backward", "optimizer": "optimizer", "host_gaps": "host gaps",
                  "other": "other"}


def speed_command(
    model: str = typer.Option("sha-rnn", "--model", help=MODEL_HELP),
    preset: str = typer.Option("tiny", "--preset", help=PRESET_HELP),
    tokenizer: Optional[str] = sizing_tokenizer_option(),
    dataset: Optional[str] = sizing_dataset_option(),
    vocab_size: Optional[int] = vocab_size_option(),
    steps: int = typer.Option(20, "--steps", min=1, help="Timed steps, after the untimed warm-up steps."),
    warmup: Optional[int] = typer.Option(None, "--warmup", min=0, help="Untimed steps first (default: enough for the "
                                         "SHA-RNN's memory to fill, at least 3); their time is shown apart."),
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="The device's dense bf16 peak for "
                                                "MFU (default: the data sheet's, for known GPUs)."),
    eval_streams: Optional[str] = typer.Option(None, "--eval-streams", help="Evaluation is timed at each of these "
                                               "stream counts, in the run's chunks (default: 16,256)."),
    profile: bool = typer.Option(False, "--profile", help="Also split a training step's time (torch.profiler): "
                                 "recurrent kernels, attention, forward, backward, optimizer, host gaps."),
    batch_sizes: Optional[str] = typer.Option(None, "--batch-sizes", help="Measure training at each of these batch "
                                              "sizes instead, e.g. 16,32,64, and mark the fastest."),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (a list of rows with --batch-sizes)."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Measure training and evaluation throughput (tokens/s) of a model on this machine, on random tokens."""
    from bench.data.facts import facts_for_sizing
    from bench.engine.speed import EVAL_STREAMS, measure_speed, sweep_batches
    from bench.engine.spec import RunSpec

    if peak_tflops is not None and not (math.isfinite(peak_tflops) and peak_tflops > 0):
        raise BenchError(f"--peak-tflops must be a positive finite number, not {peak_tflops}")
    streams = positive_sizes(eval_streams, "--eval-streams", "16,256") if eval_streams is not None else EVAL_STREAMS
    overrides = parse_pairs(settings, "--set")
    sizes = positive_sizes(batch_sizes, "--batch-sizes", "16,32,64") if batch_sizes is not None else None
    if sizes is not None:
        _check_sweep(overrides, profile, eval_streams)
    facts = facts_for_sizing(vocab_size, tokenizer, dataset, data_dir)
    spec = RunSpec(model=model, preset=preset, overrides=overrides)
    if sizes is not None:
        rows = sweep_batches(spec, facts, sizes, steps, warmup, peak_tflops)
        print(json.dumps(rows, indent=2) if as_json else sweep_text(rows))
        return
    info = measure_speed(spec, facts, steps, warmup, peak_tflops, streams, profile)
    print(json.dumps(info, indent=2) if as_json else speed_text(info))


def positive_sizes(text: str, option: str, example: str) -> tuple[int, ...]:
    """A comma-separated list of positive whole numbers, each once."""
    pieces = split_list(text)
    if not pieces:
        raise BenchError(f"{option} is empty; give positive whole numbers, e.g. {option} {example}")
    for piece in pieces:
        if not (piece.isascii() and piece.isdigit() and int(piece) > 0):
            raise BenchError(f"{option} {piece!r} is not a positive whole number; give e.g. {option} {example}")
    sizes = tuple(int(piece) for piece in pieces)
    each_once([str(size) for size in sizes], option)
    return sizes


def _check_sweep(overrides: dict[str, str], profile: bool, eval_streams: str | None) -> None:
    """What a batch sweep cannot be given with it: it sets the batch size and measures training only."""
    if "batch_size" in overrides:
        raise BenchError("--batch-sizes sets the batch size of each measurement; drop --set batch_size")
    if profile:
        raise BenchError("--profile profiles one batch size; drop --batch-sizes (--set batch_size=N profiles N)")
    if eval_streams is not None:
        raise BenchError("--batch-sizes measures training only (evaluation does not depend on the batch size); "
                         "drop --eval-streams")


def set_pairs(settings: dict, leave_out: tuple[str, ...] = ()) -> str:
    """``key=value ...``: the --set overrides a measurement ran with; empty for the preset as it is."""
    return " ".join(f"{key}={value}" for key, value in settings.items() if key not in leave_out)


def settings_label(settings: dict, leave_out: tuple[str, ...] = ()) -> str:
    """`` [key=value ...]`` after a line's first word, so that each line copied elsewhere still says which variant
    it measured; empty for the preset as it is."""
    pairs = set_pairs(settings, leave_out)
    return f" [{pairs}]" if pairs else ""


def _header(info: dict, batch: bool = True) -> str:
    """The model and its --set overrides, its size, the batch (or with ``batch`` false, the segment alone),
    precision, optimizer, device."""
    device = info["device"]
    variant = (f", {info['optimizer']}" + (", compiled" if info["compile"] else "")
               + (", CUDA graphs" if info["cuda_graphs"] else ""))
    shape = f"batch {info['batch_size']} x {info['bptt']}" if batch else f"segments of {info['bptt']}"
    overrides = settings_label(info["settings"], () if batch else ("batch_size",))
    return (f"{info['model']}/{info['preset']}{overrides}: {info['params_total']:,} parameters, {shape}, "
            f"{info['precision']}{variant}, on {device['type']} ({device.get('name', '')})")


def speed_text(info: dict) -> str:
    """The printed form of one measurement."""
    device = info["device"]
    mfu = f", MFU: no peak known for this {device['type']} (--peak-tflops)" if info["mfu"] is None else (
        f", MFU {100 * info['mfu']:.1f}%" if info["mfu"] <= 1 else
        f", MFU not shown: the measured rate is above the peak of {info['peak_tflops']:g} TFLOP/s (check "
        "--peak-tflops)")
    overrides = settings_label(info["settings"])
    lines = [_header(info), f"train{overrides}: {info['train_tokens_per_second']:,.0f} tokens/s "
                            f"({flops_rate(info['train_tflops'])}{mfu})"]
    if info["eval"]:
        lines.append(eval_text(info["eval"], overrides))
    warm, compiled = info["warmup_seconds"], info["compile_seconds"]
    memory = f"; peak memory {info['peak_memory_gb']} GiB" if info["peak_memory_gb"] is not None else ""
    compiling = (f" (compilation {compiled['train']:.1f} s and {compiled['eval']:.1f} s)"
                 if info["compile"] else "")
    lines.append(f"warm-up ({info['steps_warmup']} untimed steps): train {warm['train']:.1f} s, eval "
                 f"{warm['eval']:.1f} s{compiling}{memory}")
    if compiled["timed"]:
        lines.append(f"warning: torch.compile compiled for {compiled['timed']:.1f} s inside the timed steps (a "
                     f"recompile): the rates include it; raise --warmup")
    if info["budget_hours"] is not None:
        lines.append(f"budget: {info['budget_steps']:,} steps, about {duration(info['budget_hours'] * 3600)} of "
                     f"training here")
    if info["profile"] is not None:
        lines.append(profile_text(info["profile"], info["batch_size"] * info["bptt"] / info["train_tokens_per_second"]))
    return "\n".join(lines)


def eval_text(evaluation: dict, overrides: str = "") -> str:
    """``eval at 16 streams: X tokens/s (N.Nx training); at 256: ...``, and the chunks (or window) scored;
    ``overrides``: the :func:`settings_label` of the measurement, after ``eval``."""
    rows = list(evaluation.values())
    rates = [r["error"] if "error" in r else f"{r['tokens_per_second']:,.0f} tokens/s ({r['over_train']:.1f}x "
             f"training)" for r in rows]
    parts = [f"eval{overrides} at {rows[0]['streams']} streams: {rates[0]}"] + [
        f"at {r['streams']}: {rate}" for r, rate in zip(rows[1:], rates[1:])]
    first = rows[0]
    layout = (f"chunks of {first['chunk']} tokens, state carried" if first["window"] is None else
              f"a window of {first['window']} tokens moved {first['chunk']} at a time")
    return "; ".join(parts + [layout])


def profile_text(profile: dict, unprofiled_step: float) -> str:
    """A table of the profiled step's time by category, their sum, and the step over the recurrent time;
    ``unprofiled_step``: the timed steps' seconds per step, to show the profiler's own cost."""
    step, seconds = profile["step_seconds"], profile["seconds"]
    rows = [{"part of the step": CATEGORY_NAMES[name], "ms per step": "n/a" if value is None else f"{value * 1e3:.2f}",
             "share": "n/a" if value is None else f"{100 * value / step:.1f}%"} for name, value in seconds.items()]
    counted = sum(value for value in seconds.values() if value is not None)
    ratio = profile["step_over_recurrent"]
    how = ("each operator's self time, counted once" if profile["device"] == "cpu" else
           "GPU time by launching operator; host gaps: no kernel running")
    return "\n".join([
        f"profile of {profile['steps']} training steps (torch.profiler, {how}): {step * 1e3:.2f} ms a step, "
        f"{unprofiled_step * 1e3:.2f} ms unprofiled",
        text_table(rows, ["part of the step", "ms per step", "share"]),
        f"sum of the parts: {counted * 1e3:.2f} ms; step / recurrent: "
        + ("no recurrent kernels" if ratio is None else f"{ratio:.2f}x")])


def sweep_text(rows: list[dict]) -> str:
    """One line per batch size: training tokens/s, TFLOP/s, MFU, the fastest marked, and the other --set
    overrides it ran with (where any were given)."""
    measured = [r for r in rows if "error" not in r]
    table = [{"batch": r["batch_size"], "train tokens/s": r.get("error") or f"{r['train_tokens_per_second']:,.0f}",
              "FLOP/s": flops_rate(r["train_tflops"]) if "error" not in r else "",
              "MFU": _mfu_cell(r) if "error" not in r else "", "": "<- best" if r["best"] else "",
              "--set": set_pairs(r["settings"], ("batch_size",))} for r in rows]
    columns = ["batch", "train tokens/s", "FLOP/s", "MFU", ""] + (["--set"] if any(r["--set"] for r in table) else [])
    lines = [_header(measured[0], batch=False)] if measured else []
    return "\n".join(lines + [text_table(table, columns)])


def _mfu_cell(row: dict) -> str:
    if row["mfu"] is None:
        return "n/a"
    return f"{100 * row['mfu']:.1f}%" if row["mfu"] <= 1 else "above the peak"
