"""The numbers behind the report from each run's artefacts: unigram floors, how a word's loss is spread over its
pieces, and the share of loss on ``<unk>``. A run is read through its finished-run record
(bench.study.matrix.finished_run, handed in: this layer imports nothing of the matrix); the statistics over seeds
and documents are in :mod:`bench.study.stats.uncertainty`."""

from __future__ import annotations

import functools
import math

import numpy as np

from bench.engine.learning import unigram_log_probs, unigram_nll
from bench.metrics import normalize_counts
from tokenizers_study.text import char_byte_offsets, text_bytes, text_counts
from tokenizers_study.words import whitespace_characters


def unigram_floor(run) -> dict:
    """A unigram model of the run's tokenization fitted on train (add-one smoothing), scored on test.

    Every trained model should clearly beat it; it is the cost of the tokens' frequencies alone.
    """
    tokenizer, test_ids = run.tokenizer, run.ids("test")
    total = unigram_nll(unigram_log_probs(run.ids("train"), tokenizer.vocab_size, tokenizer.bos_id), test_ids)
    test_text = run.split_data("test").read_text()
    return normalize_counts(total, len(test_ids), **text_counts(test_text))


def token_analyses(done, runs: dict) -> tuple[dict, dict, dict]:
    """From the runs' artefacts: unigram floors per (dataset, tokenizer), how word loss spreads over pieces
    per text and matching rule and (model, tokenizer), and the share of loss on <unk> per run folder."""
    done = done[[not runs[run_dir].on_other_data for run_dir in done["run_dir"]]]
    floors = {}
    for (dataset, tokenizer), group in done.groupby(["dataset", "tokenizer"]):
        floors[(dataset, tokenizer)] = unigram_floor(runs[group["run_dir"].iloc[0]])
    profiles, unk = {}, {}  # (dataset, match) -> {(model, tokenizer): profile}; run folder -> <unk> share
    for (model, tokenizer, dataset, match), group in done.groupby(["model", "tokenizer", "dataset", "match"]):
        profiled = False
        for run_dir in group.sort_values("seed")["run_dir"]:
            run, nll = runs[run_dir], runs[run_dir].token_nll("test")
            if nll is None or (profiled and run.tokenizer.unk_id is None):
                continue
            ids = run.ids("test")
            if len(ids) != len(nll):
                continue
            if not profiled:  # the first seed's
                profiles.setdefault((dataset, match), {})[(model, tokenizer)] = piece_profile(
                    run.tokenizer, ids, nll)
                profiled = True
            share = unk_share(run.tokenizer, ids, nll)
            if share is not None:
                unk[run_dir] = share
    return floors, profiles, unk


# --------------------------------------------------------------------------------------- words and pieces


def word_of_tokens(tokenizer, ids: np.ndarray) -> np.ndarray:
    """For each token, the index of the whitespace-separated word it belongs to (-1: only whitespace).

    A token belongs to the word that contains its first non-whitespace byte, so a
    BPE piece " the" belongs to "the" and a word-level token to its word. A token that
    spans no byte of the text (a nibble's low half, which completes the byte before it;
    ``<bos>`` aside) is a piece of the word of the token before it: never dropped.
    """
    decoded = tokenizer.decode(ids)
    data = np.frombuffer(text_bytes(decoded), dtype=np.uint8)
    lengths = tokenizer.byte_lengths(ids).astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    word_start, word_end = word_byte_spans(decoded)
    # First non-whitespace byte at or after each byte (len(data) past the last): a token's, if inside it
    solid = np.where(data <= 0x20, len(data), np.arange(len(data)))
    next_solid = np.append(np.minimum.accumulate(solid[::-1])[::-1], len(data))
    anchors = next_solid[np.minimum(starts, len(data))]
    anchors = np.where((lengths > 0) & (anchors < starts + lengths), anchors, -1)
    word = np.searchsorted(word_start, anchors, side="right") - 1
    valid = (anchors >= 0) & (word >= 0)
    valid[valid] &= anchors[valid] < word_end[word[valid]]
    word = np.where(valid, word, -1)
    spanless = (lengths == 0) & (np.asarray(ids) != tokenizer.bos_id)
    before = np.maximum.accumulate(np.where(spanless, -1, np.arange(len(word))))  # the last token with bytes
    return np.where(spanless & (before >= 0), word[np.maximum(before, 0)], word)


