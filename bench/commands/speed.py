"""``bench speed``: training and evaluation throughput of a model on this machine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import (MODEL_HELP, PRESET_HELP, SET_HELP, data_dir_option, parse_pairs,
                                   sizing_dataset_option, sizing_tokenizer_option, vocab_size_option)
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
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Measure training and evaluation throughput (tokens/s) of a model on this machine, on random tokens."""
    from bench.data.facts import facts_for_sizing
    from bench.engine.spec import RunSpec
    from bench.engine.hardware.speed import measure_speed

    if peak_tflops is not None and not (math.isfinite(peak_tflops) and peak_tflops > 0):
        raise BenchError(f"--peak-tflops must be a positive finite number, not {peak_tflops}")
    facts = facts_for_sizing(vocab_size, tokenizer, dataset, data_dir)
    spec = RunSpec(model=model, preset=preset, overrides=parse_pairs(settings, "--set"))
    info = measure_speed(spec, facts, steps, warmup, peak_tflops)
    if as_json:
        print(json.dumps(info, indent=2))
        return
    device = info["device"]
    variant = (f", {info['optimizer']}" + (", compiled" if info["compile"] else "")
               + (", CUDA graphs" if info["cuda_graphs"] else ""))
    print(f"{model}/{preset}: {info['params_total']:,} parameters, batch {info['batch_size']} x {info['bptt']}, "
          f"{info['precision']}{variant}, on {device['type']} ({device.get('name', '')})")
    mfu = f", MFU: no peak known for this {device['type']} (--peak-tflops)" if info["mfu"] is None else (
        f", MFU {100 * info['mfu']:.1f}%" if info["mfu"] <= 1 else
        f", MFU not shown: the measured rate is above the peak of {info['peak_tflops']:g} TFLOP/s (check "
        "--peak-tflops)")
    print(f"train: {info['train_tokens_per_second']:,.0f} tokens/s ({flops_rate(info['train_tflops'])}{mfu})  "
          f"eval: {info['eval_tokens_per_second']:,.0f} tokens/s ({info['eval_over_train']:.1f}x training)")
    warm, compiled = info["warmup_seconds"], info["compile_seconds"]
    memory = f"; peak memory {info['peak_memory_gb']} GiB" if info["peak_memory_gb"] is not None else ""
    compiling = (f" (compilation {compiled['train']:.1f} s and {compiled['eval']:.1f} s)"
                 if info["compile"] else "")
    print(f"warm-up ({info['steps_warmup']} untimed steps): train {warm['train']:.1f} s, eval {warm['eval']:.1f} s"
          f"{compiling}{memory}")
    if compiled["timed"]:
        print(f"warning: torch.compile compiled for {compiled['timed']:.1f} s inside the timed steps (a recompile): "
              f"the rates include it; raise --warmup")
    if info["budget_hours"] is not None:
        print(f"budget: {info['budget_steps']:,} steps, about {duration(info['budget_hours'] * 3600)} of training "
              f"here")
