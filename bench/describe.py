"""Size and cost of a model configuration, without allocating its weights."""

from __future__ import annotations

import torch

from bench.spec import RunSpec, check_spec, resolve


def describe_model(model: str, preset: str, vocab_size: int, overrides: dict) -> dict:
    spec = check_spec(RunSpec(model=model, preset=preset, overrides=overrides))
    resolved = resolve(spec, vocab_size=vocab_size, chars_per_token=1.0)
    from bench.models import build_model

    with torch.device("meta"):  # shapes only: no memory is allocated
        net = build_model(model, resolved.model_config)
    segment = resolved.train.bptt
    forward = net.flops_per_token(segment)
    return {
        "model": model,
        "preset": preset,
        "vocab_size": vocab_size,
        "params_total": net.num_params(),
        "params_non_embedding": net.non_embedding_params(),
        "flops_per_token_forward": int(forward),
        "flops_per_token_train": int(3 * forward),
        "flops_segment_tokens": segment,
    }
