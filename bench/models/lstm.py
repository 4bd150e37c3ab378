"""A stacked LSTM language model in the AWD-LSTM tradition (Merity et al., 2017).

    tokens -> embedding (embedding dropout: whole rows dropped, ``dropoute``)
           -> locked dropout (``dropouti``)
           -> nlayers LSTMs, locked dropout between them (``dropouth``),
              optional weight drop (DropConnect) on each hidden-to-hidden matrix (``wdrop``)
           -> locked dropout (``dropout``) -> tied softmax (with bias)

The last LSTM's width is ``emsize`` so that the softmax can share the
embedding matrix. "Locked" (variational) dropout uses one mask per sequence,
the same at every time step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.models.common import PAPER_TRAIN, LanguageModel, State, run_lstm
from bench.settings import DROPOUT, POSITIVE, SIZE, check_settings, setting


@dataclass
class LSTMConfig:
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", SIZE)
    emsize: int = setting(400, "embedding width, and the last LSTM's width (the softmax shares the embedding)",
                          SIZE)
    nhid: int = setting(1150, "width of the other LSTM layers", SIZE)
    nlayers: int = setting(3, "stacked LSTM layers", SIZE)
    dropout: float = setting(0.1, "locked dropout on the last layer's output", DROPOUT)
    dropouth: float = setting(0.1, "locked dropout between LSTM layers", DROPOUT)
    dropouti: float = setting(0.1, "locked dropout on the embeddings", DROPOUT)
    dropoute: float = setting(0.0, "embedding dropout: probability of dropping a whole token type", DROPOUT)
    wdrop: float = setting(0.0, "DropConnect on hidden-to-hidden weights", DROPOUT)
    init_range: float = setting(0.1, "embedding init U(-r, r); AWD-LSTM's 0.1 is slow for tiny models trained "
                                     "briefly", POSITIVE)

    def __post_init__(self) -> None:
        check_settings(self)


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout with one mask per sequence: x is [B, T, F], the mask is [B, 1, F]."""
    if not training or p == 0.0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1 - p) / (1 - p)
    return x * mask


def embedding_dropout(embedding: nn.Embedding, tokens: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Drop whole rows of the embedding matrix (every occurrence of a token type)."""
    if not training or p == 0.0:
        return embedding(tokens)
    weight = embedding.weight
    mask = weight.new_empty(weight.shape[0], 1).bernoulli_(1 - p) / (1 - p)
    return F.embedding(tokens, weight * mask)


class LSTMLM(LanguageModel):
    """State: one batch-first ``(h, c)`` per layer."""

    config_class = LSTMConfig
    parts_to_compile = ()  # every layer is recurrent
    marker = "s"
    linestyle = "--"
    presets = {
        "tiny": {
            "model": dict(emsize=64, nhid=128, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0, init_range=0.5),
            "train": dict(batch_size=16, bptt=64, optimizer="adamw", lr=1e-2, warmup_steps=20, clip=0.25,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32, eval_chunk=256,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(emsize=256, nhid=768, nlayers=3, dropout=0.1, dropouth=0.1, dropouti=0.1, wdrop=0.1,
                          init_range=0.25),
            "train": dict(batch_size=16, bptt=256, seq_jitter=True, optimizer="adamw", lr=2e-3, warmup_steps=100,
                          clip=0.25, max_steps=1500, eval_every=250, eval_max_chars=300_000, eval_streams=16,
                          eval_chunk=512, checkpoint_every=100, log_every=10),
        },
        "paper": {
            "model": dict(emsize=1024, nhid=1712, nlayers=3, dropout=0.1, dropouth=0.1, dropouti=0.1, wdrop=0.1),
            "train": {**PAPER_TRAIN, "optimizer": "adamw", "lr": 1e-3},
        },
    }

    def __init__(self, config: LSTMConfig):
        super().__init__()
        self.config = config
        c = config
        self.embedding = nn.Embedding(c.vocab_size, c.emsize)
        sizes = [c.emsize] + [c.nhid] * (c.nlayers - 1) + [c.emsize]
        self.lstms = nn.ModuleList(nn.LSTM(sizes[i], sizes[i + 1], batch_first=True) for i in range(c.nlayers))
        self.add_tied_output_bias(c.vocab_size)
        nn.init.uniform_(self.embedding.weight, -c.init_range, c.init_range)

    def _hidden_weights(self, lstm: nn.LSTM) -> dict:
        if not self.training or self.config.wdrop == 0.0:
            return {}
        return {"weight_hh_l0": F.dropout(lstm.weight_hh_l0, self.config.wdrop, True)}

    def forward(self, tokens: torch.Tensor, state: State = None):
        c = self.config
        states = state if state is not None else [None] * len(self.lstms)
        h = embedding_dropout(self.embedding, tokens, c.dropoute, self.training)
        h = locked_dropout(h, c.dropouti, self.training)
        new_states = []
        for i, (lstm, layer_state) in enumerate(zip(self.lstms, states)):
            h, layer_state = run_lstm(lstm, h, layer_state, **self._hidden_weights(lstm))
            new_states.append(layer_state)
            last = i == len(self.lstms) - 1
            h = locked_dropout(h, c.dropout if last else c.dropouth, self.training)
        return h, new_states

    def flops_per_token(self, segment: int) -> float:
        matrices = sum(4 * lstm.hidden_size * (lstm.input_size + lstm.hidden_size) for lstm in self.lstms)
        return 2 * matrices + 2 * self.config.emsize * self.config.vocab_size
