"""The training engine on a small corpus: results, resume, checkpoints, evaluation, CLI."""

import dataclasses
import json
import math
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from bench.engine import checkpoint
from bench.engine.score.inference import evaluate_checkpoint, load_model, sample
from bench.engine.resolve import ResolvedRun
from bench.engine.result import RunResult
from bench.engine.run import execute, plan_run, train
from bench.engine.spec import RunSpec
from bench.engine.trainer import Trainer, TrainingDiverged, TrainingInterrupted
from bench.errors import BenchError
from bench.models import build_model

# Machinery on a toy corpus: these runs are too short to leave their unigram floor (tests/test_learning.py has runs
# that do), so the not-learning stop is off.
FAST = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 12, "eval_every": 6,
        "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "log_every": 2, "eval_max_tokens": 500,
        "stop_if_not_learning": False}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, model="sha-rnn", tokenizer="byte", without=(), **overrides):
    settings = {k: v for k, v in FAST.items() if k not in without}
    if model == "lstm":
        settings.update(nhid=24)
    if model == "transformer":
        settings = {k: v for k, v in settings.items() if k not in ("emsize", "nhid", "eval_chunk")}
        settings.update(d_model=16, nheads=2)
    settings.update(overrides)
    return RunSpec(model=model, preset="tiny", tokenizer=tokenizer, dataset="toy", seed=3, overrides=settings,
                   data_dir=str(data_dir), out_dir=str(out))


def test_result_has_every_metric_and_provenance(data_dir, tmp_path):
    result = train(spec(data_dir, tmp_path / "run"), show_progress=False)
    assert result.status == "done"
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["status"] == "done" and saved["schema_version"] == 3
    for split in ("valid", "test"):
        m = saved["metrics"][split]
        for key in ("total_nll_nats", "n_tokens", "n_bytes", "n_chars", "n_words", "n_lines", "bits_per_byte",
                    "bits_per_char", "token_perplexity", "word_perplexity", "word_perplexity_eos"):
            assert key in m
        text = (data_dir / "toy" / f"{split}.txt").read_text()
        assert m["n_bytes"] == len(text.encode()) == m["n_tokens"]  # byte scheme: every byte scored
    assert result.model.params_total > result.model.params_non_embedding > 0
    assert result.training.steps == 12 and result.training.chars_per_second > 0
    # startup: planning, the cached data and the model, before the first step; training and evaluation come after
    assert 0 < saved["training"]["startup_seconds"] < result.provenance.wall_seconds - result.training.seconds
    assert result.evaluation.layout == {"streams": 4, "chunk": 32, "window": None, "precision": "float32"}
    assert result.data.splits["test"].sha256 and result.data.verified is False
    assert result.provenance.git["commit"] and result.provenance.device["type"] == "cpu"
    assert result.tokenizer.hash and result.resolved["model"]["emsize"] == 16
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert any("valid_bits_per_char" in r for r in log) and any("train_loss" in r for r in log)
    # one count of training compute: the model's (forward and backward: 3x forward) for the log and the result
    per_token = saved["model"]["train_flops_per_token"]
    assert per_token == 3 * build_model("sha-rnn", ResolvedRun.from_json(json.loads(
        (tmp_path / "run" / "spec.json").read_text())).model).flops_per_token(saved["resolved"]["train"]["bptt"])
    assert saved["training"]["flops"] == saved["training"]["tokens"] * per_token == log[-1]["train_flops"]
    # A finished run is not trained again.
    again = train(spec(data_dir, tmp_path / "run"), show_progress=False)
    assert again.provenance.finished_at == result.provenance.finished_at
    assert RunResult.from_json(saved).to_json() == saved


def _final_weights(out):
    return torch.load(out / "checkpoint.pt", weights_only=True)["model"]


RESUME = {"dropout": 0.1, "dropouth": 0.1, "dropouti": 0.1, "seq_jitter": True}


@pytest.mark.slow
def test_resume_after_a_signal_gives_the_same_run(data_dir, tmp_path, sigterm_after_step):
    reference = train(spec(data_dir, tmp_path / "a", **RESUME), show_progress=False)
    disarm = sigterm_after_step(5)
    with pytest.raises(TrainingInterrupted, match="run the same command again to resume"):
        train(spec(data_dir, tmp_path / "b", **RESUME), show_progress=False)
    interrupted_at = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["progress"]["step"]
    assert 5 <= interrupted_at < 12
    disarm()
    resumed = train(spec(data_dir, tmp_path / "b", **RESUME), show_progress=False)

    a, b = _final_weights(tmp_path / "a"), _final_weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    for split in ("valid", "test"):
        assert resumed.metrics[split].total_nll_nats == reference.metrics[split].total_nll_nats


