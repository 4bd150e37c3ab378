"""Every segmentation of a text into a scheme's tokens, as a lattice: exact sums and exact-probability samples.

A subword language model gives probability to every token sequence that decodes to the
text, not only to the one ``encode`` returns (Cao and Rimell 2021). The lattice of a text
holds, at each byte position, every token whose bytes match the text there; byte tokens
are tokens too, so a path always exists, and each path from the start to the end is a
segmentation. Given a weight per token (log-space), the forward algorithm sums the weights
of all paths exactly, and backward sampling draws paths with probability proportional to
their weight, that probability known exactly: what importance sampling needs.

Schemes whose tokens stand for the same bytes wherever they occur (byte, bpe, sp-bpe,
sp-unigram) have lattices; word schemes, whose spacing depends on the neighbours, do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenizers_study.base import Tokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.text import text_bytes


def piece_table(tokenizer: Tokenizer) -> dict[bytes, list[int]]:
    """Bytes -> the ids of every token that stands for them (specials left out)."""
    from tokenizers_study.registry import lattice_forms

    table = getattr(tokenizer, "_id_bytes", None)
    if table is None:
        raise TokenizerError(f"{tokenizer.spec.name} has no context-free tokens: its segmentations cannot be "
                             f"enumerated ({lattice_forms()} can; bytes have one segmentation, so a byte model's "
                             f"marginal is its canonical likelihood)")
    pieces: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(table):
        if data:
            pieces.setdefault(data, []).append(token_id)
    return pieces


@dataclass
class Lattice:
    """``arrivals[j]``: the (start, id) of every token that ends at byte ``j`` of the text."""

    n_bytes: int
    arrivals: list[list[tuple[int, int]]]

    @classmethod
    def of(cls, text: str, pieces: dict[bytes, list[int]]) -> "Lattice":
        data = text_bytes(text)
        longest = max(map(len, pieces))
        arrivals: list[list[tuple[int, int]]] = [[] for _ in range(len(data) + 1)]
        for start in range(len(data)):
            for end in range(start + 1, min(start + longest, len(data)) + 1):
                for token_id in pieces.get(data[start:end], ()):
                    arrivals[end].append((start, token_id))
        return cls(len(data), arrivals)

    def log_forward(self, log_weight: np.ndarray) -> np.ndarray:
        """``alpha[j]``: log of the summed weights of every path from the start to byte ``j``."""
        alpha = np.full(self.n_bytes + 1, -np.inf)
        alpha[0] = 0.0
        for end in range(1, self.n_bytes + 1):
            if self.arrivals[end]:
                alpha[end] = np.logaddexp.reduce([alpha[s] + log_weight[i] for s, i in self.arrivals[end]])
        return alpha

    def log_total(self, log_weight: np.ndarray) -> float:
        """log of the sum over all segmentations of the product of their tokens' weights."""
        return float(self.log_forward(log_weight)[-1])

    def sample(self, log_weight: np.ndarray, count: int, rng: np.random.Generator
               ) -> list[tuple[tuple[int, ...], float]]:
        """``count`` segmentations drawn with probability proportional to their weight, with the log of that
        probability."""
        alpha = self.log_forward(log_weight)
        if not np.isfinite(alpha[-1]):
            raise TokenizerError("the text has no segmentation into these tokens")
        draws = []
        for _ in range(count):
            end, ids = self.n_bytes, []
            while end:
                options = self.arrivals[end]
                logits = np.array([alpha[s] + log_weight[i] for s, i in options]) - alpha[end]
                start, token_id = options[rng.choice(len(options), p=np.exp(logits - np.logaddexp.reduce(logits)))]
                ids.append(token_id)
                end = start
            ids.reverse()
            draws.append((tuple(ids), float(sum(log_weight[i] for i in ids) - alpha[-1])))
        return draws
