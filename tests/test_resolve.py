"""A run is resolved once: the frozen run configuration, its run id, and every setting that could only fail later."""

import json
import re

import pytest

from bench.data.facts import DataFacts
from bench.engine.budget import Budget, Usage
from bench.engine.resolve import ResolvedRun, resolve
from bench.engine.spec import RunSpec, TrainConfig, validate_spec
from bench.errors import BenchError

FACTS = DataFacts(vocab_size=4097, corpus="wikitext-2", scheme="bpe:4096", tokenizer_hash="ab" * 32,
                  train_chars=4_123_456_789, train_tokens=1_000_000_000,
                  split_sha256={"train": "11" * 32, "valid": "22" * 32, "test": "33" * 32})


def resolved(model="sha-rnn", facts=FACTS, **overrides) -> ResolvedRun:
    spec = RunSpec(model=model, preset="tiny", tokenizer="bpe:4096", dataset="wikitext-2", seed=3,
                   overrides=overrides)
    return resolve(validate_spec(spec), facts)


# A finished run must keep its id across refactors, or every existing results folder would be trained again; a
# change to what a run does changes it on purpose. Pinned when validation moved to the same characters for every
# tokenization and character budgets began counting the characters consumed (the ids of the version before the
# run configuration existed, 4c82a586d9bef2ce, 6871c155e66cc7bf and 23902f0f8cc84536, held until then).
@pytest.mark.parametrize("model,overrides,run_id,bptt", [
    ("sha-rnn", {"max_train_chars": 300000, "context_chars": 128, "max_steps": None}, "baeb7927ce7dae37", 31),
    ("transformer", {"max_tokens": 1000, "bptt": 32, "eval_chunk": 16}, "e5c91b333d1ce41e", 32),
    ("lstm", {"init_from": "/some/where/run-abc", "device": "cpu"}, "ab14bea9b34c75cb", 64),
])
def test_run_ids_do_not_change_without_a_reason(model, overrides, run_id, bptt):
    config = resolved(model, **overrides)
    assert config.train.bptt == bptt
    assert config.run_id() == run_id


@pytest.mark.parametrize("name,other", [("rnn_precision", "float32"), ("stop_if_not_learning", False),
                                        ("not_learning_after", 0.5), ("layer_overlap", 4)])
def test_a_setting_added_later_enters_the_run_id_only_when_set_to_another_value(name, other):
    from bench.engine.resolve import ADDED_LATER

    assert name in ADDED_LATER  # at its default it is left out of the hash: the ids pinned above are kept
    assert resolved(**{name: other}).run_id() != resolved().run_id()


def test_a_renamed_setting_is_read_under_its_former_name_and_keeps_the_run_ids_recorded_with_it():
    """rnn_precision was lstm_precision: --set, configs and recorded runs may say either; a run recorded under the
    former name (pinned: its id at the commit before the rename) keeps its id, and both at once are refused."""
    former, current = resolved(lstm_precision="float32"), resolved(rnn_precision="float32")
    assert former.train.rnn_precision == current.train.rnn_precision == "float32"
    assert former.run_id() == current.run_id() == "19e940b03b3374d5"
    recorded = current.to_json()
    recorded["train"]["lstm_precision"] = recorded["train"].pop("rnn_precision")  # as runs before it wrote it
    assert ResolvedRun.from_json(recorded).run_id() == current.run_id()
    with pytest.raises(BenchError, match="lstm_precision is the former name of rnn_precision; set rnn_precision only"):
        resolved(lstm_precision="float32", rnn_precision="auto")


@pytest.mark.parametrize("impl", ["foreach", "loop"])
def test_the_lamb_implementation_is_not_in_the_run_id(impl):
    from bench.engine.resolve import EXECUTION

    assert "lamb_impl" in EXECUTION  # the same update to rounding (tests/test_optim.py), as threads are: one run
    assert resolved(lamb_impl=impl).run_id() == resolved().run_id()
    assert resolved(lamb_impl=impl).train.lamb_impl == impl


def test_where_a_run_is_written_or_executed_does_not_change_its_id():
    config = resolved(device="cpu", init_from="/a/b/run-x")
    moved = resolved(device="cuda", threads=3, init_from="/elsewhere/run-x").with_spec(out_dir="/tmp/out",
                                                                                     data_dir="/d")
    assert moved.run_id() == config.run_id()
    assert resolved(lr=2e-3).run_id() != config.run_id()
    with pytest.raises(ValueError):
        config.with_spec(seed=4)


