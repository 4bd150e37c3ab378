"""A model family plug-in: ``causal-conv``, a causal convolution over the
last ``kernel`` tokens' embeddings, then a feed-forward layer and the tied
softmax. Its state is the last ``kernel - 1`` embeddings, so a text scored
in pieces gets the same numbers as in one piece."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.models import MODELS
from bench.models.common import LanguageModel
from bench.settings import SIZE, check_settings, setting


@dataclass
class CausalConvConfig:
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", SIZE)
    width: int = setting(64, "embedding and hidden width", SIZE)
    kernel: int = setting(8, "tokens the convolution sees, the current one included", SIZE)

    def __post_init__(self) -> None:
        check_settings(self)


class CausalConvLM(LanguageModel):
    """State: the last ``kernel - 1`` embeddings, batch-first ``[B, kernel - 1, width]``."""

    config_class = CausalConvConfig
    marker = "P"  # its mark in every figure: a filled plus
    linestyle = "-."
    presets = {"tiny": {"model": {"width": 32, "kernel": 8},
                        "train": dict(batch_size=8, optimizer="adamw", lr=3e-3, max_steps=40, eval_streams=4,
                                      log_every=10)}}

    def __init__(self, config: CausalConvConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.width)
        self.conv = nn.Conv1d(config.width, config.width, config.kernel)
        self.mix = nn.Linear(config.width, config.width)
        self.add_tied_output_bias(config.vocab_size)
        self.init_normal(0.05)

    def forward(self, tokens: torch.Tensor, state=None):
        x = self.embedding(tokens)
        if state is None:  # a document's start: nothing before it
            state = x.new_zeros(x.shape[0], self.config.kernel - 1, x.shape[2])
        seen = torch.cat([state, x], dim=1)
        hidden = F.gelu(self.conv(seen.transpose(1, 2)).transpose(1, 2))
        return hidden + self.mix(hidden), seen[:, seen.shape[1] - (self.config.kernel - 1):]

    def flops_per_token(self, segment: int) -> float:
        w, k = self.config.width, self.config.kernel
        return 2 * k * w * w + 2 * w * w + 2 * w * self.config.vocab_size


# Registered when imported; the entry point registers the same class.
MODELS.adopt("causal-conv", CausalConvLM)
