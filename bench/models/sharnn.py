"""SHA-RNN: the Single Headed Attention RNN of Merity (2019), in plain PyTorch.

A port of the model in the reference implementation (Smerity/sha-rnn,
``model.py``), read and rewritten, without apex. Tensors are batch-first
``[batch, time, features]``.

Architecture (E = ``emsize``, H = ``nhid``)::

    tokens -> embedding (tied with the softmax) -> dropout(dropouti)
    nlayers x block:
        h = LayerNorm(h)
        h = dropout(LSTM(h))                # the LSTM output *replaces* the stream
        if the block has attention:         # (the reference builds blocks with residual=False)
            mem_in = LayerNorm_mem(h); h = LayerNorm_query(h)
            keys/values = [memory ; mem_in]  # memory: past mem_in, carried across segments
            h = h + dropout(attention(h, keys/values))
        h, x = LayerNorm_ff(h), LayerNorm_ff_in(h)
        h = h + dropout(Boom(x))
    -> dropout(dropout) -> tied softmax (with bias)

* **Boom**: Linear E -> H, ``x * sigmoid(1.702 x)``, dropout, then the H-wide
  vector cut into H/E chunks of width E which are summed (no second matrix).
* **Attention** (one head): query = LayerNorm(Linear(h)); keys = values =
  [memory ; LayerNorm(h)]; learned sigmoid gates on query, key and value; the
  value gate comes from the "over-parameterised" vector: a Linear E -> 2E applied
  to sigmoid(v), split into candidate c and gate f, giving sigmoid(f) * tanh(c).
  Dropout on query, value and the attention weights; scaled dot product;
  causal inside the segment, every memory position visible. No positional
  embedding. The memory keeps at most ``max_memory`` positions in all
  (memory plus the current segment), 5000 in the reference.
* ``layer_overlap``: N > 1 runs the blocks as a wavefront over N chunks of each segment, on CUDA each block on a
  stream of its own (``bench.models.sharnn_overlap``); 1 runs them one after another.
* ``attention``: ``"second-last"`` puts the head in the second-last block only
  (the paper's single-head model), ``"all"`` in every block, ``"none"`` nowhere.
  With a single layer, ``"second-last"`` puts the head on layer 0
  (``max(nlayers - 2, 0)``); the reference (``use_attn = l == num_layers - 2``)
  would put none there.

Initialisation as in the reference: embedding and Linear weights from
N(0, 0.1/sqrt(E)), biases zero, gates zero (so sigmoid gates start at 0.5);
LSTMs keep PyTorch's default. The reference's LayerNorms (apex
``FusedLayerNorm``) are not ``nn.LayerNorm`` instances, so its init function
never touched them: they start at gain 1, bias 0, and so do ours.

Left out because they never take part in the reference's forward pass: the
``r`` output gate it marks as a bug (``Attention.r``, ``r_gate``), the unused
``qkvs`` gate vector, the never-used ``lnout`` LayerNorm of every block, the
``k``/``v`` Linears (disabled there), and embedding dropout ``dropoute``
(parsed by its ``main.py`` but never applied by this model). The parameter
count therefore equals the reference's count of parameters that receive a
gradient (see ``tests/test_models.py``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.models.common import ATTENTION_LABEL, PAPER_TRAIN, LanguageModel, State, profiler_label, run_lstm
from bench.models.sharnn_overlap import NO_KEEP, AttentionKeep, BlockKeep, overlapped_forward
from bench.settings import DROPOUT, SIZE, check_settings, setting

Attention = Literal["second-last", "all", "none"]


@dataclass
class SHARNNConfig:
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", SIZE)
    emsize: int = setting(1024, "E: embedding, LSTM and attention width", SIZE)
    nhid: int = setting(4096, "H: the Boom layer's inner width, a multiple of E", SIZE)
    nlayers: int = setting(4, "SHA-RNN blocks (LSTM, optional attention, Boom)", SIZE)
    attention: Attention = setting("second-last", "which blocks have the single attention head")
    dropout: float = setting(0.1, "on the last block's output", DROPOUT)
    dropouth: float = setting(0.1, "inside blocks: after LSTM, attention, Boom; on query, value, attention weights",
                              DROPOUT)
    dropouti: float = setting(0.1, "on the input embeddings", DROPOUT)
    max_memory: int = setting(5000, "attention positions in all: carried memory plus current segment", SIZE)
    layer_overlap: int = setting(1, "N: chunks of a segment the blocks run as a wavefront (N > 1: overlapped, on "
                                 "CUDA a stream per block); 1: block after block", SIZE)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.nhid % self.emsize:
            raise ValueError(f"nhid ({self.nhid}) must be a multiple of emsize ({self.emsize}) for the Boom layer")

    def has_attention(self, layer: int) -> bool:
        if self.attention == "all":
            return True
        if self.attention == "second-last":
            # max(): a one-layer model gets its head on layer 0, where the reference would build none.
            return layer == max(self.nlayers - 2, 0)
        return False


def gelu_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The sigmoid approximation of GELU used by the reference."""
    return x * torch.sigmoid(1.702 * x)


