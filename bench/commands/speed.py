"""``bench speed``: training and evaluation throughput of a model on this machine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import (MODEL_HELP, PRESET_HELP, SET_HELP, data_dir_option, each_once, parse_pairs,
                                   sizing_dataset_option, sizing_tokenizer_option, split_list, vocab_size_option)
from bench.errors import BenchError
from bench.text_tables import duration, flops_rate


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
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Measure training and evaluation throughput (tokens/s) of a model on this machine, on random tokens."""
    from bench.data.facts import facts_for_sizing
    from bench.engine.hardware.speed import EVAL_STREAMS, measure_speed
    from bench.engine.spec import RunSpec

    if peak_tflops is not None and not (math.isfinite(peak_tflops) and peak_tflops > 0):
        raise BenchError(f"--peak-tflops must be a positive finite number, not {peak_tflops}")
    streams = positive_sizes(eval_streams, "--eval-streams", "16,256") if eval_streams is not None else EVAL_STREAMS
    overrides = parse_pairs(settings, "--set")
    facts = facts_for_sizing(vocab_size, tokenizer, dataset, data_dir)
    spec = RunSpec(model=model, preset=preset, overrides=overrides)
    info = measure_speed(spec, facts, steps, warmup, peak_tflops, streams)
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


def _header(info: dict) -> str:
    device = info["device"]
    variant = (f", {info['optimizer']}" + (", compiled" if info["compile"] else "")
               + (", CUDA graphs" if info["cuda_graphs"] else ""))
    return (f"{info['model']}/{info['preset']}: {info['params_total']:,} parameters, batch {info['batch_size']} x "
            f"{info['bptt']}, {info['precision']}{variant}, on {device['type']} ({device.get('name', '')})")


def speed_text(info: dict) -> str:
    """The printed form of one measurement."""
    device = info["device"]
    mfu = f", MFU: no peak known for this {device['type']} (--peak-tflops)" if info["mfu"] is None else (
        f", MFU {100 * info['mfu']:.1f}%" if info["mfu"] <= 1 else
        f", MFU not shown: the measured rate is above the peak of {info['peak_tflops']:g} TFLOP/s (check "
        "--peak-tflops)")
    lines = [_header(info),
             f"train: {info['train_tokens_per_second']:,.0f} tokens/s ({flops_rate(info['train_tflops'])}{mfu})"]
    if info["eval"]:
        lines.append(eval_text(info["eval"]))
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
    return "\n".join(lines)


def eval_text(evaluation: dict) -> str:
    """``eval at 16 streams: X tokens/s (N.Nx training); at 256: ...``, and the chunks (or window) scored."""
    rows = list(evaluation.values())
    rates = [r["error"] if "error" in r else f"{r['tokens_per_second']:,.0f} tokens/s ({r['over_train']:.1f}x "
             f"training)" for r in rows]
    parts = [f"eval at {rows[0]['streams']} streams: {rates[0]}"] + [
        f"at {r['streams']}: {rate}" for r, rate in zip(rows[1:], rates[1:])]
    first = rows[0]
    layout = (f"chunks of {first['chunk']} tokens, state carried" if first["window"] is None else
              f"a window of {first['window']} tokens moved {first['chunk']} at a time")
    return "; ".join(parts + [layout])
