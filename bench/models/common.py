"""The interface every model of the study implements.

A model maps token ids ``[batch, time]`` and a *state* to hidden vectors
``[batch, time, width]`` and a new state; ``logits`` turns hidden vectors into
next-token scores. The state is what lets a long text be processed in
segments: LSTM ``(h, c)`` pairs, the SHA-RNN attention memory, or the
Transformer's window of previous tokens. ``None`` means "start of a document".
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, ContextManager

import torch
import torch.nn as nn
import torch.nn.functional as F

State = Any  # nested lists/tuples of tensors, or None

ATTENTION_LABEL = "bench::attention"  # around an attention module's forward, for `bench speed --profile`


def profiler_label(name: str) -> ContextManager:
    """A torch.profiler label while a profiler records, else nothing (no cost in training); never inside
    compiled code, where the compiler would drop it with a warning."""
    if torch.compiler.is_compiling() or not torch._C._autograd._profiler_enabled():
        return contextlib.nullcontext()
    return torch.profiler.record_function(name)

# The `paper` recipe, the SHA-RNN's and (with their own optimizer) the others': the reference's enwik8 recipe
# (emsize 1024, nhid 4096, 4 layers, bptt 1024, dropouts 0.1, LAMB lr 2e-3 with min trust 0.25, warmup 800,
# clip 0.25, weight decay 1.2e-6). The reference README's commands use batch size 8; the recipe here uses 16 as the
# paper does.
PAPER_TRAIN = dict(
    batch_size=16, bptt=1024, seq_jitter=True, optimizer="lamb", lr=2e-3, warmup_steps=800, clip=0.25,
    weight_decay=1.2e-6, min_trust=0.25, schedule="constant", max_epochs=14.0, eval_every=2000,
    eval_max_chars=1_000_000, eval_streams=8, eval_chunk=1024, checkpoint_every=500, log_every=50,
)


class LanguageModel(nn.Module):
    """A model with an ``embedding`` matrix that doubles as its softmax weight (tied), plus ``output_bias``."""

    # Family traits: what the layers around a model (resolution, evaluation, precision, device, figures, the
    # command line) know of it; a family is one class with these, registered in bench.models.MODELS.
    config_class: ClassVar[type]  # the settings dataclass: its fields are `--set` keys beside the training fields
    # Named sizes with their training recipe: {"tiny": {"model": {...}, "train": {...}}}; the first is the smallest.
    presets: ClassVar[dict[str, dict[str, dict]]] = {}
    # Recurrent models carry their state from one training batch to the next (truncated BPTT).
    carries_state_in_training: ClassVar[bool] = True
    # The config field that is the window of positions a windowed model sees (None: a recurrent model); unless
    # set, a run sets it to its training segment (bptt), and evaluation slides it with a stride of half of it.
    window_setting: ClassVar[str | None] = None
    # The submodule types ``compile_parts`` compiles: the parts without recurrence (LSTMs stay eager).
    parts_to_compile: ClassVar[tuple[type[nn.Module], ...]] = ()
    # How figures draw the family (matplotlib); the diamond "D" and the dotted line are a pretrained model's.
    marker: ClassVar[str]
    linestyle: ClassVar[str] = "-"
    compiled: bool = False  # whether compile_parts was called

    embedding: nn.Embedding
    output_bias: nn.Parameter

    def forward(self, tokens: torch.Tensor, state: State = None) -> tuple[torch.Tensor, State]:
        raise NotImplementedError

    def add_tied_output_bias(self, vocab_size: int) -> None:
        """Register the softmax bias (its weight is the embedding matrix).

        Being the model's only direct parameter, it comes first in ``parameters()``
        and the state_dict (before every submodule's), wherever it is registered.
        """
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))

    def init_normal(self, std: float) -> None:
        """Draw every Linear and Embedding weight from N(0, std) and zero the Linear biases.

        ``apply`` visits modules in a fixed order (children before parents, in
        registration order), so the same seed gives the same weights.
        """

        def init(module: nn.Module) -> None:
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        self.apply(init)

    @classmethod
    def window_of(cls, config) -> int | None:
        """The most positions one forward pass of a model of this config sees; None for a recurrent model."""
        return getattr(config, cls.window_setting) if cls.window_setting else None

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.embedding.weight, self.output_bias)

    def logits_width(self, hidden: torch.Tensor) -> int:
        """The logits ``logits`` makes of one position of ``hidden``: the vocabulary."""
        return self.embedding.num_embeddings

    def compile_parts(self) -> None:
        """``torch.compile`` each submodule of a type in ``parts_to_compile``, in place.

        ``nn.Module.compile`` compiles in place, so state_dict names (and checkpoints) are unchanged.
        """
        for module in self.modules():
            if isinstance(module, self.parts_to_compile):
                module.compile()
        self.compiled = True

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights are counted once

    def embedding_params(self) -> int:
        return self.embedding.weight.numel()

    def non_embedding_params(self) -> int:
        return self.num_params() - self.embedding_params()

    def flops_per_token(self, segment: int) -> float:
        """Forward FLOPs per token when trained on segments of ``segment`` tokens."""
        raise NotImplementedError

    def train_flops_per_token(self, segment: int) -> float:
        """Training FLOPs per token: the forward pass and a backward pass of twice its cost (Kaplan et al. 2020);
        the one place every count of training compute (plan, budget, trainer, result, speed) takes it from."""
        return 3 * self.flops_per_token(segment)


def slide_window(previous: torch.Tensor | None, tokens: torch.Tensor, context: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The sliding window of a model that sees at most ``context`` positions: ``tokens`` [B, T] after as many of the
    ``previous`` tokens (a window model's state, None at a document's start) as fit, and the state to carry on
    (the last ``context - 1`` tokens). Scoring a text in chunks of T tokens thus gives the k-th token of a chunk
    the ``context - T`` tokens before the chunk and the k before it in the chunk."""
    B, T = tokens.shape
    if T > context:
        raise ValueError(f"segment of {T} tokens exceeds the model's context of {context}")
    previous = previous if previous is not None else tokens[:, :0]
    previous = previous[:, previous.shape[1] - min(previous.shape[1], context - T):]
    window = torch.cat([previous, tokens], dim=1)
    return window, window[:, window.shape[1] - min(window.shape[1], context - 1):]


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
    every tensor alike. ``weights`` replace parameters for this call (weight drop). The precision policy's rule
    for recurrent modules (bench.engine.hardware.precision) acts inside ``lstm`` itself.
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