def test_the_run_configuration_round_trips_through_json_and_checks_its_id():
    config = resolved(max_train_chars=10_000, context_chars=100, max_steps=None).with_spec(out_dir="/r/x")
    data = json.loads(json.dumps(config.to_json()))
    again = ResolvedRun.from_json(data)
    assert again == config and again.run_id() == config.run_id()
    data["train"]["lr"] = 1.0  # edited after planning: not the run its id names
    with pytest.raises(BenchError, match="does not hash to its run id"):
        ResolvedRun.from_json(data)


@pytest.mark.parametrize("model,overrides,facts,message", [
    ("sha-rnn", {"bptt": 32, "context_chars": 128}, FACTS, "both bptt (tokens) and context_chars"),
    ("sha-rnn", {"context_chars": 128}, DataFacts.vocabulary_only(256), "give --tokenizer and --dataset"),
    ("transformer", {"eval_chunk": 128}, FACTS, "eval_chunk (128) is longer than the model's window (64)"),
    ("transformer", {"bptt": 128, "context": 64}, FACTS, "bptt (128) is longer than the model's window"),
    ("sha-rnn", {"batch_size": 16}, DataFacts(300, train_chars=40, train_tokens=31), "too short for batch_size 16"),
    ("lstm", {"max_steps": None}, FACTS, "no training budget"),
    ("lstm", {"lr": -1.0}, FACTS, "lr must be positive"),
])
def test_settings_that_could_only_fail_later_fail_at_resolution(model, overrides, facts, message):
    with pytest.raises(BenchError, match=re.escape(message)):
        resolved(model, facts, **overrides)


def test_context_in_characters_becomes_tokens_from_the_data():
    facts = DataFacts(300, train_chars=10_000, train_tokens=2_500)  # 4 characters per token
    assert resolved(facts=facts, context_chars=128).train.bptt == 32
    assert resolved(facts=facts, context_chars=3).train.bptt == 2  # never below two tokens


def test_the_budget_stops_at_the_first_limit_reached():
    budget = Budget.of(TrainConfig(max_steps=100, max_train_chars=1000, max_minutes=2.0))
    assert budget.limits == {"steps": 100, "chars": 1000, "minutes": 2.0}
    assert budget.fraction_used(Usage(steps=10, epochs=0.0, chars=900, tokens=0, minutes=0.5, flops=0.0)) == 0.9
    assert budget.fraction_used(Usage(steps=50, epochs=0.0, chars=100, tokens=0, minutes=1.5, flops=0.0)) == 0.75
    flops = Budget.of(TrainConfig(max_train_flops=6e9))
    assert flops.fraction_used(Usage(steps=1, epochs=0.0, chars=0, tokens=100, minutes=0.0, flops=3e9)) == 0.5
    assert flops.planned_tokens(4.0, 10_000, 64.0, flops_per_token=2e6) == 3000  # equal compute: 6e9 / 2e6
    # 1000 characters at 4 per token are 250 tokens; 100 steps of 64 tokens are 6,400
    assert budget.planned_tokens(4.0, 10_000, 64.0) == 250
    assert budget.planned_tokens(None, None, 64.0) is None  # characters cannot be counted in tokens without data
    assert Budget.of(TrainConfig(max_minutes=1.0)).planned_tokens(4.0, 10_000, 64.0) is None
    assert Budget.of(TrainConfig(max_epochs=0.5)).planned_steps(4.0, 10_000, 64.0) == 79


