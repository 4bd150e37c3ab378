"""A trained run inside lm-evaluation-harness: the registered model ``bench``.

    python -m bench.engine.lm_eval_model --model bench --model_args run=RUN_FOLDER --tasks TASK ...

(lm-eval's own command line, with this model registered first), or from Python, once this module is imported:
``lm_eval.simple_evaluate(model="bench", model_args="run=RUN_FOLDER", tasks=[...])``. Any family and tokenization
serve ``loglikelihood_rolling`` (a document from ``<bos>``, as ``bench eval --streams 1`` scores a split: one stream
with the state carried through it, the Transformer's window sliding by the run's evaluation chunk) and
``loglikelihood`` (a continuation after its context: the tokens of context + continuation past those of the
context alone, when the first begins with the second, else the two encoded apart); text generation is not served.

lm-eval's ``word_perplexity`` counts ``re.split(r"\\s+", doc)`` pieces, ``bench``'s ``len(doc.split())`` words: one
more per leading or trailing run of whitespace, so the two agree on a document that neither begins nor ends
with whitespace (``tests/test_lm_eval_model.py`` checks them within 1e-6).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from bench.engine.evaluation import Scorer, run_layout
from bench.engine.inference import load_model
from bench.errors import BenchError
from bench.run_files import BEST


@register_model("bench")
class BenchLM(LM):
    def __init__(self, run: str, device: str = "auto", **unused):
        super().__init__()
        path = Path(run)
        path = path / BEST if path.is_dir() else path
        if not path.is_file():
            raise BenchError(f"no trained model at {run}: give run=RUN_FOLDER (with {BEST}) or a checkpoint file")
        self.loaded = loaded = load_model(path, device)
        layout = run_layout(loaded.model, 1, loaded.train.bptt, loaded.train.eval_chunk, loaded.precision)
        self.scorer = Scorer(loaded.model, loaded.tokenizer.bos_id, layout, loaded.device, loaded.precision)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        return [-self.scorer.score(self._encode(request.args[0])).total_nll_nats for request in requests]

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        answers = []
        for request in requests:
            context, continuation = request.args
            ids, first = self._pair(context, continuation)
            scored = self.scorer.score(ids, keep_token_nll=True, keep_greedy=True)
            answers.append((-float(scored.token_nll[first:].astype(np.float64).sum()),
                            bool(scored.token_greedy[first:].all())))
        return answers

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise BenchError("the bench model scores text; it does not generate (use `bench sample`)")

    def _encode(self, text: str) -> np.ndarray:
        return np.asarray(self.loaded.tokenizer.encode(text), dtype=np.int64)

    def _pair(self, context: str, continuation: str) -> tuple[np.ndarray, int]:
        """The tokens of context + continuation and where the continuation's begin."""
        before, whole = self._encode(context), self._encode(context + continuation)
        if len(whole) > len(before) and np.array_equal(whole[:len(before)], before):
            return whole, len(before)
        return np.concatenate([before, self._encode(continuation)]), len(before)


if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
