"""A decoder-only, pre-LayerNorm Transformer language model.

    tokens -> embedding (+ learned positions, unless rotary) -> dropout
           -> nlayers x [ x + attn(LN(x)) ; x + MLP(LN(x)) ] -> LN -> tied softmax (with bias)

Attention is causal ``scaled_dot_product_attention`` (flash kernels on GPU);
the MLP is Linear d -> ``mlp_ratio``·d, GELU, Linear back. Positions are either
learned absolute embeddings or rotary (applied to queries and keys).

Long texts are evaluated with a sliding window. The state is the window of
previous tokens (at most ``context - 1``): a forward pass prepends it, so
scoring a text in chunks of ``stride`` tokens gives every token at least
``context - stride`` tokens of context. A Transformer does not carry state
from one training batch to the next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.models.common import ATTENTION_LABEL, PAPER_TRAIN, LanguageModel, State, profiler_label, slide_window
from bench.settings import DROPOUT, POSITIVE, SIZE, check_settings, setting


@dataclass
class TransformerConfig:
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", SIZE)
    d_model: int = setting(512, "residual stream width", SIZE)
    nlayers: int = setting(8, "decoder blocks", SIZE)
    nheads: int = setting(8, "attention heads per block (d_model must be a multiple)", SIZE)
    mlp_ratio: float = setting(4.0, "MLP hidden width as a multiple of d_model", POSITIVE)
    context: int = setting(1024, "longest window (positions) the model sees", SIZE)
    positions: Literal["learned", "rotary"] = setting("rotary", "position encoding")
    dropout: float = setting(0.1, "on attention weights, residual branches and embeddings", DROPOUT)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.mlp_width < 1:
            raise ValueError(f"mlp_ratio {self.mlp_ratio} gives an MLP of width 0 (round(mlp_ratio x d_model)); raise "
                             f"it to at least {1 / self.d_model:.3g}")
        if self.d_model % self.nheads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of nheads ({self.nheads})")
        if self.positions == "rotary" and (self.d_model // self.nheads) % 2:
            raise ValueError("rotary positions need an even head width (d_model / nheads)")

    @property
    def mlp_width(self) -> int:
        return int(round(self.mlp_ratio * self.d_model))


def rotary_tables(length: int, dim: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., :d/2], x[..., d/2:]) by position-dependent angles; x is [B, H, T, d]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)
        self.nheads = config.nheads
        self.dropout = config.dropout
        self.rotary = config.positions == "rotary"

    def forward(self, x: torch.Tensor, rotary: tuple | None) -> torch.Tensor:
        with profiler_label(ATTENTION_LABEL):
            return self._attend(x, rotary)

    def _attend(self, x: torch.Tensor, rotary: tuple | None) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.nheads, D // self.nheads).permute(2, 0, 3, 1, 4)
        if rotary is not None:
            q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class MLP(nn.Module):
    """Linear ``d_model`` -> ``mlp_width``, GELU, Linear back."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.mlp_width)
        self.down = nn.Linear(config.mlp_width, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class TransformerBlock(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.attn_norm = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, rotary: tuple | None) -> torch.Tensor:
        x = x + self.dropout(self.attn(self.attn_norm(x), rotary))
        return x + self.dropout(self.mlp(self.mlp_norm(x)))


class TransformerLM(LanguageModel):
    """State: the previous tokens of the window, ``[B, K]`` with ``K < context``."""

    config_class = TransformerConfig
    carries_state_in_training = False
    window_setting = "context"
    parts_to_compile = (TransformerBlock,)
    marker = "^"
    linestyle = "-."
    presets = {
        "tiny": {
            "model": dict(d_model=64, nlayers=2, nheads=2, mlp_ratio=4.0, positions="rotary", dropout=0.0),
            "train": dict(batch_size=16, bptt=64, optimizer="adamw", lr=3e-3, warmup_steps=20, clip=1.0,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(d_model=256, nlayers=4, nheads=4, mlp_ratio=4.0, positions="rotary", dropout=0.1),
            "train": dict(batch_size=16, bptt=256, optimizer="adamw", lr=1e-3, warmup_steps=100, clip=1.0,
                          schedule="cosine", min_lr_ratio=0.1, max_steps=1500, eval_every=250,
                          eval_max_chars=300_000, eval_streams=16, checkpoint_every=100, log_every=10),
        },
        "paper": {
            # d 768, 8 layers, MLP 2816 wide: 53.75M parameters with 256 symbols, like the SHA-RNN's 53.83M.
            "model": dict(d_model=768, nlayers=8, nheads=12, mlp_ratio=11 / 3, positions="rotary", dropout=0.1),
            "train": {**PAPER_TRAIN, "optimizer": "adamw", "lr": 6e-4, "warmup_steps": 2000,
                      "schedule": "cosine", "min_lr_ratio": 0.1, "seq_jitter": False, "clip": 1.0,
                      "eval_chunk": None},
        },
    }

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = nn.Embedding(config.context, config.d_model) if config.positions == "learned" else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(TransformerBlock(config) for _ in range(config.nlayers))
        self.final_norm = nn.LayerNorm(config.d_model)
        self.add_tied_output_bias(config.vocab_size)
        self.init_normal(0.02)
        # GPT-2: the projections that write into the residual stream start smaller, the deeper the model.
        for block in self.blocks:
            for projection in (block.attn.out, block.mlp.down):
                nn.init.normal_(projection.weight, 0.0, 0.02 / math.sqrt(2 * config.nlayers))

    def forward(self, tokens: torch.Tensor, state: State = None):
        T = tokens.shape[1]
        window, new_state = slide_window(state, tokens, self.config.context)
        n = window.shape[1]
        x = self.embedding(window)
        rotary = None
        if self.positions is not None:
            x = x + self.positions(torch.arange(n, device=tokens.device))
        else:
            rotary = rotary_tables(n, self.config.d_model // self.config.nheads, tokens.device)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x, rotary)
        return self.final_norm(x[:, n - T:]), new_state

    def embedding_params(self) -> int:
        positions = self.positions.weight.numel() if self.positions is not None else 0
        return super().embedding_params() + positions

    def flops_per_token(self, segment: int) -> float:
        """Forward FLOPs per token on windows of ``segment`` tokens (a causal query attends to (T+1)/2 on average)."""
        c = self.config
        d = c.d_model
        attended = (min(segment, c.context) + 1) / 2
        per_layer = 2 * (4 * d * d + 2 * d * c.mlp_width) + 4 * attended * d
        return c.nlayers * per_layer + 2 * d * c.vocab_size
