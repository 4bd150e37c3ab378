"""Validation during training: the same first part of the valid split at every validation (``eval_max_chars`` or
``eval_max_tokens``), scored in every comparable metric (bench.metrics), beside the unigram floor of the same
text, which the not-learning rule compares with (bench.engine.learning)."""

from __future__ import annotations

import math

from bench.engine.corpus import PreparedCorpus
from bench.engine.learning import unigram_log_probs, unigram_nll
from bench.engine.score.evaluation import Scorer
from bench.engine.spec import TrainConfig
from bench.metrics import comparable_metrics, normalize_counts


class Validation:
    def __init__(self, corpus: PreparedCorpus, recipe: TrainConfig):
        self.corpus = corpus
        self.recipe = recipe
        self._text = None  # the text's ids, counts and unigram floor (bits/char): worked out at the first validation

    def _validation_text(self):
        if self._text is None:
            corpus, tokenizer = self.corpus, self.corpus.tokenizer
            ids, counts = corpus.validation_text(self.recipe.eval_max_chars, self.recipe.eval_max_tokens)
            unigram = unigram_log_probs(corpus.encoded.ids["train"], tokenizer.vocab_size, tokenizer.bos_id)
            floor = normalize_counts(unigram_nll(unigram, ids), len(ids), **counts)["bits_per_char"]
            self._text = ids, counts, floor
        return self._text

    def metrics(self, scorer: Scorer) -> dict:
        """``valid_<key>`` of every comparable metric the text's counts give a number for (none per word on a text
        without words: log.jsonl stays strict JSON), the mean loss, the text's tokens and characters, and the floor
        (``valid_floor_bits_per_char``)."""
        ids, counts, floor = self._validation_text()
        result = scorer.score(ids)
        metrics = normalize_counts(result.total_nll_nats, result.n_tokens, **counts)
        comparable = {f"valid_{m.key}": metrics[m.key] for m in comparable_metrics() if math.isfinite(metrics[m.key])}
        return {**comparable, "valid_loss": result.mean_nll,
                "valid_tokens": result.n_tokens, "valid_chars": counts["n_chars"], "valid_floor_bits_per_char": floor}