def layer_norm(width: int) -> nn.LayerNorm:
    return nn.LayerNorm(width, eps=1e-12)


def dropped(x: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout at rate ``p`` with its mask drawn beforehand (``keep``: True where ``x`` is kept)."""
    return x * keep * (1 / (1 - p))


def drop(dropout: nn.Dropout, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``dropout(x)``, or with the mask ``keep`` when one was drawn for the whole segment (layer_overlap)."""
    return dropout(x) if keep is None else dropped(x, keep, dropout.p)


class Boom(nn.Module):
    """Linear up to ``nhid``, GELU, dropout, then sum the ``nhid/emsize`` chunks back to ``emsize``."""

    def __init__(self, emsize: int, nhid: int, dropout: float):
        super().__init__()
        self.up = nn.Linear(emsize, nhid)
        self.dropout = nn.Dropout(dropout)
        self.emsize = emsize

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        x = drop(self.dropout, gelu_sigmoid(self.up(x)), keep)
        return x.view(*x.shape[:-1], -1, self.emsize).sum(dim=-2)


class SingleHeadAttention(nn.Module):
    # "auto": two matrix products on CUDA above width 256 (see _matmul_attention), else PyTorch's fused kernel;
    # "sdpa" or "matmul" force one (the GPU runbook's diagnose stage compares them)
    kernel: str = "auto"

    def __init__(self, emsize: int, dropout: float):
        super().__init__()
        self.query = nn.Linear(emsize, emsize)
        self.query_norm = layer_norm(emsize)
        self.query_gate = nn.Parameter(torch.zeros(emsize))
        self.key_gate = nn.Parameter(torch.zeros(emsize))
        self.value_gate = nn.Parameter(torch.zeros(emsize))
        # The over-parameterised value gate: sigmoid(v) -> Linear(E, 2E) -> (c, f) -> sigmoid(f) * tanh(c).
        self.value_gate_overparam = nn.Linear(emsize, 2 * emsize)
        self.dropout = dropout
        self.emsize = emsize

    def value_gate_vector(self) -> torch.Tensor:
        c, f = self.value_gate_overparam(torch.sigmoid(self.value_gate)).chunk(2, dim=-1)
        return torch.sigmoid(f) * torch.tanh(c)

    def forward(self, h: torch.Tensor, keys_values: torch.Tensor, mask: torch.Tensor | None,
                keep: AttentionKeep | None = None) -> torch.Tensor:
        """h: [B, T, E] queries; keys_values: [B, M+T, E]; mask: [T, M+T] boolean, True = may attend; keep: the
        dropout masks, when drawn for the whole segment (layer_overlap)."""
        with profiler_label(ATTENTION_LABEL):
            return self._attend(h, keys_values, mask, keep)

    def _attend(self, h: torch.Tensor, keys_values: torch.Tensor, mask: torch.Tensor | None,
                keep: AttentionKeep | None) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        q = torch.sigmoid(self.query_gate) * self.query_norm(self.query(h))
        k = torch.sigmoid(self.key_gate) * keys_values
        v = self.value_gate_vector() * keys_values
        if keep is not None:  # the fused kernel draws its own mask of the weights: the two products apply this one
            return self._matmul_attention(dropped(q, keep.query, p), k, dropped(v, keep.value, p), mask, p,
                                          keep.weights)
        q, v = F.dropout(q, p, self.training), F.dropout(v, p, self.training)
        if self.kernel == "matmul" or (self.kernel == "auto" and h.is_cuda and self.emsize > 256):
            return self._matmul_attention(q, k, v, mask, p)
        out = F.scaled_dot_product_attention(
            q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), attn_mask=mask, dropout_p=p,
            scale=1.0 / math.sqrt(self.emsize),
        )
        return out.squeeze(1)

    def _matmul_attention(self, q, k, v, mask, p: float, keep_weights: torch.Tensor | None = None) -> torch.Tensor:
        """Attention as two matrix products. With one head as wide as the model, no flash kernel applies and
        the memory-efficient kernel's backward took 27% of a paper-size step on an H100 (its k65536 variant);
        two bf16 GEMMs and a float32 softmax, as in the reference, are faster there."""
        scores = torch.baddbmm(torch.zeros((), dtype=q.dtype, device=q.device), q, k.transpose(1, 2),
                               beta=0.0, alpha=1.0 / math.sqrt(self.emsize))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        softmax_dtype = torch.promote_types(scores.dtype, torch.float32)  # at least float32, even under bf16
        weights = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(v.dtype)
        weights = F.dropout(weights, p, self.training) if keep_weights is None else dropped(weights, keep_weights, p)
        return torch.bmm(weights, v)