@pytest.mark.slow
def test_resume_after_a_crash_from_the_last_periodic_checkpoint(data_dir, tmp_path, monkeypatch):
    reference = train(spec(data_dir, tmp_path / "a", **RESUME), show_progress=False)
    original = Trainer.train_step

    def crash_at_step_seven(self):
        if self.progress.step == 7:
            raise RuntimeError("killed")  # no checkpoint is written: the last one is step 4's
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", crash_at_step_seven)
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(data_dir, tmp_path / "c", **RESUME), show_progress=False)
    assert torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=True)["progress"]["step"] == 4
    monkeypatch.setattr(Trainer, "train_step", original)
    resumed = train(spec(data_dir, tmp_path / "c", **RESUME), show_progress=False)
    a, c = _final_weights(tmp_path / "a"), _final_weights(tmp_path / "c")
    assert all(torch.equal(a[k], c[k]) for k in a)
    assert resumed.metrics["test"].total_nll_nats == reference.metrics["test"].total_nll_nats
    steps = [json.loads(line)["step"] for line in (tmp_path / "c" / "log.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)  # the crashed run's extra log lines were dropped on resume


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_baselines_learn(data_dir, tmp_path, model):
    """Trained for a few dozen steps, each baseline beats the uniform model over its vocabulary by a margin that
    an untrained model does not reach."""
    result = train(spec(data_dir, tmp_path / model, model=model, tokenizer="bpe:300", max_steps=40),
                   show_progress=False)
    uniform_bits = math.log2(result.tokenizer.vocab_size)
    assert result.metrics["test"].bits_per_token < 0.75 * uniform_bits
    if model == "transformer":
        assert result.evaluation.layout["window"] == 16 and result.evaluation.layout["chunk"] == 8


def test_final_numbers_can_come_from_one_stream(data_dir, tmp_path):
    many = train(spec(data_dir, tmp_path / "many", dump_token_losses=True), show_progress=False)
    one = train(spec(data_dir, tmp_path / "one", final_eval_streams=1, dump_token_losses=True), show_progress=False)
    assert one.evaluation.layout["streams"] == 1 and many.evaluation.layout["streams"] == 4
    n = one.metrics["test"].n_tokens
    assert n == many.metrics["test"].n_tokens  # every token scored once either way
    # The same weights (the same seed): the first quarter is one stream from <bos> in both layouts, and the
    # one stream goes on where four streams restart from <bos>.
    one_losses, many_losses = (np.load(tmp_path / run / "token_nll.test.npy") for run in ("one", "many"))
    quarter = -(-n // 4)
    assert np.allclose(one_losses[:quarter], many_losses[:quarter], rtol=1e-4, atol=1e-6)
    assert not np.isclose(one_losses[quarter], many_losses[quarter], rtol=1e-3)


def test_checkpoint_round_trip_and_eval_reproduces_the_result(data_dir, tmp_path):
    out = tmp_path / "run"
    result = train(spec(data_dir, out, tokenizer="word-open:100"), show_progress=False)
    loaded = load_model(out / "best.pt")
    assert loaded.tokenizer.spec.name == "word-open:100" and loaded.spec.model == "sha-rnn"
    report = evaluate_checkpoint(out, "test", data_dir)
    assert report.metrics.total_nll_nats == pytest.approx(result.metrics["test"].total_nll_nats, rel=1e-12)
    assert report.metrics.bits_per_char == pytest.approx(result.metrics["test"].bits_per_char, rel=1e-12)
    dump = tmp_path / "nll.npy"
    report = evaluate_checkpoint(out, "test", data_dir, dump=dump)
    token_nll = np.load(dump)
    assert len(token_nll) == report.metrics.n_tokens
    assert token_nll.sum() == pytest.approx(report.metrics.total_nll_nats, rel=1e-5)
    prompt, continuation = sample(out, "the game", max_tokens=5, seed=1)
    assert isinstance(continuation, str) and continuation


def test_eval_carries_the_training_data_status(data_dir, tmp_path):
    """An official test file does not make a model trained on unverified data comparable."""
    out = tmp_path / "run"
    train(spec(data_dir, out, tokenizer="bpe:300"), show_progress=False)
    report = evaluate_checkpoint(out / "best.pt", "test", data_dir)
    assert report.trained_on["status"] == "user" and report.comparable is True
    assert any("user corpus" in note for note in report.comparability_notes)

    payload = checkpoint.load(out / "best.pt")
    payload["data"]["train"].update(status="unverified", verified=False)
    checkpoint.save(tmp_path / "unverified.pt", payload)
    report = evaluate_checkpoint(tmp_path / "unverified.pt", "test", data_dir)
    assert report.verified is False and report.comparable is False
    assert any("trained on a train split" in note for note in report.comparability_notes)


def test_closed_vocabulary_results_are_labelled_not_comparable(data_dir, tmp_path):
    result = train(spec(data_dir, tmp_path / "run", tokenizer="word:20"), show_progress=False)
    assert result.comparable is False
    assert any("lossy tokenization" in note for note in result.comparability_notes)
    assert result.metrics["test"].lossless is False


def test_context_and_budget_in_characters(data_dir, tmp_path):
    result = train(spec(data_dir, tmp_path / "run", tokenizer="bpe:300", without=("bptt",), context_chars=40,
                        max_steps=None, max_train_chars=4000), show_progress=False)
    text = (data_dir / "toy" / "train.txt").read_text()
    from tokenizers_study import load_tokenizer

    tokens = len(load_tokenizer(tmp_path / "run" / "tokenizer.json").encode(text))
    chars_per_token = len(text) / tokens  # measured here, independently of the engine
    assert result.tokenizer.chars_per_token_train == pytest.approx(chars_per_token, rel=1e-12)
    assert result.resolved["train"]["bptt"] == round(40 / chars_per_token)
    step_chars = 4 * result.resolved["train"]["bptt"] * chars_per_token
    assert 4000 <= result.training.chars < 4000 + step_chars + 1


def test_training_characters_are_those_of_the_tokens_consumed(data_dir, tmp_path):
    result = train(spec(data_dir, tmp_path / "run", tokenizer="bpe:300", batch_size=1, max_steps=5),
                   show_progress=False)
    from bench.data.cache import encode_corpus

    encoded = encode_corpus("toy", "bpe:300", data_dir)
    consumed = np.asarray(encoded.ids["train"][:5 * 16])  # one stream: the first 80 tokens
    assert result.training.tokens == 80
    assert result.training.chars == len(encoded.tokenizer.decode(consumed))  # not 80 x characters per token


def test_validation_scores_the_same_characters_under_every_tokenization(data_dir, tmp_path):
    text = (data_dir / "toy" / "valid.txt").read_text()
    prefix = text[:text.index("\n", 999) + 1]  # the first 1,000 characters, to the end of their line
    for scheme in ("byte", "bpe:300", "word-open:100"):
        train(spec(data_dir, tmp_path / scheme, tokenizer=scheme, without=("eval_max_tokens",), eval_max_chars=1000),
              show_progress=False)
        log = [json.loads(line) for line in (tmp_path / scheme / "log.jsonl").read_text().splitlines()]
        assert {r["valid_chars"] for r in log if "valid_chars" in r} == {len(prefix)}


def test_a_finite_but_absurd_loss_is_divergence_not_a_result(data_dir, tmp_path):
    """lr=1e30 keeps the loss finite (about 1e30 nats per token): far beyond the uniform model's log V."""
    with pytest.raises(TrainingDiverged, match=r"beyond 2x the uniform model's"):
        train(spec(data_dir, tmp_path / "run", model="lstm", lr=1e30), show_progress=False)
    assert not (tmp_path / "run" / "result.json").exists()


def test_ctrl_c_during_training_is_one_line_and_resumable(data_dir, tmp_path, repo):
    command = [sys.executable, str(repo / "cli.py"), "train", "--dataset", "toy", "--data-dir", str(data_dir),
               "--out", str(tmp_path / "run"), "--quiet", "--set", "max_steps=100000", "--set", "checkpoint_every=50",
               "--set", "emsize=16", "--set", "nhid=64", "--set", "batch_size=4"]
    # Ctrl-C at its default, as in a terminal: a suite started with a shell's `&` ignores it, and so would the run
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=repo,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while not (tmp_path / "run" / "checkpoint.pt").exists():
        assert process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()  # a run that missed its Ctrl-C would otherwise train on after the suite
    # one line of error, after what preparing the data says when this test is the first to use the toy corpus
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("training ", "encoding "))]
    assert process.returncode == 130 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: SIGINT at step") and "run the same command again to resume" in lines[0]


def test_divergence_is_reported(data_dir, tmp_path):
    with pytest.raises(TrainingDiverged, match="lower lr"):
        train(spec(data_dir, tmp_path / "run", model="lstm", optimizer="adamw", lr=1e38, clip=0.0,
                   max_steps=30), show_progress=False)


@pytest.mark.parametrize("overrides,message", [
    ({"emsiz": 3}, "unknown setting 'emsiz'"),
    ({"max_steps": "lots"}, "bad value 'lots' for max_steps"),
    ({"context_chars": 64}, "both bptt (tokens) and context_chars (characters) are set"),
    ({"batch_size": 100_000}, "too short for batch_size 100000"),
    ({"max_steps": None}, "no training budget"),
])
def test_settings_that_cannot_work_fail_before_any_folder_is_made(data_dir, tmp_path, overrides, message):
    with pytest.raises(BenchError, match=re.escape(message)):
        train(spec(data_dir, tmp_path / "x", **overrides), show_progress=False)
    assert not (tmp_path / "x").exists()


def test_transformer_eval_chunk_beyond_its_window_is_a_resolution_error(data_dir, tmp_path):
    with pytest.raises(BenchError, match=r"eval_chunk \(64\) is longer than the model's window \(16\)"):
        train(spec(data_dir, tmp_path / "x", model="transformer", eval_chunk=64), show_progress=False)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args,fragments", [
    (["--set", "attention=everywhere"], ["allowed: second-last, all, none"]),
    (["--model", "no-such-model"], ["unknown model 'no-such-model'"]),
    (["--preset", "huge"], ["unknown preset 'huge'", "tiny, small, paper"]),
    (["--set", "nhid=100"], ["multiple of emsize"]),
])
def test_bad_train_options_are_one_line_errors(data_dir, cli, one_line_error, args, fragments):
    one_line_error(cli("train", *args, "--data-dir", str(data_dir), "--dataset", "toy"), *fragments)


