"""``bench speed``: training and evaluation throughput of a model on the current device.

Runs real optimizer steps (the preset's optimizer, clipping, mixed precision and
carried state) on random tokens, so no corpus is needed. Throughput is reported
in tokens per second; with the byte scheme a token is a byte, which is how the
SHA-RNN's characters per second on enwik8 are usually quoted. The first steps
are warm-up (cuDNN autotuning, compilation) and are not timed. From the run's
budget it also estimates how long the whole run would train at this speed.
"""

from __future__ import annotations

import time

import torch

from bench.data.facts import DataFacts
from bench.engine.budget import epoch_tokens, mean_step_tokens
from bench.engine.device import autocast, autocast_dtype, configure, describe, pick_device
from bench.engine.optim import build_optimizer
from bench.engine.resolve import RunConfig, resolve
from bench.engine.spec import RunSpec, validate_spec
from bench.engine.step import apply_gradients, build_training_model, forward_loss
from bench.models.common import LanguageModel, detach_state


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_speed(spec: RunSpec, facts: DataFacts, steps: int = 20, warmup: int = 3) -> dict:
    config = resolve(validate_spec(spec), facts)
    cfg = config.train
    device = pick_device(cfg.device)
    configure(device)
    amp = autocast_dtype(device, cfg.precision)
    torch.manual_seed(0)
    model = build_training_model(config, device)
    tokens = torch.randint(0, facts.vocab_size, (cfg.batch_size, cfg.bptt + 1), device=device)
    train_seconds = _time_training(config, model, tokens, device, amp, steps, warmup)
    eval_seconds = _time_evaluation(model, tokens, device, amp, steps, warmup)
    timed_tokens = steps * cfg.batch_size * cfg.bptt
    train_tps = timed_tokens / train_seconds
    planned = config.budget.planned_steps(facts.chars_per_token,
                                          epoch_tokens(facts.train_tokens, cfg.batch_size) if facts.train_tokens
                                          else None, mean_step_tokens(cfg), 3 * model.flops_per_token(cfg.bptt))
    return {
        "model": spec.model, "preset": spec.preset, "tokenizer": facts.scheme, "dataset": facts.corpus,
        "vocab_size": facts.vocab_size, "params_total": model.num_params(),
        "batch_size": cfg.batch_size, "bptt": cfg.bptt, "precision": str(amp).replace("torch.", "") if amp else
        "float32", "compile": cfg.compile, "steps_timed": steps,
        "train_tokens_per_second": train_tps, "eval_tokens_per_second": timed_tokens / eval_seconds,
        "train_tflops": 3 * model.flops_per_token(cfg.bptt) * train_tps / 1e12, "device": describe(device),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
        "budget_steps": planned,
        "budget_hours": None if planned is None else planned * train_seconds / steps / 3600,
    }


def _time_training(config: RunConfig, model: LanguageModel, tokens: torch.Tensor, device: torch.device,
                   amp: torch.dtype | None, steps: int, warmup: int) -> float:
    """Seconds of ``steps`` optimizer steps after ``warmup`` untimed ones."""
    optimizer = build_optimizer(model.parameters(), config.train)
    state, seconds = None, 0.0
    for step in range(warmup + steps):
        _sync(device)
        start = time.perf_counter()
        loss, new_state = forward_loss(model, tokens[:, :-1], tokens[:, 1:],
                                       state if model.carries_state_in_training else None, device, amp)
        apply_gradients(model, optimizer, loss, config.train.clip)
        state = detach_state(new_state)
        _sync(device)
        if step >= warmup:
            seconds += time.perf_counter() - start
    return seconds


@torch.no_grad()
def _time_evaluation(model: LanguageModel, tokens: torch.Tensor, device: torch.device, amp: torch.dtype | None,
                     steps: int, warmup: int) -> float:
    """Seconds of ``steps`` forward passes with carried state after ``warmup`` untimed ones."""
    model.eval()
    state, seconds = None, 0.0
    for step in range(warmup + steps):
        _sync(device)
        start = time.perf_counter()
        with autocast(device, amp):
            hidden, state = model(tokens[:, :-1], state)
            model.logits(hidden)
        _sync(device)
        if step >= warmup:
            seconds += time.perf_counter() - start
    return seconds