def word_byte_spans(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Where each whitespace-separated word of ``text`` begins and ends, in bytes: the words of ``str.split``,
    which the metrics count."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    space = np.isin(points, _whitespace())
    edges = np.diff(np.concatenate([[True], space, [True]]).astype(np.int8))  # -1: a word begins, +1: it ends
    offsets = char_byte_offsets(text)
    return offsets[np.flatnonzero(edges == -1)], offsets[np.flatnonzero(edges == 1)]


@functools.cache
def _whitespace() -> np.ndarray:
    return np.array([ord(c) for c in whitespace_characters()], dtype=np.uint32)


def piece_profile(tokenizer, ids: np.ndarray, token_nll: np.ndarray, max_pieces: int = 6,
                  max_position: int = 10) -> dict:
    """How each word's NLL is spread over its pieces.

    Returns, by number of pieces k (1..max_pieces, the last bucket is "k or more"):
    the number of words, their mean NLL in bits, and the mean share of that NLL on
    the first piece; and by position j within the word (1..max_position), the mean
    NLL in bits of the j-th piece (for byte and character models, loss by position
    within the word).
    """
    word = word_of_tokens(tokenizer, ids)
    keep = word >= 0
    w, nll = word[keep], token_nll[keep] / math.log(2)
    if len(w) == 0:
        return {"pieces": [], "positions": []}
    total = np.bincount(w, weights=nll)
    pieces = np.bincount(w)
    present = pieces > 0
    first_index = np.full(len(pieces), -1, dtype=np.int64)
    uniq, idx = np.unique(w, return_index=True)
    first_index[uniq] = idx
    first = np.zeros(len(pieces))
    first[uniq] = nll[idx]
    bucket = np.minimum(pieces, max_pieces)
    by_pieces = []
    for k in range(1, max_pieces + 1):
        mask = present & (bucket == k) & (total > 0)
        if not mask.any():
            continue
        by_pieces.append({"pieces": k, "or_more": k == max_pieces, "words": int(mask.sum()),
                          "mean_word_bits": float(total[mask].mean()),
                          "first_piece_share": float((first[mask] / total[mask]).mean())})
    position = np.arange(len(w)) - first_index[w]
    by_position = []
    for j in range(min(max_position, int(position.max()) + 1)):
        mask = position == j
        by_position.append({"position": j + 1, "pieces": int(mask.sum()), "mean_bits": float(nll[mask].mean())})
    return {"pieces": by_pieces, "positions": by_position,
            "mean_pieces_per_word": float(pieces[present].mean()),
            "first_piece_share_all": float((first[present & (total > 0)] / total[present & (total > 0)]).mean())}


def teacher_forcing_sentence(profiles: dict[tuple[str, str], dict[tuple[str, str], dict]]) -> str:
    """What the piece profiles show, in numbers (the figure's caption states no finding the data do not)."""
    shares, later = [], []
    for group in profiles.values():
        for profile in group.values():
            multi = [p for p in profile["pieces"] if p["pieces"] >= 2]
            if words := sum(p["words"] for p in multi):
                shares.append(sum(p["first_piece_share"] * p["words"] for p in multi) / words)
            rest = [p for p in profile["positions"] if p["position"] >= 2]
            if count := sum(p["pieces"] for p in rest):
                later.append(sum(p["mean_bits"] * p["pieces"] for p in rest) / count)
    if not shares or not later:
        return ""
    return (f"In these runs the first piece of a word of two or more pieces carries {100 * min(shares):.0f}-"
            f"{100 * max(shares):.0f}% of the word's loss on average, and a later piece costs {min(later):.2f}-"
            f"{max(later):.2f} bits on average.")


def unk_share(tokenizer, ids: np.ndarray, token_nll: np.ndarray) -> dict | None:
    """Share of the total NLL (and of the tokens) that falls on ``<unk>`` targets; None without <unk>."""
    if tokenizer.unk_id is None:
        return None
    is_unk = ids == tokenizer.unk_id
    total = float(token_nll.sum())
    return {"unk_token_share": float(is_unk.mean()) if len(ids) else math.nan,
            "unk_nll_share": float(token_nll[is_unk].sum() / total) if total > 0 else math.nan,
            "unk_mean_bits": float(token_nll[is_unk].mean() / math.log(2)) if is_unk.any() else math.nan}
