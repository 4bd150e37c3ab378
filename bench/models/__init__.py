"""The three model families of the study and how to build them from plain configs."""

from __future__ import annotations

from dataclasses import asdict

from bench.errors import BenchError
from bench.models.common import LanguageModel
from bench.models.lstm import LSTMLM, LSTMConfig
from bench.models.sharnn import SHARNN, SHARNNConfig
from bench.models.transformer import TransformerConfig, TransformerLM
from tokenizers_study.named_registry import Registry

MODELS: Registry[tuple[type, type[LanguageModel]]] = Registry("model", BenchError, [
    ("sha-rnn", (SHARNNConfig, SHARNN)),
    ("lstm", (LSTMConfig, LSTMLM)),
    ("transformer", (TransformerConfig, TransformerLM)),
])


def config_class(name: str) -> type:
    return MODELS[name][0]


def make_config(name: str, values: dict):
    cls = config_class(name)
    try:
        return cls(**values)
    except ValueError as exc:
        raise BenchError(f"bad {name} configuration: {exc}") from None


def build_model(name: str, config) -> LanguageModel:
    if isinstance(config, dict):
        config = make_config(name, config)
    return MODELS[name][1](config)


__all__ = ["MODELS", "LanguageModel", "asdict", "build_model", "config_class", "make_config"]
