"""What ``bench speed`` and a result say about speed: the variant measured, MFU where no peak is known, and the
time torch.compile spent compiling, apart from the steady state."""

import json

import pytest
import torch

from bench.data.facts import DataFacts
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.engine.hardware.speed import measure_speed
from tests.test_bad_inputs import call
from tests.test_train import spec

SMALL = ["--set", "emsize=16", "--set", "nhid=32", "--set", "bptt=8", "--set", "batch_size=2", "--set", "threads=1"]


def test_bench_speed_shows_the_variant_it_measured_and_that_a_cpu_has_no_known_peak():
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--set", "lamb_impl=foreach",
                           "--set", "precision=bfloat16", "--json"])
    assert code == 0, err
    row = json.loads(out)
    assert (row["optimizer"], row["lamb_impl"], row["cuda_graphs"], row["compile"]) == ("lamb foreach", "foreach",
                                                                                        False, False)
    assert row["precision"].startswith("bfloat16 autocast") and row["mfu"] is None
    assert row["compile_seconds"] == {"train": 0, "eval": 0, "timed": 0}
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--set", "precision=float16"])
    assert code == 0, err
    assert out.startswith("sha-rnn/tiny: ") and ", loss scaling, lamb loop, on cpu" in out.splitlines()[0]
    assert "MFU: no peak known for this cpu (--peak-tflops)" in out


@pytest.fixture()
def eager_compiler(monkeypatch):
    """torch.compile with its eager backend: dynamo traces and times its compilations as with inductor, in
    seconds instead of a minute on a CPU."""
    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module: compile_module(module, backend="eager"))
    torch._dynamo.reset()  # earlier compilations of the same code in this process would count against its limit


def test_compiling_is_reported_apart_from_the_steady_state(eager_compiler, make_toy_corpus, tmp_path):
    settings = {"emsize": 16, "nhid": 32, "bptt": 8, "batch_size": 2, "max_memory": 16, "threads": 1}
    row = measure_speed(RunSpec(overrides={**settings, "compile": True}), DataFacts.vocabulary_only(256), steps=2)
    compiled = row["compile_seconds"]
    assert 0 < compiled["train"] < row["warmup_seconds"]["train"] and compiled["eval"] > 0
    assert compiled["timed"] == 0  # compiled once, in the warm-up: the timed steps replay what was compiled
    data = make_toy_corpus(tmp_path)
    result = train(spec(data, tmp_path / "compiled", compile=True, max_memory=32), show_progress=False)
    assert 0 < result.training.compile_seconds < result.training.seconds
    assert train(spec(data, tmp_path / "eager"), show_progress=False).training.compile_seconds is None
