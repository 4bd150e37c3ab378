"""The SHA-RNN's blocks overlapped (``layer_overlap = N``): each segment cut into N chunks, run as a wavefront.

At step t block l runs chunk t - l, so that block l + 1 works on chunk i while block l works on chunk i + 1. Each
block's LSTM carries its ``(h, c)`` from chunk to chunk; an attention block's chunk attends to the memory (trimmed
before the segment, as without overlap) and, causally, to the positions of the chunks it has computed. Nothing else
in a block looks across positions, so the chunked forward is the unchunked one.

In training every dropout mask of the segment is drawn before it is cut (:func:`draw_keep`) and each chunk applies
its slice: the forward pass, and its gradients, are those of one chunk with the same masks, whatever N (to
rounding; tests/test_layer_overlap.py). Block after block (N = 1) the modules draw their masks as they go, as they
always have, so ``layer_overlap = 1`` leaves a run's numbers and its random draws as they were.

On CUDA each block runs its chunks on a stream of its own (:class:`Lanes`); on the CPU the same order runs on one.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch
import torch.nn as nn

from bench.models.common import State


class AttentionKeep(NamedTuple):
    """Where dropout keeps an attention head's query [B, T, E], value [B, M+T, E] (the memory's positions and the
    segment's) and weights [B, T, M+T]: True = kept."""

    query: torch.Tensor
    value: torch.Tensor
    weights: torch.Tensor


class BlockKeep(NamedTuple):
    """Where dropout keeps a block's values, drawn for a whole segment (None: the module draws its own): after the
    LSTM, the attention head's, after the attention, inside the Boom layer, after it."""

    lstm: torch.Tensor | None = None
    attention: AttentionKeep | None = None
    attention_out: torch.Tensor | None = None
    boom: torch.Tensor | None = None
    out: torch.Tensor | None = None

    def rows(self, start: int, end: int, memory: int) -> BlockKeep:
        """The masks of the chunk [start, end) of a segment that follows ``memory`` memory positions: its rows,
        and of the keys/values the memory's and the segment's up to the chunk's end."""
        def part(keep: torch.Tensor | None) -> torch.Tensor | None:
            return None if keep is None else keep[:, start:end]

        a = self.attention
        head = None if a is None else AttentionKeep(a.query[:, start:end], a.value[:, :memory + end],
                                                    a.weights[:, start:end, :memory + end])
        return BlockKeep(part(self.lstm), head, part(self.attention_out), part(self.boom), part(self.out))


NO_KEEP = BlockKeep()


def draw_keep(block: nn.Module, batch: int, length: int, memory: int, device: torch.device) -> BlockKeep:
    """Every dropout mask of ``block`` (an SHABlock: its module imports this one) for a segment of ``length``
    positions after ``memory`` memory positions, each at its module's rate; NO_KEEP outside training."""
    if not block.training:
        return NO_KEEP

    def kept(p: float, *shape: int) -> torch.Tensor | None:
        return None if p == 0 else torch.rand(shape, device=device) >= p

    width, p, attention = block.lstm.hidden_size, block.dropout.p, block.attention
    lstm = kept(p, batch, length, width)
    head = attention_out = None
    if attention is not None:
        if attention.dropout > 0:
            q = attention.dropout
            head = AttentionKeep(kept(q, batch, length, width), kept(q, batch, memory + length, width),
                                 kept(q, batch, length, memory + length))
        attention_out = kept(p, batch, length, width)
    boom = kept(block.boom.dropout.p, batch, length, block.boom.up.out_features)
    return BlockKeep(lstm, head, attention_out, boom, kept(p, batch, length, width))


