"""``bench speed``: training and evaluation throughput of a model on the current device.

Runs real optimizer steps (the preset's optimizer, clipping, mixed precision and
carried state) on random tokens, so no corpus is needed. Throughput is reported
in tokens per second; with the byte scheme a token is a byte, which is how the
SHA-RNN's characters per second on enwik8 are usually quoted. The first steps
are warm-up (cuDNN autotuning, compilation, the SHA-RNN's memory filling up, a
CUDA graph's eager steps and capture): their time is reported apart
(``warmup_seconds``), with the share torch.compile spent compiling
(``compile_seconds``, its own accounting), and never counted in the steady-state
throughput; compilation during the timed steps (a recompile) is reported too.
Evaluation is timed as the evaluation runs (bench.engine.score.evaluation): the
same forward pass and float32 losses, carried state, the run's chunk (the
Transformer's stride), at 16 and 256 streams by default: a run's validation
uses few streams, a GPU's throughput needs many. Each stream count is timed
over at least as many tokens as the training steps, and at least 2 chunks,
after its own warm-up. Peak memory is reset first, so it is this measurement's
own. MFU is the achieved training FLOP/s (3x the forward FLOPs per token) over
the GPU's dense bf16 peak (none is known for a CPU: ``--peak-tflops`` gives one).
From the run's budget it also estimates how long the whole run would train at
this speed. ``--profile`` splits a training step's time
(bench.engine.profile); ``--batch-sizes`` measures training at several
batch sizes (:func:`sweep_batches`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import torch

from bench.data.facts import DataFacts
from bench.engine.budget import epoch_tokens, mean_step_tokens
from bench.engine.hardware.device import configure, describe, pick_device, use_threads
from bench.engine.hardware.memory import check_memory
from bench.engine.optim import build_optimizer, implementation
from bench.engine.hardware.precision import Precision, plan_precision
from bench.models.recurrent import has_rnn
from bench.engine.resolve import ResolvedRun, resolve
from bench.engine.score.evaluation import EvalLayout, chunk_nll, run_layout
from bench.engine.spec import RunSpec, validate_spec
from bench.engine.step import TrainingStep, build_training_model, compile_seconds, make_step
from bench.errors import BenchError
from bench.models.common import LanguageModel, detach_state

# Dense bf16 tensor-core peaks from the vendors' data sheets (TFLOP/s, without sparsity).
BF16_PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.4, "H200": 989.4, "GH200": 989.4, "A100": 312.0,
                    "L40S": 362.0, "A10G": 70.0, "L4": 121.0}


def bf16_peak_tflops(device_name: str) -> float | None:
    """The data-sheet dense bf16 peak of a GPU named like ``NVIDIA H100 80GB HBM3`` (longest name first)."""
    for name in sorted(BF16_PEAK_TFLOPS, key=len, reverse=True):
        if name in device_name:
            return BF16_PEAK_TFLOPS[name]
    return None


EVAL_STREAMS = (16, 256)
PROFILED_STEPS = 5  # at most: enough to average over, few enough for the profiler's trace of a paper-size step


def default_warmup(resolved: ResolvedRun) -> int:
    """Enough untimed steps for the SHA-RNN's memory to fill (and compilation to settle), at least 3; with CUDA
    graphs, then the eager steps and the capture."""
    from bench.engine.hardware.cuda_graphs import EAGER_STEPS

    return _filling(resolved, resolved.train.bptt) + (EAGER_STEPS + 1 if resolved.train.cuda_graphs else 0)


def _filling(resolved: ResolvedRun, segment: int) -> int:
    """Segments of ``segment`` tokens until the SHA-RNN's memory is full and one more, at least 3."""
    max_memory = getattr(resolved.model, "max_memory", 0) or 0
    return max(3, math.ceil(max_memory / segment) + 1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_speed(spec: RunSpec, facts: DataFacts, steps: int = 20, warmup: int | None = None,
                  peak_tflops: float | None = None, eval_streams: tuple[int, ...] = EVAL_STREAMS,
                  profile: bool = False) -> dict:
    """Training throughput, then evaluation's at each of ``eval_streams`` (none: not measured); with ``profile``,
    a few more training steps under torch.profiler, split by what they spend their time on."""
    resolved = resolve(validate_spec(spec), facts)
    cfg = resolved.train
    for streams in eval_streams:
        if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
            raise BenchError(f"--eval-streams {streams!r} is not a positive whole number; give e.g. --eval-streams "
                             f"16,256")
    if profile and cfg.cuda_graphs:
        raise BenchError("--profile cannot see inside a CUDA graph's replay; profile without --set cuda_graphs=true")
    device = pick_device(cfg.device)
    configure(device)
    use_threads(cfg.threads)
    train_warmup = default_warmup(resolved) if warmup is None else warmup
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    model = build_training_model(resolved, device)
    precision = plan_precision(cfg.precision, cfg.rnn_precision, device, has_rnn(model))
    layouts = [run_layout(model, streams, cfg.bptt, cfg.eval_chunk, precision) for streams in eval_streams]
    _check_eval_memory(resolved, model, layouts)
    optimizer = build_optimizer(model.parameters(), cfg)
    step = _training_step(resolved, model, optimizer, facts.vocab_size, device, precision)
    train = _timed(step, device, steps, train_warmup)
    train_peak = _peak_memory_gb(device)
    profiled = None
    if profile:
        from bench.engine.profile import profile_steps

        profiled = profile_steps(step, device, min(steps, PROFILED_STEPS)).to_json()
        _peak_memory_gb(device)  # the profiled steps' peak is the training's again: not the evaluation's
    timed_tokens = steps * cfg.batch_size * cfg.bptt
    train_tps = timed_tokens / train["timed"]
    evaluation, eval_seconds = {}, []
    for layout in layouts:
        streams = layout.streams
        try:
            row, seconds = _time_evaluation(resolved, model, layout, facts.vocab_size, device, precision,
                                            timed_tokens, warmup)
        except torch.cuda.OutOfMemoryError:  # many streams' logits of a large vocabulary: said, the rest measured
            evaluation[str(streams)] = {"streams": streams, "chunk": layout.chunk, "window": layout.window,
                                        "error": "out of memory"}
            continue
        evaluation[str(streams)] = {**row, "over_train": row["tokens_per_second"] / train_tps}
        eval_seconds.append(seconds)
    train_flops_per_token = model.train_flops_per_token(cfg.bptt)
    train_tflops = train_flops_per_token * train_tps / 1e12
    info = describe(device)
    peak = peak_tflops if peak_tflops is not None else (
        bf16_peak_tflops(info.get("name", "")) if device.type == "cuda" else None)
    planned = resolved.budget.planned_steps(facts.chars_per_token,
                                          epoch_tokens(facts.train_tokens, cfg.batch_size) if facts.train_tokens
                                          else None, mean_step_tokens(cfg), train_flops_per_token)
    return {
        "model": spec.model, "preset": spec.preset, "settings": dict(spec.overrides),  # --set, as given
        "tokenizer": facts.scheme, "dataset": facts.corpus,
        "vocab_size": facts.vocab_size, "params_total": model.num_params(),
        "batch_size": cfg.batch_size, "bptt": cfg.bptt, "precision": precision.name, "compile": cfg.compile,
        "cuda_graphs": cfg.cuda_graphs, "lamb_impl": cfg.lamb_impl, "optimizer": implementation(optimizer),
        "steps_timed": steps, "steps_warmup": train_warmup,
        "train_tokens_per_second": train_tps,
        "train_flops_per_token": train_flops_per_token, "train_tflops": train_tflops,
        "peak_tflops": peak, "mfu": None if not peak else train_tflops / peak,
        # evaluation at each stream count (the keys, as strings: JSON's), with its rate over training's, or the
        # error that stopped it
        "eval": evaluation,
        "warmup_seconds": {"train": train["warmup"], "eval": sum(s["warmup"] for s in eval_seconds)},
        # of which torch.compile compiled; "timed": compiling inside the timed steps (a recompile), never expected
        "compile_seconds": {"train": train["warmup_compile"], "eval": sum(s["warmup_compile"] for s in eval_seconds),
                            "timed": train["timed_compile"] + sum(s["timed_compile"] for s in eval_seconds)},
        "device": info, "peak_memory_gb": train_peak, "profile": profiled,
        "budget_steps": planned,
        "budget_hours": None if planned is None else planned * train["timed"] / steps / 3600,
    }


def sweep_batches(spec: RunSpec, facts: DataFacts, batch_sizes: tuple[int, ...], steps: int = 20,
                  warmup: int | None = None, peak_tflops: float | None = None) -> list[dict]:
    """Training throughput at each batch size (evaluation does not depend on it: not measured), the fastest marked
    ``best``; on a GPU, a batch size that does not fit is a row that says so."""
    rows = []
    for batch_size in batch_sizes:
        sized = dataclasses.replace(spec, overrides={**spec.overrides, "batch_size": batch_size})
        try:
            rows.append(measure_speed(sized, facts, steps, warmup, peak_tflops, eval_streams=()))
        except torch.cuda.OutOfMemoryError:
            rows.append({"batch_size": batch_size, "settings": dict(sized.overrides), "error": "out of memory"})
    measured = [r for r in rows if "error" not in r]
    fastest = max(measured, key=lambda r: r["train_tokens_per_second"], default=None)
    for row in rows:
        row["best"] = row is fastest
    return rows


def _check_eval_memory(resolved: ResolvedRun, model: LanguageModel, layouts: list[EvalLayout]) -> None:
    """The most streams asked for, refused before their tokens and logits are allocated when the logits alone
    would not fit in the device's memory (the lower bound resolution holds a run's own evaluation to)."""
    if not layouts:
        return
    cfg, widest = resolved.train, max(layouts, key=lambda layout: layout.streams * layout.chunk)
    try:
        check_memory(model.num_params(), resolved.data.vocab_size, cfg.batch_size * cfg.bptt,
                     widest.streams * widest.chunk, cfg.device)
    except BenchError as exc:
        raise BenchError(f"--eval-streams {widest.streams:,} in chunks of {widest.chunk} tokens: {exc}") from None


def _peak_memory_gb(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return round(peak, 2)


def _training_step(resolved: ResolvedRun, model: LanguageModel, optimizer: torch.optim.Optimizer, vocab_size: int,
                   device: torch.device, precision: Precision) -> Callable[[], None]:
    """One optimizer step on a fixed batch of random tokens, the state carried from the step before."""
    cfg = resolved.train
    tokens = torch.randint(0, vocab_size, (cfg.batch_size, cfg.bptt + 1), device=device)
    train_step = make_step(TrainingStep(model, device, precision), model, optimizer, cfg.clip, cfg.cuda_graphs,
                           device, precision.grad_scaler(device))
    state = None
    model.train()

    def step() -> None:
        nonlocal state
        _, new_state, _ = train_step(tokens[:, :-1], tokens[:, 1:],
                                     state if model.carries_state_in_training else None)
        state = detach_state(new_state)

    return step


@torch.no_grad()
def _time_evaluation(resolved: ResolvedRun, model: LanguageModel, layout: EvalLayout, vocab_size: int,
                     device: torch.device, precision: Precision, train_tokens: int,
                     warmup: int | None) -> tuple[dict, dict[str, float]]:
    """The evaluation's rate at ``layout``: its chunks' forward passes and losses with the state carried, timed
    over at least ``train_tokens`` tokens and 2 chunks, after ``warmup`` chunks (default: enough to fill the
    SHA-RNN's memory); and the seconds of :func:`_timed`."""
    model.eval()
    tokens = torch.randint(0, vocab_size, (layout.streams, layout.chunk + 1), device=device)
    chunks = max(2, math.ceil(train_tokens / (layout.streams * layout.chunk)))
    warmup = _filling(resolved, layout.chunk) if warmup is None else warmup
    state = None

    def step() -> None:
        nonlocal state
        _, _, state = chunk_nll(model, tokens[:, :-1], tokens[:, 1:], state, device, precision)

    seconds = _timed(step, device, chunks, warmup)
    return {"streams": layout.streams, "chunk": layout.chunk, "window": layout.window, "chunks_timed": chunks,
            "chunks_warmup": warmup, "tokens_per_second": chunks * layout.streams * layout.chunk / seconds["timed"],
            "peak_memory_gb": _peak_memory_gb(device)}, seconds


def _timed(step: Callable[[], None], device: torch.device, steps: int, warmup: int) -> dict[str, float]:
    """Wall seconds of the warm-up steps and of the timed steps, each measured between device syncs, and the
    seconds torch.compile compiled in each."""
    _sync(device)
    start, compiled = time.perf_counter(), compile_seconds()
    for _ in range(warmup):
        step()
    _sync(device)
    middle, compiled_middle = time.perf_counter(), compile_seconds()
    for _ in range(steps):
        step()
    _sync(device)
    return {"warmup": middle - start, "timed": time.perf_counter() - middle,
            "warmup_compile": compiled_middle - compiled, "timed_compile": compile_seconds() - compiled_middle}