class SHABlock(nn.Module):
    def __init__(self, config: SHARNNConfig, attention: bool):
        super().__init__()
        E = config.emsize
        self.input_norm = layer_norm(E)
        self.lstm = nn.LSTM(E, E, batch_first=True)
        self.attention = SingleHeadAttention(E, config.dropouth) if attention else None
        if attention:
            self.memory_norm = layer_norm(E)
            self.query_norm = layer_norm(E)
        self.ff_norm = layer_norm(E)
        self.ff_input_norm = layer_norm(E)
        self.boom = Boom(E, config.nhid, config.dropouth)
        self.dropout = nn.Dropout(config.dropouth)

    def forward(self, h, lstm_state, memory, mask, keep: BlockKeep = NO_KEEP):
        """-> (h, LSTM state, keys/values: [memory ; this input's mem_in], untrimmed; None without attention)."""
        x, lstm_state = run_lstm(self.lstm, self.input_norm(h), lstm_state)
        h = drop(self.dropout, x, keep.lstm)
        keys_values = None
        if self.attention is not None:
            mem_in = self.memory_norm(h)
            h = self.query_norm(h)
            keys_values = mem_in if memory is None else torch.cat([memory, mem_in], dim=1)
            h = h + drop(self.dropout, self.attention(h, keys_values, mask, keep.attention), keep.attention_out)
        h, x = self.ff_norm(h), self.ff_input_norm(h)
        h = h + drop(self.dropout, self.boom(x, keep.boom), keep.out)
        return h, lstm_state, keys_values