def chunk_bounds(length: int, chunks: int) -> list[tuple[int, int]]:
    """[start, end) of ``chunks`` nearly equal chunks of ``length`` positions (fewer when the segment is shorter)."""
    n = min(chunks, length)
    return [(length * i // n, length * (i + 1) // n) for i in range(n)]


def wavefront(blocks: int, chunks: int) -> Iterator[tuple[int, int]]:
    """(block, chunk) in the order they are issued: at step t, block l runs chunk t - l."""
    for step in range(blocks + chunks - 1):
        for block in range(max(0, step - chunks + 1), min(blocks, step + 1)):
            yield block, step - block


def chunk_mask(start: int, end: int, memory: int, device: torch.device) -> torch.Tensor:
    """[end - start, memory + end] boolean, True = may attend: the memory and the segment up to each row's position."""
    return torch.ones(end - start, memory + end, dtype=torch.bool, device=device).tril(memory + start)


def overlapped_forward(model: nn.Module, tokens: torch.Tensor, state: State, chunks: int) -> tuple[torch.Tensor, State]:
    """``model.forward`` (an SHARNN's) with its blocks overlapped over ``chunks`` chunks of the segment ``tokens``
    [B, T]."""
    B, T = tokens.shape
    blocks = model.blocks
    lstm_states, memories = model.carried_state(state, T)
    lstm_states, keys_values = list(lstm_states), list(memories)
    memory_lengths = [0 if m is None else m.shape[1] for m in memories]
    h = model.input_dropout(model.embedding(tokens))
    keeps = [draw_keep(block, B, T, m, h.device) for block, m in zip(blocks, memory_lengths)]
    bounds = chunk_bounds(T, chunks)
    lanes = Lanes(len(blocks), h.device)
    lanes.fork([(h if i == 0 else None, lstm_states[i], memories[i], keeps[i]) for i in range(len(blocks))])
    handed: list[list[Handoff]] = [[] for _ in blocks]
    with model.eager_while_filling(memories, T):
        for i, c in wavefront(len(blocks), len(bounds)):
            block, (start, end), memory = blocks[i], bounds[c], memory_lengths[i]
            with lanes.on(i):
                x = h[:, start:end] if i == 0 else lanes.receive(handed[i - 1][c], i)
                mask = chunk_mask(start, end, memory, h.device) if block.attention is not None else None
                x, lstm_states[i], keys_values[i] = block(x, lstm_states[i], keys_values[i], mask,
                                                          keeps[i].rows(start, end, memory))
                handed[i].append(lanes.hand_over(x, i))
    hidden = [handoff.tensor for handoff in handed[-1]]
    lanes.join([hidden, lstm_states, keys_values])
    max_memory = model.config.max_memory
    new_memories = [None if kv is None else kv[:, -max_memory:] for kv in keys_values]
    return model.output_dropout(torch.cat(hidden, dim=1)), (lstm_states, new_memories)


class Handoff(NamedTuple):
    """A chunk one block hands to the next, and on CUDA the event recorded when its block's stream made it."""

    tensor: torch.Tensor
    event: torch.cuda.Event | None


@functools.cache
def block_streams(device: torch.device, blocks: int) -> tuple[torch.cuda.Stream, ...]:
    """One stream per block, made once per device: the caching allocator keeps its memory per stream, and streams
    made anew for each segment would each keep their own."""
    return tuple(torch.cuda.Stream(device) for _ in range(blocks))


def tensors_in(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)


class Lanes:
    """Where each block runs its chunks. On CUDA, a stream per block: every block's stream first waits for what the
    caller's stream has queued, waits for the event of chunk i of the block below before reading it, and the caller's
    stream waits for all of them at the end. A tensor read on another stream than the one that made it is recorded
    there (``record_stream``), so that the caching allocator does not hand its memory out again while that stream
    may still read it. Autograd runs each backward op on its forward op's stream and orders the streams itself.
    On the CPU: no streams, nothing to wait for, the same order."""

    def __init__(self, blocks: int, device: torch.device):
        self.caller = torch.cuda.current_stream(device) if device.type == "cuda" else None
        self.streams = block_streams(device, blocks) if self.caller is not None else ()

    def fork(self, reads: list[object]) -> None:
        """Each block's stream starts after the caller's work, of which block i reads the tensors in ``reads[i]``."""
        for stream, read in zip(self.streams, reads):
            stream.wait_stream(self.caller)
            for tensor in tensors_in(read):
                tensor.record_stream(stream)

    def on(self, block: int) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.streams[block]) if self.streams else contextlib.nullcontext()

    def hand_over(self, tensor: torch.Tensor, block: int) -> Handoff:
        if not self.streams:
            return Handoff(tensor, None)
        event = torch.cuda.Event()
        event.record(self.streams[block])
        return Handoff(tensor, event)

    def receive(self, handoff: Handoff, block: int) -> torch.Tensor:
        if handoff.event is not None:
            self.streams[block].wait_event(handoff.event)
            handoff.tensor.record_stream(self.streams[block])
        return handoff.tensor

    def join(self, reads: Iterable) -> None:
        """The caller's stream waits for every block's, and reads ``reads``."""
        for stream in self.streams:
            self.caller.wait_stream(stream)
        for tensor in tensors_in(reads) if self.streams else ():
            tensor.record_stream(self.caller)
