"""Every scoring path equals an independent scorer: a plain loop that predicts each token of a split, one at a time,
from exactly the context the evaluation layout promises it.

The layout (bench.engine.score.evaluation): a split of n tokens is cut into `streams` contiguous, nearly equal pieces
(np.array_split's rule), each read from <bos> with a fresh state. A recurrent model carries its state from token to
token within a piece. The Transformer reads the pieces side by side `chunk` tokens at a time (the last chunk ends
with the longest piece, so it may be shorter); the k-th token of a chunk of T tokens sees the `window - T` inputs
before its chunk (fewer at the start of a piece) and the k before it in the chunk.
"""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.engine.score import evaluation
from bench.engine.score.evaluation import EvalLayout, Scorer
from bench.models import build_model
from bench.models.lstm import LSTMConfig
from bench.models.sharnn import SHARNNConfig
from bench.models.transformer import TransformerConfig

V, BOS = 40, 0


class InDouble(torch.nn.Module):
    """A model run in float64 throughout (evaluation projects to the vocabulary in float32 otherwise), so that the
    two computations agree to rounding and a token scored from another context shows."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner.double()
        self.config = inner.config
        self.window_of = inner.window_of  # the family's trait: the window of a windowed model
        self.logits_width = inner.logits_width

    def forward(self, tokens, state=None):
        return self.inner(tokens, state)

    def logits(self, hidden):
        return self.inner.logits(hidden.double())


def model_of(name: str):
    torch.manual_seed(1)
    config = {"sha-rnn": SHARNNConfig(vocab_size=V, emsize=16, nhid=48, nlayers=2, attention="all", max_memory=512),
              "lstm": LSTMConfig(vocab_size=V, emsize=16, nhid=24, nlayers=2),
              "transformer": TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=16)}[name]
    return InDouble(build_model(name, config)).eval()


def plain_nll(model, ids: np.ndarray, streams: int, chunk: int, window: int | None, bos: int = BOS
              ) -> tuple[float, int, list[float]]:
    """Total NLL (nats), the number of tokens scored and each token's NLL in text order, token by token."""
    losses: list[float] = []
    pieces = np.array_split(np.asarray(ids, dtype=np.int64), min(streams, len(ids)))
    longest = max(len(piece) for piece in pieces)  # the pieces are read side by side, chunk by chunk
    with torch.no_grad():
        for piece in pieces:
            inputs = [bos] + piece[:-1].tolist()
            state = None
            for i, target in enumerate(piece.tolist()):
                if window is None:  # recurrent: one token at a time, the state carried
                    hidden, state = model(torch.tensor([[inputs[i]]]), state)
                else:  # a fresh forward over exactly the inputs this token may see
                    start = (i // chunk) * chunk
                    length = min(chunk, longest - start)  # the last chunk ends with the longest piece
                    first = max(0, start - (window - length))
                    hidden, _ = model(torch.tensor([inputs[first:i + 1]]), None)
                log_p = F.log_softmax(model.logits(hidden[0, -1]).double(), dim=-1)  # float32 for a run's model
                losses.append(-float(log_p[target]))
    return math.fsum(losses), len(losses), losses


@pytest.mark.parametrize("name, streams, chunk", [
    ("lstm", 1, 7), ("lstm", 3, 1), ("lstm", 4, 32),
    ("sha-rnn", 1, 5), ("sha-rnn", 3, 16),
    ("transformer", 1, 8), ("transformer", 2, 16), ("transformer", 3, 5), ("transformer", 1, 1),
])
def test_the_scorer_equals_the_plain_loop(name, streams, chunk):
    model = model_of(name)
    ids = np.random.default_rng(7).integers(1, V, size=61)
    window = model.config.context if name == "transformer" else None
    expected, scored, _ = plain_nll(model, ids, streams, chunk, window)
    scorer = Scorer(model, BOS, EvalLayout(streams=streams, chunk=chunk, window=window), torch.device("cpu"))
    result = scorer.score(ids, keep_token_nll=True)
    assert result.n_tokens == scored == len(ids)
    assert math.isclose(result.total_nll_nats, expected, rel_tol=1e-9)
    assert math.isclose(float(result.token_nll.astype(np.float64).sum()), expected, rel_tol=1e-5)


@pytest.mark.parametrize("name", ["lstm", "sha-rnn", "transformer"])
def test_projecting_a_few_streams_at_a_time_gives_every_token_the_same_loss(name, monkeypatch):
    """On a CPU the scorer projects a chunk to the vocabulary a cache-sized block of streams at a time: each token's
    loss and greedy flag are those of all the streams at once, bit for bit, and the plain loop's."""
    model = model_of(name)
    ids = np.random.default_rng(3).integers(1, V, size=97)
    window = model.config.context if name == "transformer" else None
    layout, cpu = EvalLayout(streams=5, chunk=8, window=window), torch.device("cpu")
    monkeypatch.setattr(evaluation, "CPU_LOGITS_PER_BLOCK", 1 << 30)
    whole = Scorer(model, BOS, layout, cpu).score(ids, keep_token_nll=True, keep_greedy=True)
    monkeypatch.setattr(evaluation, "CPU_LOGITS_PER_BLOCK", 2 * 8 * V)  # two streams a block: 2 + 2 + 1
    blocked = Scorer(model, BOS, layout, cpu).score(ids, keep_token_nll=True, keep_greedy=True)
    assert blocked.total_nll_nats == whole.total_nll_nats
    assert np.array_equal(blocked.token_nll, whole.token_nll)
    assert np.array_equal(blocked.token_greedy, whole.token_greedy)
    assert math.isclose(blocked.total_nll_nats, plain_nll(model, ids, 5, 8, window)[0], rel_tol=1e-9)


def test_a_large_vocabulary_is_projected_in_cache_sized_blocks_on_a_cpu_and_at_once_on_a_gpu():
    """32 streams of 128 tokens and 2,339 logits each: 38 MB at once, which a CPU projects at half speed."""
    per_stream = 128 * 2339
    on_cpu = evaluation._row_blocks(32, per_stream, torch.device("cpu"))
    assert len(on_cpu) > 1 and max(s.stop - s.start for s in on_cpu) * per_stream <= evaluation.CPU_LOGITS_PER_BLOCK
    assert [i for s in on_cpu for i in range(32)[s]] == list(range(32))
    assert evaluation._row_blocks(32, per_stream, torch.device("cuda")) == [slice(0, 32)]
    assert evaluation._row_blocks(16, 64 * 257, torch.device("cpu")) == [slice(0, 16)]  # a byte model's 1 MB


@pytest.mark.parametrize("streams, chunk", [(1, 8), (3, 5), (2, 16)])
def test_a_pretrained_model_is_scored_like_the_plain_loop(streams, chunk):
    """bench eval-hf's model behind the study's interface: the same layout, the same numbers."""
    transformers = pytest.importorskip("transformers")
    from bench.models.pretrained import PretrainedLM

    torch.manual_seed(2)
    config = transformers.GPT2Config(vocab_size=V, n_positions=64, n_embd=16, n_layer=2, n_head=2)
    model = PretrainedLM(transformers.GPT2LMHeadModel(config).double().eval(), window=16)
    ids = np.random.default_rng(5).integers(1, V, size=53)
    expected, scored, _ = plain_nll(model, ids, streams, chunk, 16)
    result = Scorer(model, BOS, EvalLayout(streams=streams, chunk=chunk, window=16), torch.device("cpu")).score(ids)
    assert result.n_tokens == scored == len(ids)
    # The scorer takes the logits in float32 (they are the model's output here, not hidden vectors to project):
    # a token scored from another context would be off by far more.
    assert math.isclose(result.total_nll_nats, expected, rel_tol=1e-7)


@pytest.mark.parametrize("model_name", ["lstm", "transformer"])
def test_a_trained_runs_result_and_bench_eval_equal_the_plain_loop(tmp_path, make_toy_corpus, model_name):
    from bench.engine import checkpoint
    from bench.engine.score.inference import evaluate_checkpoint, load_model
    from bench.engine.run import train
    from bench.engine.spec import RunSpec
    from bench.data.cache import encoded_split
    from bench.data.store import open_split

    data_dir = make_toy_corpus(tmp_path)
    small = {"lstm": dict(emsize=16, nhid=24), "transformer": dict(d_model=16, nheads=2, context=32)}[model_name]
    run = tmp_path / "run"
    train(RunSpec(model=model_name, preset="tiny", tokenizer="bpe:300", dataset="toy", seed=0,
                  overrides=dict(small, batch_size=4, bptt=16, max_steps=3, eval_every=0, eval_streams=3,
                                 final_eval_splits="test", dump_token_losses=True), data_dir=str(data_dir),
                  out_dir=str(run)),
          show_progress=False)
    recorded = json.loads((run / "result.json").read_text())["metrics"]["test"]
    loaded = load_model(run / "checkpoint.pt", "cpu")
    model = loaded.model.eval()
    ids = np.asarray(encoded_split(loaded.tokenizer, open_split("toy", "test", data_dir)))
    layout = recorded_layout = json.loads((run / "result.json").read_text())["evaluation"]["layout"]
    expected, scored, losses = plain_nll(model, ids, layout["streams"], layout["chunk"], layout["window"],
                                         loaded.tokenizer.bos_id)
    assert recorded["n_tokens"] == scored
    dumped = np.load(run / "token_nll.test.npy")  # each token's loss, in text order
    assert dumped.shape == (scored,) and np.allclose(dumped, losses, rtol=1e-4, atol=1e-5)
    assert math.isclose(recorded["total_nll_nats"], expected, rel_tol=1e-5)  # the run scored in float32
    again = evaluate_checkpoint(run, "test", data_dir)
    assert again.metrics.total_nll_nats == recorded["total_nll_nats"] and again.layout == recorded_layout
    assert checkpoint.load(run / "checkpoint.pt")  # the weights scored are the run's own


def test_a_runs_layout_slides_half_a_window_unless_told_and_never_more_than_the_window():
    from bench.engine.score.evaluation import run_layout
    from bench.engine.hardware.precision import Precision
    from bench.errors import BenchError

    transformer, lstm = model_of("transformer"), model_of("lstm")  # a window of 16; none
    assert run_layout(transformer, 3, 5) == EvalLayout(streams=3, chunk=8, window=16, precision="float32")
    bf16 = Precision(torch.bfloat16, rnn_float32=False, loss_scaling=False)
    assert run_layout(transformer, 3, 5, chunk=16, precision=bf16) == EvalLayout(3, 16, 16, "bfloat16 autocast")
    assert run_layout(lstm, 2, 5) == EvalLayout(streams=2, chunk=5, window=None, precision="float32")
    transformer.config = TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=2)
    assert run_layout(transformer, 1, 5).chunk == 1
    transformer.config = TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=16)
    with pytest.raises(BenchError, match=r"^the evaluation chunk \(17\) is longer than the model's window \(16\): "
                                         r"it is the stride of the evaluation window; use at most 16$"):
        run_layout(transformer, 1, 5, chunk=17)


