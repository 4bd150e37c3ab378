"""``bench eval RUN --marginal K``: the likelihood of the text summed over its segmentations, estimated.

For a line (a WikiText paragraph) x after the text before it, p(x) = p(s*) + R, where s* is the canonical
segmentation and R the mass of every other segmentation in the scheme's lattice
(tokenizers_study.segmentations). p(s*) is computed exactly; R by importance sampling: K segmentations
drawn from a proposal q whose probabilities are known exactly (a unigram model of the scheme's tokens on
the train split, drawn through the lattice), R = mean over draws of p(s)/q(s), draws equal to s* counting 0.
So the estimate of p(x) is never below p(s*) and the marginal bits never above the canonical ones. R is
unbiased, but log(p(s*) + R) underestimates log p(x) in expectation (Jensen): the gap it shows is, in
expectation, a lower bound (and segmentations outside the lattice are not counted). The Monte Carlo standard
error comes from the spread of the draws (delta method), summed over lines in quadrature.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from bench.engine.hardware.precision import Precision
from bench.models.common import LanguageModel, State, select_state
from tokenizers_study import Tokenizer, lattice_forms
from tokenizers_study.errors import TokenizerError
from tokenizers_study.segmentations import Lattice, piece_table
from tokenizers_study.text import text_bytes

LN2 = math.log(2.0)


@dataclass
class LineEstimate:
    canonical_log_p: float  # nats
    log_p: float  # the estimate of log p(x), nats; never below canonical_log_p
    se_log_p: float  # its Monte Carlo standard error (nats)


def estimate_line(canonical: tuple[int, ...], canonical_log_p: float, draws: list[tuple[tuple[int, ...], float]],
                  draw_log_p: np.ndarray) -> LineEstimate:
    """log(p(s*) + R) from the draws ``(ids, log q)`` and their model log-probabilities."""
    log_w = np.array([lp - lq if ids != canonical else -np.inf for (ids, lq), lp in zip(draws, draw_log_p)])
    if not np.isfinite(log_w).any():
        return LineEstimate(canonical_log_p, canonical_log_p, 0.0)
    k, top = len(log_w), log_w.max()
    w = np.exp(log_w - top)  # the weights scaled by exp(-top)
    log_r = top + math.log(w.mean())
    log_p = float(np.logaddexp(canonical_log_p, log_r))
    spread = math.sqrt(w.var(ddof=1) / k) if k > 1 else 0.0
    return LineEstimate(canonical_log_p, log_p, spread * math.exp(top - log_p))


def proposal_log_weights(tokenizer: Tokenizer, train_ids: np.ndarray) -> np.ndarray:
    """A unigram model of the scheme's tokens on the train split (add-one): the proposal's token weights."""
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=tokenizer.vocab_size) + 1.0
    return np.log(counts / counts.sum())


@torch.no_grad()
def sequence_log_p(model: LanguageModel, state: State, first: int, sequences: list[tuple[int, ...]],
                   segment: int, device: torch.device, precision: Precision) -> tuple[np.ndarray, State]:
    """log p of each sequence after ``state`` and the input token ``first`` (the last token before them), fed
    ``segment`` tokens at a time; and the state after them (meaningful for one sequence: others are padded)."""
    longest = max(map(len, sequences))
    inputs = torch.zeros(len(sequences), longest, dtype=torch.long)
    targets = torch.full((len(sequences), longest), -100, dtype=torch.long)
    for row, ids in enumerate(sequences):
        inputs[row, :len(ids)] = torch.tensor((first,) + ids[:-1])
        targets[row, :len(ids)] = torch.tensor(ids)
    inputs, targets = inputs.to(device), targets.to(device)
    state = None if state is None else select_state(state, torch.zeros(len(sequences), dtype=torch.long))
    total = torch.zeros(len(sequences), dtype=torch.float64, device=device)
    for start in range(0, longest, segment):
        with precision.active(device):
            hidden, state = model(inputs[:, start:start + segment], state)
        logits = model.logits(hidden.float())
        nll = F.cross_entropy(logits.transpose(1, 2), targets[:, start:start + segment], ignore_index=-100,
                              reduction="none")
        total -= nll.sum(dim=1, dtype=torch.float64)
    return total.cpu().numpy(), state


def score_lines(model: LanguageModel, tokenizer: Tokenizer, text: str, chosen: set[int], draws_per_line: int,
                log_weight: np.ndarray, segment: int, device: torch.device, precision: Precision,
                rng: np.random.Generator
                ) -> tuple[list[LineEstimate], int]:
    """Walk the text line by line in its canonical segmentation; for each chosen line, estimate its marginal.
    Returns the estimates and the bytes of the chosen lines."""
    model.eval()
    pieces = piece_table(tokenizer)
    state, last, estimates, n_bytes = None, tokenizer.bos_id, [], 0
    for index, line in enumerate(text.splitlines(keepends=True)):
        canonical = tuple(tokenizer.encode(line).tolist())
        if not canonical:
            continue
        log_p, after = sequence_log_p(model, state, last, [canonical], segment, device, precision)
        if index in chosen:
            try:
                draws = Lattice.of(line, pieces).sample(log_weight, draws_per_line, rng)
            except TokenizerError:
                raise TokenizerError(f"line {index + 1} ({line[:40]!r}...) has no segmentation into the tokens of "
                                     f"{tokenizer.spec.name}: its tokens do not spell the raw text (a normalising "
                                     f"tokenizer such as WordPiece); --marginal needs a lossless one "
                                     f"({lattice_forms()}, a pretrained one if byte-level)") from None
            draw_log_p, _ = sequence_log_p(model, state, last, [ids for ids, _ in draws], segment, device, precision)
            estimates.append(estimate_line(canonical, float(log_p[0]), draws, draw_log_p))
            n_bytes += len(text_bytes(line))
        state, last = after, canonical[-1]
    return estimates, n_bytes


@dataclass
class MarginalReport:
    split: str
    lines: int  # lines scored
    draws_per_line: int
    n_bytes: int
    canonical_bits_per_byte: float
    marginal_bits_per_byte: float  # never above the canonical
    marginal_se: float  # Monte Carlo standard error of the marginal bits per byte
    relative_gap: float  # (canonical - marginal) / canonical

    def to_json(self) -> dict:
        return asdict(self)


def summarize(split: str, estimates: list[LineEstimate], n_bytes: int, draws: int) -> MarginalReport:
    canonical = -sum(e.canonical_log_p for e in estimates) / LN2 / n_bytes
    marginal = -sum(e.log_p for e in estimates) / LN2 / n_bytes
    se = math.sqrt(sum(e.se_log_p ** 2 for e in estimates)) / LN2 / n_bytes
    return MarginalReport(split, len(estimates), draws, n_bytes, canonical, marginal, se,
                          (canonical - marginal) / canonical if canonical else 0.0)
