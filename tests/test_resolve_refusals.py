"""What resolution refuses, in process: budgets outside one step to ten million steps, a model too large for the
machine's memory, settings that cannot act as written, a layout the train split or the model's window cannot hold;
each at its boundary (the last setting accepted, the first refused) and with the words of its one-line error."""

import os
import re

import pytest

from bench.data.facts import DataFacts
from bench.engine.resolve import MOST_STEPS, ResolvedRun, resolve
from bench.engine.spec import RunSpec, validate_spec
from bench.errors import BenchError

FACTS = DataFacts(vocab_size=4097, corpus="wikitext-2", scheme="bpe:4096", tokenizer_hash="ab" * 32,
                  train_chars=4_123_456_789, train_tokens=1_000_000_000,
                  split_sha256={"train": "11" * 32, "valid": "22" * 32, "test": "33" * 32})
LSTM_TINY_PARAMS = 415_297  # the lstm tiny preset with FACTS' vocabulary
LSTM_TINY_FLOPS = 2_457_984  # its training FLOPs per token at bptt 64
STEP = 16 * 64  # tokens of one step of the tiny presets: batch_size x bptt


def resolved(model="lstm", facts=FACTS, **overrides) -> ResolvedRun:
    spec = RunSpec(model=model, preset="tiny", tokenizer="bpe:4096", dataset="wikitext-2", seed=3,
                   overrides=overrides)
    return resolve(validate_spec(spec), facts)


def refusal(model="lstm", facts=FACTS, **overrides) -> str:
    with pytest.raises(BenchError) as error:
        resolved(model, facts, **overrides)
    return str(error.value)


# ---- the budget: at least one step, at most MOST_STEPS ------------------------------------------------------------

def test_a_budget_of_less_than_one_step_is_refused():
    assert resolved(max_steps=None, max_tokens=STEP).budget.limits == {"tokens": STEP}  # one step: enough
    assert refusal(max_steps=None, max_tokens=STEP - 1) == (
        "the training budget allows 1,023 tokens, less than one step (1,024 tokens: batch_size x bptt); raise it")


def test_a_budget_beyond_ten_million_steps_is_a_typo():
    assert resolved(max_steps=MOST_STEPS).train.max_steps == 10_000_000
    message = refusal(max_steps=MOST_STEPS + 1)
    assert message.startswith("the training budget plans 1e+07 steps, beyond 10,000,000 (the paper's SHA-RNN")
    assert message.endswith("; lower it")


def test_a_flops_budget_is_counted_with_the_models_flops_per_token():
    # exactly one step's FLOPs is enough, a little less is not: the model's FLOPs per token were counted
    resolved(max_steps=None, max_train_flops=float(LSTM_TINY_FLOPS * STEP))
    assert refusal(max_steps=None, max_train_flops=float(LSTM_TINY_FLOPS * (STEP - 1))).startswith(
        "the training budget allows 1,023 tokens, less than one step")
    assert "allows 4.068e-07 tokens" in refusal(max_steps=None, max_train_flops=1.0)


def test_an_epoch_budget_is_counted_in_the_tokens_of_the_equal_streams():
    facts = DataFacts(300, corpus="toy", scheme="char", train_chars=40_000, train_tokens=10_247)  # 16 x 640 + 7
    resolved(facts=facts, max_steps=None, max_epochs=0.1)  # 10% of 10,240 tokens: one step
    assert refusal(facts=facts, max_steps=None, max_epochs=0.09).startswith(
        "the training budget allows 921.6 tokens, less than one step")  # 9% of 10,240, not of 10,247
    assert refusal(max_steps=None, max_epochs=1e-9).startswith("the training budget allows 1 tokens")


def test_a_character_budget_is_counted_in_the_datas_characters_per_token():
    facts = DataFacts(300, corpus="toy", scheme="char", train_chars=40_000, train_tokens=10_000)  # 4 per token
    resolved(facts=facts, max_steps=None, max_train_chars=4 * STEP)
    assert refusal(facts=facts, max_steps=None, max_train_chars=4 * STEP - 4).startswith(
        "the training budget allows 1,023 tokens")


def test_a_time_budget_alone_plans_no_tokens_and_passes():
    assert resolved(max_steps=None, max_minutes=0.01).budget.limits == {"minutes": 0.01}


# ---- memory: the weights and logits must fit in this machine's memory -----------------------------------------------------

def _memory_of(monkeypatch, page_size: int, pages: int) -> None:
    def sysconf(name):
        values = {"SC_PAGE_SIZE": page_size, "SC_PHYS_PAGES": pages}
        if name not in values:
            raise ValueError("unrecognized configuration name")
        return values[name]

    monkeypatch.setattr(os, "sysconf", sysconf)