class SHARNN(LanguageModel):
    """State: one ``(h, c)`` per block and one memory tensor per attention block (None elsewhere)."""

    config_class = SHARNNConfig
    parts_to_compile = (Boom, SingleHeadAttention)
    marker = "o"
    linestyle = "-"
    presets = {
        "tiny": {
            "model": dict(emsize=64, nhid=256, nlayers=2, attention="second-last", dropout=0.0, dropouth=0.0,
                          dropouti=0.0, max_memory=256),
            "train": dict(batch_size=16, bptt=64, optimizer="lamb", lr=4e-3, warmup_steps=20, clip=0.25,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32, eval_chunk=128,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(emsize=256, nhid=1024, nlayers=4, attention="second-last", dropout=0.1, dropouth=0.1,
                          dropouti=0.1, max_memory=2048),
            "train": dict(batch_size=16, bptt=256, seq_jitter=True, optimizer="lamb", lr=2e-3, warmup_steps=100,
                          clip=0.25, max_steps=1500, eval_every=250, eval_max_chars=300_000, eval_streams=16,
                          eval_chunk=512, checkpoint_every=100, log_every=10),
        },
        "paper": {
            "model": dict(emsize=1024, nhid=4096, nlayers=4, attention="second-last", dropout=0.1, dropouth=0.1,
                          dropouti=0.1, max_memory=5000),
            "train": PAPER_TRAIN,
        },
    }

    def __init__(self, config: SHARNNConfig):
        super().__init__()
        self.config = config
        E = config.emsize
        self.embedding = nn.Embedding(config.vocab_size, E)
        self.input_dropout = nn.Dropout(config.dropouti)
        self.blocks = nn.ModuleList(SHABlock(config, config.has_attention(i)) for i in range(config.nlayers))
        self.output_dropout = nn.Dropout(config.dropout)
        self.add_tied_output_bias(config.vocab_size)
        self.init_normal(0.1 / math.sqrt(E))

    def forward(self, tokens: torch.Tensor, state: State = None):
        """tokens: [B, T] -> (hidden [B, T, E], new state)."""
        if self.config.layer_overlap > 1:
            return overlapped_forward(self, tokens, state, self.config.layer_overlap)
        B, T = tokens.shape
        lstm_states, memories = self.carried_state(state, T)
        max_memory = self.config.max_memory
        mem_len = max((m.shape[1] for m in memories if m is not None), default=0)
        mask = None
        if any(b.attention is not None for b in self.blocks):
            causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
            mask = torch.cat([torch.ones(T, mem_len, dtype=torch.bool, device=tokens.device), causal], dim=1)
        h = self.input_dropout(self.embedding(tokens))
        new_lstm, new_mem = [], []
        with self.eager_while_filling(memories, T):
            for block, lstm_state, memory in zip(self.blocks, lstm_states, memories):
                h, lstm_state, keys_values = block(h, lstm_state, memory, mask)
                new_lstm.append(lstm_state)
                new_mem.append(None if keys_values is None else keys_values[:, -max_memory:])
        return self.output_dropout(h), (new_lstm, new_mem)

    def carried_state(self, state: State, T: int) -> tuple[list, list]:
        """The LSTMs' ``(h, c)`` and the memories before a segment of T tokens, each memory trimmed to make room for
        the segment: at most max_memory positions in all."""
        n = len(self.blocks)
        lstm_states, memories = state if state is not None else ([None] * n, [None] * n)
        keep = max(self.config.max_memory - T, 0)
        return lstm_states, [m[:, m.shape[1] - min(keep, m.shape[1]):] if m is not None else None for m in memories]

    def eager_while_filling(self, memories: list, T: int) -> contextlib.AbstractContextManager:
        """Compiled parts (compile=true) see one memory length, the full one: while the memory fills its length
        changes every segment, and each length would compile again (a static graph, then a dynamic one)."""
        keep = max(self.config.max_memory - T, 0)
        filling = self.compiled and any(b.attention is not None and (m is None or m.shape[1] < keep)
                                        for b, m in zip(self.blocks, memories))
        return torch.compiler.set_stance("force_eager") if filling else contextlib.nullcontext()

    def flops_per_token(self, segment: int) -> float:
        """Forward FLOPs per token (a multiply-add counts 2) when training on segments of ``segment`` tokens.

        With the memory full, a query attends to the memory plus the causal part of
        its segment: on average ``max_memory - segment + (segment + 1) / 2`` positions.
        """
        c = self.config
        E, H = c.emsize, c.nhid
        per_block = 2 * 8 * E * E + 2 * E * H  # LSTM input and hidden matrices; Boom
        segment = min(segment, c.max_memory)
        attended = c.max_memory - segment + (segment + 1) / 2
        attention = 2 * E * E + 4 * attended * E  # query Linear; scores and mix over the attended positions
        n_attention = sum(c.has_attention(i) for i in range(c.nlayers))
        return c.nlayers * per_block + n_attention * attention + 2 * E * c.vocab_size