class _Log(io.StringIO):
    """A log file (or a terminal) that records what of it was flushed: a log is read while the run goes on."""

    def __init__(self, terminal: bool):
        super().__init__()
        self.terminal = terminal
        self.flushes: list[str] = []  # what the file held at each flush

    def isatty(self) -> bool:
        return self.terminal

    def flush(self) -> None:
        self.flushes.append(self.getvalue())


COUNTS = {"n_bytes": 61, "n_chars": 61, "n_words": 10, "n_lines": 1}


def test_an_evaluation_says_what_it_scores_in_a_log_and_shows_a_bar_on_a_terminal():
    from types import SimpleNamespace

    from bench.engine.score.evaluation import evaluate_splits

    ids = np.random.default_rng(7).integers(1, V, size=61)
    log = _Log(terminal=False)
    scorer = Scorer(model_of("lstm"), BOS, EvalLayout(streams=3, chunk=7), torch.device("cpu"), progress=log)
    metrics, result = scorer.split_metrics(ids, COUNTS, True, "test")
    assert result.token_nll is None  # kept only when asked for
    lines = log.getvalue().splitlines()
    assert lines[0] == "evaluating test: 61 tokens in 3 streams, 3 chunks"  # 21 tokens per stream, 7 at a time
    assert log.flushes == [lines[0] + "\n", log.getvalue()]  # each line in the file as soon as it is printed
    assert re.fullmatch(r"evaluated test: 61 tokens in \d+\.\d s", lines[1]) and len(lines) == 2
    corpus = SimpleNamespace(encoded=SimpleNamespace(ids={"valid": ids}), counts={"valid": COUNTS},
                             lossless={"valid": True})
    evaluate_splits(scorer, corpus, ("valid",))
    assert log.getvalue().splitlines()[2].startswith("evaluating valid: ")  # each split by its name
    terminal = _Log(terminal=True)
    Scorer(scorer.model, BOS, scorer.layout, scorer.device, progress=terminal).score(ids, label="test")
    assert "evaluating test" in terminal.getvalue() and re.search(r"[?\d]chunk/s\]", terminal.getvalue())  # a bar
    assert terminal.getvalue().endswith(" \r")  # cleared when done: the split's result line follows on its own