# float32 weights, gradients and two moments, and logits (with log-softmax and gradient) over a step's tokens; in
# evaluation the weights, and logits with log-softmax over the tiny preset's 32 streams x 256 tokens
TINY_TRAINING = 16 * LSTM_TINY_PARAMS + 12 * 4097 * STEP
TINY_EVALUATION = 4 * LSTM_TINY_PARAMS + 8 * 4097 * 32 * 256


def test_a_run_whose_weights_and_logits_exceed_the_memory_is_refused_before_it_is_built(monkeypatch):
    _memory_of(monkeypatch, 4, TINY_EVALUATION // 4)  # exactly what evaluation needs: it fits
    resolved()
    _memory_of(monkeypatch, 4, TINY_EVALUATION // 4 - 1)
    assert refusal() == ("evaluation needs at least 257.6 MiB (logits over 4,097 ids for 8,192 tokens at once: 256.1 "
                         "MiB), more than this machine's 257.6 MiB; lower eval_streams or eval_chunk, or the vocabulary")
    small_evaluation = {"eval_streams": 1, "eval_chunk": 64}
    _memory_of(monkeypatch, 4, TINY_TRAINING // 4)
    resolved(**small_evaluation)
    _memory_of(monkeypatch, 4, TINY_TRAINING // 4 - 1)
    assert refusal(**small_evaluation) == (
        "training needs at least 54.3 MiB (415,297 parameters with their gradients and optimizer state: 6.3 MiB; "
        "logits over 4,097 ids for a step of 1,024 tokens: 48.0 MiB), more than this machine's 54.3 MiB; lower "
        "batch_size or bptt, the model's sizes or the vocabulary")


def test_a_million_ids_are_refused_for_their_logits_before_anything_is_built(monkeypatch):
    """The hostile re-test's case: a tokenizer of 1,000,000 ids grew a tiny model's run to 23 GB (killed)."""
    _memory_of(monkeypatch, 4096, 4 * 2 ** 18)  # 4 GiB
    facts = DataFacts(vocab_size=1_000_000, corpus="toy", scheme="hf", train_chars=10 ** 9, train_tokens=10 ** 8)
    assert refusal(facts=facts, emsize=16, nhid=16).startswith("evaluation needs at least 61.1 GiB (logits over "
                                                               "1,000,000 ids for 8,192 tokens")
    assert refusal(facts=facts, emsize=16, nhid=16, eval_streams=1, eval_chunk=64).startswith(
        "training needs at least 11.7 GiB (17,004,352 parameters with their gradients and optimizer state: 259.5 MiB; "
        "logits over 1,000,000 ids for a step of 1,024 tokens: 11.4 GiB)")


def test_a_model_too_large_for_this_machine_is_refused():
    assert re.fullmatch(r"training needs at least 59,612\.4 GiB \(4,000,520,283,201 parameters .*\), more than "
                        r"this (machine|container)'s [\d,.]+ GiB; lower batch_size or bptt, the model's sizes or the "
                        r"vocabulary", refusal(nhid=1_000_000))


@pytest.mark.parametrize("error", [ValueError, OSError, AttributeError])
def test_without_a_memory_size_nothing_is_compared(monkeypatch, error):
    def sysconf(name):
        raise error(name)

    monkeypatch.setattr(os, "sysconf", sysconf)
    assert resolved(nhid=1_000_000).model.nhid == 1_000_000


# ---- settings that cannot act as written ---------------------------------------------------------------------------

def test_more_threads_than_the_machine_takes_are_refused():
    assert refusal(threads=10 ** 6).startswith("threads 1,000,000 is more than")
    assert resolved(threads=1).train.threads == 1


def test_a_floor_for_a_decay_that_never_happens_is_refused():
    assert refusal(min_lr_ratio=0.1) == (
        "min_lr_ratio (0.1) is where a linear or cosine decay ends, but schedule is constant; set schedule=linear "
        "or cosine, or leave min_lr_ratio out")
    assert resolved(min_lr_ratio=0.1, schedule="linear").train.min_lr_ratio == 0.1
    assert resolved(min_lr_ratio=0.0).train.schedule == "constant"


# ---- CUDA graphs: fixed shapes, no loss scaler, one process, a CUDA device -------------------------------------------

@pytest.fixture()
def on_cuda(monkeypatch):
    """Resolution as on a machine with a GPU: the device cuda_graphs' check finds is CUDA."""
    import torch

    import bench.engine.hardware.cuda_graphs

    monkeypatch.setattr(bench.engine.hardware.cuda_graphs, "device_here", lambda name: torch.device("cuda"))


def test_cuda_graphs_are_refused_where_they_cannot_run_in_one_line():
    assert refusal(device="cpu", cuda_graphs=True) == (
        "cuda_graphs needs a CUDA device; this run's device is cpu (set cuda_graphs=false)")
    assert refusal(device="cpu", cuda_graphs=True, seq_jitter=True) == (
        "cuda_graphs replays steps of one shape, but seq_jitter draws a new segment length each step; set "
        "seq_jitter=false (or cuda_graphs=false)")
    assert refusal(cuda_graphs=True, precision="float16") == (
        "cuda_graphs with float16's loss scaler is not yet proven on a GPU (tests/test_cuda.py); set "
        "precision=bfloat16 or float32 (or cuda_graphs=false)")
    assert resolved(device="cpu", cuda_graphs=False, seq_jitter=True).train.cuda_graphs is False


def test_cuda_graphs_are_refused_for_several_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert refusal(device="cpu", cuda_graphs=True) == (
        "cuda_graphs does not capture a run on several processes (DistributedDataParallel); set cuda_graphs=false")


def test_on_cuda_cuda_graphs_take_float32_or_bfloat16_and_are_not_in_the_run_id(on_cuda):
    assert refusal("lstm", cuda_graphs=True) == (  # precision auto: float16 with a scaler for a model with LSTMs
        "cuda_graphs with float16's loss scaler is not yet proven on a GPU (tests/test_cuda.py) (precision auto is "
        "float16 on CUDA for a model with LSTMs); set precision=bfloat16 or float32 (or cuda_graphs=false)")
    for model, precision in (("lstm", "bfloat16"), ("sha-rnn", "float32"), ("transformer", "auto")):
        graphed = resolved(model, cuda_graphs=True, precision=precision)
        assert graphed.train.cuda_graphs and graphed.run_id() == resolved(model, precision=precision).run_id()


# ---- the layout: the model's window, the train split's streams ------------------------------------------------------

def test_a_transformers_window_holds_its_segment_and_its_evaluation_stride():
    config = resolved("transformer", bptt=64, eval_chunk=64)  # both as long as the window: accepted
    assert (config.model.context, config.train.bptt, config.train.eval_chunk) == (64, 64, 64)
    assert refusal("transformer", bptt=65, context=64) == (
        "bptt (65) is longer than the model's window (64); set bptt to at most 64 or a longer context")
    assert refusal("transformer", eval_chunk=65) == (
        "eval_chunk (65) is longer than the model's window (64): it is the stride of the evaluation window; use at "
        "most 64")


def test_the_train_split_must_fill_two_tokens_per_stream():
    enough = DataFacts(300, corpus="toy", scheme="char", train_chars=128, train_tokens=32)
    assert resolved(facts=enough, batch_size=16, bptt=1).train.bptt == 1  # 2 tokens per stream, one step of 1
    short = DataFacts(300, corpus="toy", scheme="char", train_chars=124, train_tokens=31)
    assert refusal(facts=short, batch_size=16, bptt=1) == (
        "train split (31 tokens) is too short for batch_size 16; lower batch_size")


def test_a_segment_must_fit_in_each_training_stream():
    # 16 streams of 65 tokens take segments of 64 (a segment's targets are the next tokens)
    resolved(facts=DataFacts(300, corpus="toy", scheme="char", train_chars=4_160, train_tokens=1_040))
    message = refusal(facts=DataFacts(300, corpus="toy", scheme="char", train_chars=4_156, train_tokens=1_039))
    assert message == ("bptt 64 is longer than each of the 16 training streams (64 tokens of toy train under char); "
                       "lower bptt to at most 63 (or batch_size)")


def test_without_a_corpus_the_split_is_not_checked():
    config = resolved(facts=DataFacts.vocabulary_only(256), bptt=1000)
    assert config.train.bptt == 1000 and config.model.vocab_size == 256


# ---- the training settings ------------------------------------------------------------------------------------------

def test_a_context_in_tokens_and_in_characters_and_no_budget_are_refused():
    assert refusal(bptt=32, context_chars=128) == (
        "both bptt (tokens) and context_chars (characters) are set; set only one of them")
    assert refusal(max_steps=None) == ("no training budget: set one of max_steps, max_epochs, max_train_chars, "
                                       "max_tokens, max_minutes (e.g. --set max_steps=1000)")


def test_either_span_of_validation_set_replaces_the_other_of_the_preset():
    from bench.engine.resolve import _train_config

    # no preset sets eval_max_tokens: the rule is checked on presets that set each
    train = _train_config({"eval_max_tokens": 500, "max_steps": 10}, {"eval_max_chars": 5000}, FACTS)
    assert (train.eval_max_chars, train.eval_max_tokens) == (5000, None)
    train = _train_config({"eval_max_chars": 60_000, "max_steps": 10}, {"eval_max_tokens": 500}, FACTS)
    assert (train.eval_max_chars, train.eval_max_tokens) == (None, 500)
