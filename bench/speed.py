"""``bench speed``: training and evaluation throughput of a model on the current device.

Runs real optimizer steps (the preset's optimizer, clipping, mixed precision and
carried state) on random tokens, so no corpus is needed. Throughput is reported
in tokens per second; with the byte scheme a token is a byte, which is how the
SHA-RNN's characters per second on enwik8 are usually quoted. The first steps
are warm-up (cuDNN autotuning, compilation) and are not timed.
"""

from __future__ import annotations

import time

import torch

from bench.device import autocast, autocast_dtype, configure, describe, pick_device
from bench.models.common import detach_state
from bench.optim import build_optimizer
from bench.spec import RunSpec, check_spec, resolve
from bench.train import apply_gradients, build_training_model, forward_loss


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_speed(model_name: str, preset: str, vocab_size: int, overrides: dict, steps: int = 20,
                  warmup: int = 3) -> dict:
    spec = check_spec(RunSpec(model=model_name, preset=preset, overrides=overrides))
    resolved = resolve(spec, vocab_size=vocab_size, chars_per_token=1.0)
    cfg = resolved.train
    device = pick_device(cfg.device)
    configure(device)
    amp = autocast_dtype(device, cfg.precision)
    torch.manual_seed(0)
    model = build_training_model(resolved, device)
    optimizer = build_optimizer(model.parameters(), cfg)
    tokens = torch.randint(0, vocab_size, (cfg.batch_size, cfg.bptt + 1), device=device)
    state = None
    timed_seconds, timed_tokens = 0.0, 0
    for step in range(warmup + steps):
        _sync(device)
        start = time.perf_counter()
        loss, new_state = forward_loss(model, tokens[:, :-1], tokens[:, 1:],
                                       state if model.carries_state_in_training else None, device, amp)
        apply_gradients(model, optimizer, loss, cfg.clip)
        state = detach_state(new_state)
        _sync(device)
        if step >= warmup:
            timed_seconds += time.perf_counter() - start
            timed_tokens += cfg.batch_size * cfg.bptt
    train_tps = timed_tokens / timed_seconds

    model.eval()
    state = None
    with torch.no_grad():
        for step in range(warmup + steps):
            _sync(device)
            start = time.perf_counter()
            with autocast(device, amp):
                hidden, state = model(tokens[:, :-1], state)
                model.logits(hidden)
            _sync(device)
            if step == warmup - 1:
                eval_seconds, eval_tokens = 0.0, 0
            if step >= warmup:
                eval_seconds += time.perf_counter() - start
                eval_tokens += cfg.batch_size * cfg.bptt
    forward_flops = model.flops_per_token(cfg.bptt)
    return {
        "model": model_name, "preset": preset, "vocab_size": vocab_size, "params_total": model.num_params(),
        "batch_size": cfg.batch_size, "bptt": cfg.bptt, "precision": str(amp).replace("torch.", "") if amp else
        "float32", "compile": cfg.compile, "steps_timed": steps,
        "train_tokens_per_second": train_tps, "eval_tokens_per_second": eval_tokens / eval_seconds,
        "train_tflops": 3 * forward_flops * train_tps / 1e12, "device": describe(device),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
    }
