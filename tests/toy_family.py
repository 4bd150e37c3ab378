"""The toy model family the tests declare: a GRU language model, registered as ``toy-gru`` for a test and gone again
after it (the ``toy_gru`` fixture of tests/conftest.py, or :func:`registered` for a module's own fixture)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn as nn

from bench.models import MODELS
from bench.models.common import LanguageModel
from bench.settings import SIZE, check_settings, setting

NAME = "toy-gru"


@dataclass
class ToyGRUConfig:
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", SIZE)
    width: int = setting(16, "embedding and GRU width", SIZE)

    def __post_init__(self) -> None:
        check_settings(self)


class ToyGRU(LanguageModel):
    """Embedding, a linear map (autocast runs it in bfloat16) and a GRU. State: its hidden state, batch-first
    ``[B, 1, width]``."""

    config_class = ToyGRUConfig
    marker = "v"
    presets = {"tiny": {"model": {"width": 16}, "train": dict(batch_size=4, optimizer="adamw", lr=1e-2,
                                                              max_steps=10, eval_streams=4, log_every=2)}}

    def __init__(self, config: ToyGRUConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.width)
        self.mix = nn.Linear(config.width, config.width)
        self.gru = nn.GRU(config.width, config.width, batch_first=True)
        self.add_tied_output_bias(config.vocab_size)
        self.init_normal(0.1)

    def forward(self, tokens: torch.Tensor, state=None):
        hx = None if state is None else state.transpose(0, 1).contiguous()
        hidden, last = self.gru(self.mix(self.embedding(tokens)), hx)
        return hidden, last.transpose(0, 1)

    def flops_per_token(self, segment: int) -> float:
        w = self.config.width
        return 2 * w * w + 2 * 3 * w * (w + w) + 2 * w * self.config.vocab_size


@contextlib.contextmanager
def registered():
    """``toy-gru`` registered in bench.models.MODELS while the block runs."""
    MODELS.register(NAME, ToyGRU)
    try:
        yield NAME
    finally:
        del MODELS[NAME]
