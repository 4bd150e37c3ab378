"""The interface every model of the study implements.

A model maps token ids ``[batch, time]`` and a *state* to hidden vectors
``[batch, time, width]`` and a new state; ``logits`` turns hidden vectors into
next-token scores. The state is what lets a long text be processed in
segments: LSTM ``(h, c)`` pairs, the SHA-RNN attention memory, or the
Transformer's window of previous tokens. ``None`` means "start of a document".
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

State = Any  # nested lists/tuples of tensors, or None


class LanguageModel(nn.Module):
    # Recurrent models carry their state from one training batch to the next (truncated BPTT).
    carries_state_in_training: bool = True

    def forward(self, tokens: torch.Tensor, state: State = None) -> tuple[torch.Tensor, State]:
        raise NotImplementedError

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights are counted once

    def embedding_params(self) -> int:
        raise NotImplementedError

    def non_embedding_params(self) -> int:
        return self.num_params() - self.embedding_params()

    def flops_per_token(self, segment: int) -> float:
        """Forward FLOPs per token when trained on segments of ``segment`` tokens; training costs about 3x."""
        raise NotImplementedError


def detach_state(state: State) -> State:
    """Cut the graph behind a state (truncated backpropagation through time)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(detach_state(s) for s in state)


def select_state(state: State, rows: torch.Tensor | slice) -> State:
    """The state of some batch rows (every tensor in a state is batch-first)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state[rows] if state.dim() > 0 else state
    return type(state)(select_state(s, rows) for s in state)


def state_to(state: State, device: torch.device | str) -> State:
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return type(state)(state_to(s, device) for s in state)


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, state, **weights) -> tuple[torch.Tensor, tuple]:
    """Run a batch-first ``nn.LSTM`` with a batch-first state ``(h, c)`` of shape [B, layers, H].

    ``nn.LSTM`` keeps its state as [layers, B, H] even with ``batch_first``; states
    here are batch-first everywhere so that checkpoints and row selection treat
    every tensor alike. ``weights`` replace parameters for this call (weight drop).
    """
    if state is not None:
        state = tuple(s.transpose(0, 1).contiguous() for s in state)
    if weights:
        from torch.func import functional_call

        params = dict(lstm.named_parameters())
        params.update(weights)
        out, (h, c) = functional_call(lstm, params, (x, state))
    else:
        out, (h, c) = lstm(x, state)
    return out, (h.transpose(0, 1), c.transpose(0, 1))
