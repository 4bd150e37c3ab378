"""Score a whole split: the total negative log-likelihood of every token.

The split's ``n`` tokens are cut into ``streams`` contiguous pieces that are
processed side by side (a batch). Each piece starts from the document-start
token ``<bos>`` with a fresh state, so *every* token is predicted, the first
one included, and the pieces together score the split exactly once. Within a
piece the text is fed ``chunk`` tokens at a time with the model's state carried
from chunk to chunk (LSTM states, the SHA-RNN memory; for the Transformer, the
window of previous tokens, so ``chunk`` is the sliding window's stride).
Fewer streams means more context for the tokens at the start of each piece;
the layout is recorded with every result.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
import torch.nn.functional as F

from bench.engine.hardware.distributed import Ranks
from bench.engine.corpus import PreparedCorpus
from bench.engine.hardware.precision import FLOAT32, Precision
from bench.engine.resolve import check_eval_chunk
from bench.engine.result import SplitMetrics
from bench.errors import BenchError
from bench.models.common import LanguageModel, State
from bench.run_files import token_losses


@dataclass
class EvalLayout:
    streams: int
    chunk: int  # tokens per forward pass (the Transformer's stride)
    window: int | None = None  # the Transformer's context (window) length; None for recurrent models
    precision: str = "float32"  # of the model's body (Precision.name); the output projection and softmax: float32

    def to_json(self) -> dict:
        return asdict(self)


def run_layout(model: LanguageModel, streams: int, bptt: int, chunk: int | None = None,
               precision: Precision = FLOAT32) -> EvalLayout:
    """A run's evaluation layout: recurrent models carry their state through ``bptt``-token chunks;
    the Transformer slides a window of its context with a stride of half of it, unless ``chunk`` is given."""
    window = model.window_of(model.config)
    check_eval_chunk(chunk, window, "the evaluation chunk")
    default_chunk = bptt if window is None else max(1, window // 2)
    return EvalLayout(streams=streams, chunk=chunk or default_chunk, window=window, precision=precision.name)


@dataclass
class EvalResult:
    total_nll_nats: float
    n_tokens: int
    seconds: float
    layout: EvalLayout
    token_nll: np.ndarray | None = None  # per-token NLL (nats), in text order, when asked for
    token_greedy: np.ndarray | None = None  # per token, whether it was the model's most likely one, when asked for

    @property
    def mean_nll(self) -> float:
        return self.total_nll_nats / self.n_tokens if self.n_tokens else math.nan


def check_streams(streams: int, n_tokens: int, split: str) -> None:
    """Streams asked for by name must fit the split: past one token each, they would silently become fewer."""
    if streams > n_tokens:
        raise BenchError(f"--streams {streams:,} is more than the {n_tokens:,} tokens of {split}: each stream is "
                         f"scored from the start token, so a one-token stream has no context; give at most "
                         f"{n_tokens:,}")


def stream_bounds(n: int, streams: int) -> list[tuple[int, int]]:
    """Cut n tokens into at most ``streams`` contiguous, nearly equal pieces."""
    streams = max(1, min(streams, n))
    base, extra = divmod(n, streams)
    bounds, start = [], 0
    for k in range(streams):
        length = base + (1 if k < extra else 0)
        bounds.append((start, start + length))
        start += length
    return bounds


@dataclass(frozen=True)
class Scorer:
    """The one path from token ids to a split's metrics, for a trained run's validation and final evaluation,
    ``bench eval`` and ``bench eval-hf`` (a pretrained model behind the same interface: bench.models.pretrained).
    Several processes (``ranks``) score a block of the streams each and sum; every process gets the whole result.
    With ``progress``: a bar on a terminal, else a line when it starts and one when it ends (a log file)."""

    model: LanguageModel
    bos_id: int  # the token the first token of each stream is predicted from
    layout: EvalLayout
    device: torch.device
    precision: Precision = FLOAT32
    ranks: Ranks = Ranks()
    progress: TextIO | None = None

    def split_metrics(self, ids: np.ndarray, counts: dict[str, int], lossless: bool, label: str,
                      keep_token_nll: bool = False) -> tuple[SplitMetrics, EvalResult]:
        """Every normalized metric of a whole split, from its total NLL; ``counts``: its text's."""
        result = self.score(ids, keep_token_nll=keep_token_nll, label=label)
        return SplitMetrics.score(result.total_nll_nats, result.n_tokens, counts, result.seconds, lossless), result

    @torch.no_grad()
    def score(self, ids: np.ndarray, keep_token_nll: bool = False, max_tokens: int | None = None,
              label: str = "", keep_greedy: bool = False) -> EvalResult:
        """Total NLL of ``ids`` (the first ``max_tokens`` of them if given); with ``keep_token_nll`` each token's,
        with ``keep_greedy`` whether each was the most likely token (lm-eval's is_greedy)."""
        model, layout, ranks, device = self.model, self.layout, self.ranks, self.device
        ids = np.asarray(ids[:max_tokens] if max_tokens else ids, dtype=np.int64)
        n = len(ids)
        start_time = time.perf_counter()
        was_training = model.training
        model.eval()
        every_stream = stream_bounds(n, layout.streams)
        bounds = every_stream[ranks.share(len(every_stream))]
        longest = max((b - a for a, b in bounds), default=0)
        inputs = np.full((len(bounds), longest), self.bos_id, dtype=np.int64)
        targets = np.full((len(bounds), longest), -100, dtype=np.int64)  # -100: padding, not scored
        for row, (a, b) in enumerate(bounds):
            inputs[row, 1:b - a] = ids[a:b - 1]
            targets[row, :b - a] = ids[a:b]
        inputs_t = torch.from_numpy(inputs).to(device)
        targets_t = torch.from_numpy(targets).to(device)
        token_nll = np.zeros((len(bounds), longest), dtype=np.float32) if keep_token_nll else None
        greedy = np.zeros((len(bounds), longest), dtype=bool) if keep_greedy else None
        total = torch.zeros((), dtype=torch.float64, device=device)
        scored = torch.zeros((), dtype=torch.int64, device=device)  # counted where scored: a skipped token shows
        state = None
        progress = self.progress if ranks.is_main else None
        for t in _chunks(longest, layout.chunk, n, len(every_stream), progress, label):
            y = targets_t[:, t:t + layout.chunk]
            nll, hits, state = chunk_nll(model, inputs_t[:, t:t + layout.chunk], y, state, device, self.precision,
                                         greedy is not None)
            if greedy is not None:
                greedy[:, t:t + layout.chunk] = hits.cpu().numpy()
            total += nll.sum(dtype=torch.float64)
            scored += (y != -100).sum()
            if token_nll is not None:
                token_nll[:, t:t + layout.chunk] = nll.cpu().numpy()
        model.train(was_training)
        total, scored = ranks.sum(total), int(ranks.sum(scored).item())
        if scored != n:
            raise AssertionError(f"evaluation scored {scored:,} of {n:,} tokens")  # the layout must score each once
        used = dataclasses.replace(layout, streams=len(every_stream))  # fewer streams than asked on a short text
        seconds = time.perf_counter() - start_time
        if progress is not None and not progress.isatty():
            print(f"evaluated {label}: {n:,} tokens in {seconds:,.1f} s", file=progress, flush=True)
        return EvalResult(float(total.item()), scored, seconds, used, self._in_text_order(token_nll, bounds),
                          self._in_text_order(greedy, bounds))

    def _in_text_order(self, per_stream: np.ndarray | None, bounds: list[tuple[int, int]]) -> np.ndarray | None:
        """Per-token values of every process's streams, concatenated in text order."""
        if per_stream is None:
            return None
        mine = [per_stream[row, :b - a] for row, (a, b) in enumerate(bounds)]
        return np.concatenate(sum(self.ranks.gather_objects(mine), []) or [np.zeros(0, dtype=per_stream.dtype)])