def test_default_threads_share_the_cores_whatever_the_load_and_honour_omp_num_threads(monkeypatch):
    import os

    from bench.engine.hardware import device

    monkeypatch.setattr(device, "available_cores", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for load in (0.0, 2.2, 30.0):  # the count must not depend on how busy the machine is
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert device.default_threads(jobs=1) == 8
        assert device.default_threads(jobs=3) == 2
        assert device.default_threads(jobs=16) == 1  # never none
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert device.default_threads(jobs=2) == 3
    with pytest.raises(ValueError, match="threads must be positive"):
        TrainConfig(threads=0)


def test_a_pretrained_tokenizer_is_identified_by_its_file_not_where_it_lies():
    def run_id(scheme: str, tokenizer_hash: str = "cd" * 32) -> str:
        facts = DataFacts(**{**FACTS.to_json(), "scheme": scheme, "tokenizer_hash": tokenizer_hash})
        spec = RunSpec(model="lstm", preset="tiny", tokenizer=scheme, dataset="wikitext-2", seed=3, overrides={})
        return resolve(validate_spec(spec), facts).run_id()

    assert run_id("hf:/one/place/tokenizer.json") == run_id("hf:/another:place/tokenizer.json")
    assert run_id("hf:/one/place/tokenizer.json") != run_id("spm:/one/place/tokenizer.json")  # another library
    assert run_id("hf:/one/place/tokenizer.json") != run_id("hf:/one/place/tokenizer.json", "ef" * 32)


def test_init_from_is_identified_by_the_run_and_the_checkpoint_not_their_folder():
    def run_id(init_from: str) -> str:
        return resolved("lstm", init_from=init_from).run_id()

    assert run_id("/x/results/run-abc") == run_id("/elsewhere/run-abc") != run_id("/x/results/run-abd")
    assert run_id("/x/results/run-abc/best.pt") == run_id("/y/run-abc/best.pt")
    assert len({run_id("/x/run-abc/best.pt"), run_id("/x/run-abc/checkpoint.pt"), run_id("/x/run-abd/best.pt"),
                run_id("/x/run-abc")}) == 4


def test_each_budget_unit_in_tokens_and_steps():
    def planned(**limits):
        budget = Budget.of(TrainConfig(**limits))
        return budget.planned_tokens(4.0, 10_000, 64.0, flops_per_token=2e6), budget.planned_steps(
            4.0, 10_000, 64.0, flops_per_token=2e6)

    assert planned(max_tokens=1000) == (1000, 16)  # 1000 / 64 = 15.6: the step that reaches it
    assert planned(max_steps=10) == (640, 10)
    assert planned(max_epochs=2.0) == (20_000, 313)
    assert planned(max_train_chars=400) == (100, 2)
    assert planned(max_train_flops=2e9) == (1000, 16)
    assert planned(max_tokens=1280, max_steps=30) == (1280, 20)  # the first limit reached
    assert Budget.of(TrainConfig(max_train_flops=2e9)).planned_tokens(4.0, 10_000, 64.0) is None  # FLOPs unknown


def test_a_checkpoints_run_id_is_pinned_too():
    # the run folder and checkpoint file an init_from names, joined as a path: part of ids already written
    assert resolved("lstm", init_from="/some/where/run-abc/best.pt").run_id() == "0d7caa677f3855e5"


def test_the_errors_of_a_moved_or_edited_configuration_name_what_went_wrong():
    config = resolved()
    with pytest.raises(ValueError, match=r"only \{.*\} can change without resolving again"):
        config.with_spec(seed=4)
    data = json.loads(json.dumps(config.to_json()))
    data["train"]["lr"] = 1.0
    with pytest.raises(BenchError, match=f"run configuration {config.run_id()} does not hash to its run id"):
        ResolvedRun.from_json(data)


def test_the_preset_and_the_overrides_make_the_model_and_the_training():
    config = resolved("lstm", nhid=96, lr=5e-3)
    assert (config.model.nhid, config.model.emsize, config.model.vocab_size) == (96, 64, FACTS.vocab_size)
    assert (config.train.lr, config.train.max_steps, config.train.eval_max_chars) == (5e-3, 150, 60_000)
    # a Transformer's window is its training segment, unless it is set apart
    assert resolved("transformer", bptt=32).model.context == 32
    assert resolved("transformer", bptt=32, context=128).model.context == 128


def test_a_span_of_validation_set_explicitly_replaces_the_presets():
    train = resolved(eval_max_tokens=1000).train  # the preset's span is 60,000 characters
    assert (train.eval_max_chars, train.eval_max_tokens) == (None, 1000)
    train = resolved(eval_max_chars=5000).train
    assert (train.eval_max_chars, train.eval_max_tokens) == (5000, None)
    with pytest.raises(BenchError, match="bad training setting: eval_max_chars and eval_max_tokens are both set"):
        resolved(eval_max_chars=5000, eval_max_tokens=1000)  # both set explicitly: neither replaces the other
    assert resolved(eval_max_tokens=None).train.eval_max_chars == 60_000  # none set: the preset's stays


def test_each_limit_is_found_by_its_unit():
    from bench.engine.budget import LIMITS, limit_for

    assert [limit_for(limit.unit).field for limit in LIMITS] == [
        "max_steps", "max_epochs", "max_train_chars", "max_tokens", "max_minutes", "max_train_flops"]


def test_steps_and_tokens_of_an_epoch_and_a_step():
    from bench.engine.budget import epoch_tokens, mean_step_tokens

    assert epoch_tokens(1001, 16) == 992  # 16 streams of 62: the 9 tokens left over are never trained
    assert isinstance(epoch_tokens(1001, 16), int)
    assert mean_step_tokens(TrainConfig(batch_size=16, bptt=64)) == 1024
    assert mean_step_tokens(TrainConfig(batch_size=16, bptt=64, seq_jitter=True)) == 998.4  # 5% half as long
    assert Budget.of(TrainConfig(max_minutes=1.0)).planned_steps(4.0, 10_000, 64.0) is None  # time only