def test_a_run_refuses_data_other_than_it_was_resolved_with(data_dir, tmp_path):
    config = plan_run(spec(data_dir, tmp_path / "run"))
    other = dataclasses.replace(config.data, split_sha256={**config.data.split_sha256, "test": "0" * 64})
    with pytest.raises(BenchError, match="changed since this run was planned"):
        execute(dataclasses.replace(config, data=other), show_progress=False)
    assert not (tmp_path / "run").exists()


def test_describe_measures_characters_per_token_on_the_corpus(data_dir, cli, one_line_error):
    args = ["models", "describe", "lstm", "--preset", "tiny", "--set", "context_chars=40", "--json"]
    info = json.loads(cli(*args, "--tokenizer", "bpe:300", "--dataset", "toy", "--data-dir", str(data_dir)).stdout)
    from bench.data.facts import load_data_facts

    facts = load_data_facts("toy", "bpe:300", data_dir)
    assert info["vocab_size"] == facts.vocab_size and info["flops_segment_tokens"] == round(40 / facts.chars_per_token)
    one_line_error(cli(*args), "context_chars is in characters")  # no corpus: no characters per token


def test_eval_of_a_missing_checkpoint(cli, one_line_error, tmp_path):
    one_line_error(cli("eval", str(tmp_path / "missing")), "no checkpoint")


