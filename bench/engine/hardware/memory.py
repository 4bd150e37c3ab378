"""Whether a run fits in its device's memory, estimated before anything is built.

A lower bound, not a profile: the float32 weights with their gradients and an optimizer's two moments, and the
output layer's logits over the whole vocabulary for the tokens of one step (with their log-softmax and its
gradient in training; with the log-softmax in evaluation). Activations inside the model come on top. A huge
vocabulary is what this catches: a million ids times a step of 2,048 tokens is 24 GiB of logits, which the
weights-only check let through until the kernel's out-of-memory killer ended the run.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.errors import BenchError

FLOAT32 = 4
STATE_COPIES = 4  # weights, gradients, and an optimizer's two moments
TRAIN_LOGIT_COPIES = 3  # logits, their log-softmax, and its gradient
EVAL_LOGIT_COPIES = 2  # logits and their log-softmax


def device_memory(device_name: str) -> tuple[int, str] | None:
    """The memory a run on ``device_name`` can use and what it is (None: not known, so nothing is checked; a run
    planned here for a GPU elsewhere, say a cluster's, is checked where it runs)."""
    import torch

    from bench.engine.hardware.device import device_here

    device = device_here(device_name)
    if device is None:
        return None
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory, f"{torch.cuda.get_device_name(device)}'s"
    if device.type != "cpu":
        return None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system
        return None
    limit = _cgroup_limit()
    return (limit, "this container's") if limit is not None and limit < memory else (memory, "this machine's")


def _cgroup_limit() -> int | None:
    """A container's memory limit (cgroup v2 ``memory.max``, or v1), when there is one."""
    for path in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def check_memory(params: int, vocab: int, train_tokens: int, eval_tokens: int, device_name: str) -> None:
    """Refuse a run whose weights and logits alone exceed its device's memory (see the module's doc).
    ``train_tokens``: tokens of one training step; ``eval_tokens``: tokens one evaluation chunk scores at once."""
    available = device_memory(device_name)
    if available is None:
        return
    memory, whose = available
    state = STATE_COPIES * FLOAT32 * params
    training = state + TRAIN_LOGIT_COPIES * FLOAT32 * vocab * train_tokens
    evaluation = FLOAT32 * params + EVAL_LOGIT_COPIES * FLOAT32 * vocab * eval_tokens
    if max(training, evaluation) <= memory:
        return
    if training >= evaluation:
        raise BenchError(f"training needs at least {_size(training)} ({params:,} parameters with their gradients and "
                         f"optimizer state: {_size(state)}; logits over {vocab:,} ids for a step of {train_tokens:,} "
                         f"tokens: {_size(training - state)}), more than {whose} {_size(memory)}; lower batch_size or "
                         f"bptt, the model's sizes or the vocabulary")
    raise BenchError(f"evaluation needs at least {_size(evaluation)} (logits over {vocab:,} ids for {eval_tokens:,} "
                     f"tokens at once: {_size(evaluation - FLOAT32 * params)}), more than {whose} {_size(memory)}; "
                     f"lower eval_streams or eval_chunk, or the vocabulary")


def _size(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"
