"""Size and cost of a model configuration, without allocating its weights."""

from __future__ import annotations

from dataclasses import asdict

from bench.data.facts import DataFacts
from bench.engine.resolve import resolve
from bench.engine.spec import RunSpec, validate_spec


def describe_model(spec: RunSpec, facts: DataFacts) -> dict:
    """Parameters and FLOPs of the model a spec resolves to on data with these facts, with the sizes and the
    training recipe the preset and overrides give it (training fields left at their defaults are not listed)."""
    from bench.engine.presets import get_preset

    config = resolve(validate_spec(spec), facts)
    recipe = set(get_preset(spec.model, spec.preset)["train"]) | set(spec.overrides)
    size = config.size()
    return {
        "model": spec.model,
        "preset": spec.preset,
        "tokenizer": facts.scheme,
        "dataset": facts.corpus,
        "vocab_size": facts.vocab_size,
        "params_total": size.params_total,
        "params_non_embedding": size.params_non_embedding,
        "flops_per_token_forward": int(size.flops_per_token_forward),
        "flops_per_token_train": int(size.flops_per_token_train),
        "flops_segment_tokens": config.train.bptt,
        "model_settings": {k: v for k, v in asdict(config.model).items() if k != "vocab_size"},
        "training_recipe": {k: v for k, v in asdict(config.train).items() if k in recipe},
    }