@pytest.mark.slow
def test_cli_train_eval_sample(data_dir, tmp_path, cli):
    out = tmp_path / "cli"
    args = ["train", "--model", "lstm", "--preset", "tiny", "--tokenizer", "char", "--dataset", "toy",
            "--data-dir", str(data_dir), "--out", str(out), "--quiet"]
    for key, value in FAST.items():
        args += ["--set", f"{key}={value if key != 'nhid' else 24}"]
    trained = cli(*args)
    assert trained.returncode == 0, trained.stderr
    assert "bits_per_char" in trained.stdout and "result:" in trained.stdout
    evaluated = cli("eval", str(out), "--split", "valid", "--data-dir", str(data_dir), "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["metrics"]["n_tokens"] > 0
    sampled = cli("sample", str(out / "best.pt"), "--prompt", "the ", "--tokens", "20")
    assert sampled.returncode == 0 and sampled.stdout.startswith("the ")
    described = cli("models", "describe", "sha-rnn", "--preset", "paper", "--vocab-size", "256", "--json")
    info = json.loads(described.stdout)
    assert info["params_total"] == 53_825_792 and info["flops_per_token_train"] > 3 * 2 * 50_000_000


def test_evaluation_projects_to_the_vocabulary_in_float32(data_dir, tmp_path, monkeypatch):
    from bench.engine.score.evaluation import Scorer, run_layout
    from bench.engine.hardware.precision import plan_precision
    from bench.models.recurrent import has_rnn
    from bench.models.sharnn import SHARNN

    result = train(spec(data_dir, tmp_path / "run", max_steps=3), show_progress=False)
    model = load_model(tmp_path / "run").model
    seen = []
    original = SHARNN.logits
    monkeypatch.setattr(SHARNN, "logits", lambda self, hidden: seen.append(hidden.dtype) or original(self, hidden))
    ids = np.frombuffer((data_dir / "toy" / "test.txt").read_bytes()[:2000], dtype=np.uint8)
    plan = plan_precision("bfloat16", "auto", torch.device("cpu"), has_rnn(model))  # on any CPU: LSTMs in float32 without bf16
    layout = run_layout(model, 4, 16, 32, plan)
    bf16 = Scorer(model, 256, layout, torch.device("cpu"), plan).score(ids)
    full = Scorer(model, 256, run_layout(model, 4, 16, 32), torch.device("cpu")).score(ids)
    assert layout.precision == plan.name and result.evaluation.layout["precision"] == "float32"
    assert set(seen) == {torch.float32}  # the body ran in bf16, the projection did not
    assert bf16.total_nll_nats == pytest.approx(full.total_nll_nats, rel=2e-2)


def test_init_from_is_the_weights_content_not_the_folder_names(data_dir, tmp_path, one_line_error):
    """Two different base runs in a/base and b/base: a run started from b/base is not the finished run started
    from a/base (their run ids are equal: the id sees the path's last names), nor its resumed checkpoint."""
    import shutil

    for side, seed_lr in (("a", 1e-3), ("b", 5e-3)):
        train(spec(data_dir, tmp_path / side / "base", lr=seed_lr), show_progress=False)
    first = train(spec(data_dir, tmp_path / "tuned", init_from=str(tmp_path / "a" / "base")), show_progress=False)
    assert first.training.started_from["run_id"] == json.loads(
        (tmp_path / "a" / "base" / "result.json").read_text())["run_id"]
    again = train(spec(data_dir, tmp_path / "tuned", init_from=str(tmp_path / "a" / "base")), show_progress=False)
    assert again.training.started_from == first.training.started_from  # the same start: the finished result
    with pytest.raises(BenchError, match="holds a run started from other weights"):
        train(spec(data_dir, tmp_path / "tuned", init_from=str(tmp_path / "b" / "base")), show_progress=False)
    # a checkpoint left by a run from a/base is not resumed by a run from b/base
    shutil.copytree(tmp_path / "tuned", tmp_path / "partial")
    (tmp_path / "partial" / "result.json").unlink()
    with pytest.raises(BenchError, match="holds a run started from other weights"):
        train(spec(data_dir, tmp_path / "partial", init_from=str(tmp_path / "b" / "base")), show_progress=False)
    assert not (tmp_path / "partial" / "result.json").exists()


def test_greedy_sampling_never_picks_bos_even_when_it_is_the_most_likely(data_dir, tmp_path, monkeypatch):
    """top-k keeps the k most likely continuations, <bos> not among them: were <bos> masked after top-k 1 kept it
    alone, nothing would be left to sample."""
    from bench.models.sharnn import SHARNN

    train(spec(data_dir, tmp_path / "run", max_steps=3), show_progress=False)
    bos = load_model(tmp_path / "run").tokenizer.bos_id
    original = SHARNN.logits
    monkeypatch.setattr(SHARNN, "logits", lambda self, hidden: original(self, hidden).index_fill(-1, torch.tensor(
        [bos]), 1e4))  # <bos> far ahead of every other token
    _, continuation = sample(tmp_path / "run", "the ", max_tokens=5, top_k=1)
    assert len(continuation) >= 1