def chunk_nll(model: LanguageModel, x: torch.Tensor, y: torch.Tensor, state: State, device: torch.device,
              precision: Precision, greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, State]:
    """Each token's NLL (nats) of one chunk ``x`` -> ``y`` ([streams, chunk]; -100 marks padding), with ``greedy``
    whether each was the model's most likely token, and the state after the chunk: the evaluation's forward pass,
    which ``bench speed`` times too."""
    with precision.active(device):
        hidden, state = model(x, state)
    losses, hits = [], []
    for rows in _row_blocks(hidden.shape[0], hidden.shape[1] * model.logits_width(hidden), device):
        # the output projection and softmax in float32, whatever the body
        logits = model.logits(hidden[rows].float())
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[rows].reshape(-1),
                                      ignore_index=-100, reduction="none").view(y[rows].shape))
        if greedy:
            hits.append(logits.argmax(-1) == y[rows])
    nll = losses[0] if len(losses) == 1 else torch.cat(losses)  # one block (a GPU): no copy
    return nll, torch.cat(hits) if greedy else None, state


# On a CPU, the logits of a whole chunk (streams x chunk x vocabulary floats: 38 MB for 32 x 128 x 2,339) outgrow
# the cache, and the projection and softmax run at half speed; in blocks of at most 2 MB they do not. Each token's
# loss is the same either way: a row of the projection does not depend on the others.
CPU_LOGITS_PER_BLOCK = 1 << 19


def _row_blocks(streams: int, logits_per_stream: int, device: torch.device) -> list[slice]:
    """The streams of a chunk in nearly equal blocks of at most CPU_LOGITS_PER_BLOCK logits (one stream at least)
    on a CPU, all at once on a GPU."""
    most = streams if device.type != "cpu" else max(1, CPU_LOGITS_PER_BLOCK // max(1, logits_per_stream))
    per_block = -(-streams // max(1, -(-streams // most)))  # as many blocks as needed, of nearly equal size
    return [slice(a, a + per_block) for a in range(0, streams, per_block)]


def _chunks(longest: int, chunk: int, n: int, streams: int, progress: TextIO | None, label: str):
    """The chunk offsets of an evaluation, shown as it goes."""
    from tqdm import tqdm

    offsets = range(0, longest, chunk)
    if progress is None:
        return offsets
    if not progress.isatty():
        print(f"evaluating {label}: {n:,} tokens in {streams} streams, {len(offsets)} chunks", file=progress,
              flush=True)
        return offsets
    return tqdm(offsets, desc=f"evaluating {label}", unit="chunk", file=progress, dynamic_ncols=True, leave=False)


def evaluate_splits(scorer: Scorer, corpus: PreparedCorpus, splits: tuple[str, ...],
                    dump_dir: Path | None = None) -> dict[str, SplitMetrics]:
    """Every normalized metric of each split of a run's corpus; with ``dump_dir``, each token's NLL is saved as
    ``token_nll.<split>.npy`` there (by the main process)."""
    out = {}
    for split in splits:
        out[split], result = scorer.split_metrics(corpus.encoded.ids[split], corpus.counts[split],
                                                  corpus.lossless[split], split, keep_token_nll=dump_dir is not None)
        if dump_dir is not None and scorer.ranks.is_main:
            np.save(dump_dir / token_losses(split), result.token_nll)
    return out
