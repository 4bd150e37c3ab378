"""Size and cost of a model configuration, without allocating its weights."""

from __future__ import annotations

from dataclasses import asdict

import torch

from bench.data.facts import DataFacts
from bench.engine.resolve import resolve
from bench.engine.spec import RunSpec, validate_spec


def describe_model(spec: RunSpec, facts: DataFacts) -> dict:
    """Parameters and FLOPs of the model a spec resolves to on data with these facts, with the sizes and the
    training recipe the preset and overrides give it (training fields left at their defaults are not listed)."""
    from bench.engine.presets import get_preset
    from bench.models import build_model

    config = resolve(validate_spec(spec), facts)
    recipe = set(get_preset(spec.model, spec.preset)["train"]) | set(spec.overrides)
    with torch.device("meta"):  # shapes only: no memory is allocated
        net = build_model(spec.model, config.model)
    segment = config.train.bptt
    forward = net.flops_per_token(segment)
    return {
        "model": spec.model,
        "preset": spec.preset,
        "tokenizer": facts.scheme,
        "dataset": facts.corpus,
        "vocab_size": facts.vocab_size,
        "params_total": net.num_params(),
        "params_non_embedding": net.non_embedding_params(),
        "flops_per_token_forward": int(forward),
        "flops_per_token_train": int(net.train_flops_per_token(segment)),
        "flops_segment_tokens": segment,
        "model_settings": {k: v for k, v in asdict(config.model).items() if k != "vocab_size"},
        "training_recipe": {k: v for k, v in asdict(config.train).items() if k in recipe},
    }
