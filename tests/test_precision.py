"""The precision policy (bench.engine.hardware.precision): what runs where, on any CPU; float16 with a loss scaler; what
ran is recorded from what was observed; threads that do not depend on the load."""

import dataclasses
import json
import os

import pytest
import torch

from bench.engine.hardware import precision as policy
from bench.engine.hardware.precision import DtypeWatch, plan_precision
from bench.models.recurrent import follow_rnn_rule, has_rnn
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.errors import BenchError
from bench.models.lstm import LSTMConfig, LSTMLM
from bench.models.transformer import TransformerConfig, TransformerLM

SMALL = {"emsize": 16, "nhid": 32, "bptt": 16, "batch_size": 4, "max_steps": 8, "eval_every": 4,
         "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "log_every": 2, "eval_max_tokens": 300,
         "final_eval_splits": "test"}
CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # planning looks at the device's type only


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, model="lstm", **overrides):
    return RunSpec(model=model, preset="tiny", tokenizer="byte", dataset="toy", seed=5,
                   overrides={**SMALL, **overrides}, data_dir=str(data_dir), out_dir=str(out))


@pytest.fixture
def cpu_without_low_precision_lstms(monkeypatch):
    """A CPU whose oneDNN has no bf16 or fp16 LSTM (AVX2 only), whatever this one has."""
    monkeypatch.setattr(policy, "cpu_lstm_runs_in", lambda dtype: False)


def lstm_model():
    return LSTMLM(LSTMConfig(vocab_size=32, emsize=8, nhid=8, nlayers=1))


def test_the_policy_decides_per_device_and_model_family(cpu_without_low_precision_lstms):
    transformer = TransformerLM(TransformerConfig(vocab_size=32, d_model=8, nlayers=1, nheads=2, context=8))
    assert plan_precision("auto", "auto", CPU, True).name == "float32"
    assert plan_precision("auto", "auto", CUDA, True).name == "float16 autocast, loss scaling"
    assert plan_precision("auto", "auto", CUDA, has_rnn(transformer)).name == "bfloat16 autocast"
    # bf16 on CUDA: LSTMs leave autocast (cuDNN's wrapper would run them in float16 without scaling)
    assert plan_precision("bfloat16", "auto", CUDA, True).rnn_float32
    assert plan_precision("bfloat16", "auto", CPU, True).rnn_float32  # no bf16 LSTM on this CPU
    assert plan_precision("float16", "auto", CPU, True).name == "float16 autocast, RNNs float32, loss scaling"
    assert not plan_precision("bfloat16", "autocast", CUDA, True).rnn_float32  # to reproduce a run made so
    with pytest.raises(BenchError, match=r"cannot run recurrent layers \(LSTMs\) in bfloat16.*rnn_precision=auto"):
        plan_precision("bfloat16", "autocast", CPU, True)


def test_a_cpu_that_runs_bf16_lstms_runs_them_in_bf16(monkeypatch):
    monkeypatch.setattr(policy, "cpu_lstm_runs_in", lambda dtype: dtype == torch.bfloat16)
    assert not plan_precision("bfloat16", "auto", CPU, True).rnn_float32
    assert plan_precision("bfloat16", "float32", CPU, True).rnn_float32


def test_an_lstm_under_the_policy_runs_in_float32_and_the_watch_sees_it(cpu_without_low_precision_lstms):
    model = follow_rnn_rule(lstm_model())  # as bench.models.build_model builds every model
    plan = plan_precision("bfloat16", "auto", CPU, has_rnn(model))
    watch = DtypeWatch(model)
    with plan.active(CPU):
        hidden, _ = model(torch.randint(0, 32, (2, 5)))
        logits = model.logits(hidden)
    seen = watch.close()
    assert seen["LSTM"]["outputs"] == ["float32"] and seen["LSTM"]["inputs"] == ["float32"]
    assert logits.dtype == torch.bfloat16  # the rest under autocast (plain autocast would also run the LSTM in
    # bf16: a oneDNN traceback on a CPU without AVX-512 BF16, which this suite meets under ONEDNN_MAX_CPU_ISA=AVX2)


@pytest.mark.parametrize("family", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_every_recurrent_module_follows_the_plan_as_it_is_used_packed_copied_or_outside_the_plan(family):
    """The rule acts inside each nn.RNNBase the model holds, whatever calls it: a packed sequence, a copy of the
    model made after planning (it runs its own weights), and outside the plan it computes exactly what the plain
    module does."""
    import copy

    from torch.nn.utils.rnn import pack_padded_sequence

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), family(8, 8, batch_first=True))
    plain = copy.deepcopy(model)
    follow_rnn_rule(model)
    plan = plan_precision("bfloat16", "float32", CPU, has_rnn(model))
    rnn, x = model[1], torch.randn(2, 5, 8)
    assert type(rnn).__name__ == family.__name__ and list(rnn.state_dict()) == list(plain[1].state_dict())
    assert torch.equal(rnn(x)[0], plain[1](x)[0])
    packed = pack_padded_sequence(x, [5, 3], batch_first=True)
    with plan.active(CPU):
        assert rnn(model[0](x))[0].dtype == torch.float32
        assert rnn(packed)[0].data.dtype == torch.float32
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin[1].weight_hh_l0.zero_()
    assert not torch.equal(twin[1](x)[0], rnn(x)[0])


def test_a_bfloat16_lstm_setting_this_cpu_cannot_run_is_refused_before_any_folder(
        data_dir, tmp_path, cpu_without_low_precision_lstms):
    with pytest.raises(BenchError, match=r"cannot run recurrent layers \(LSTMs\) in bfloat16"):
        train(spec(data_dir, tmp_path / "run", precision="bfloat16", rnn_precision="autocast"), show_progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("setting", ["float32", "bfloat16", "float16"])
def test_a_tiny_run_trains_under_each_precision_and_its_result_names_what_ran(
        data_dir, tmp_path, setting, cpu_without_low_precision_lstms):
    result = train(spec(data_dir, tmp_path / setting, "sha-rnn", precision=setting), show_progress=False)
    ran = result.training.precision
    assert result.status == "done" and result.training.steps == 8 and ran["setting"] == setting
    assert result.metrics["test"].bits_per_byte < 8.0  # below the uniform model's 8 bits per byte
    assert ran["observed"]["LSTM"]["outputs"] == ["float32"]  # never a low-precision LSTM this CPU cannot run
    expected = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}[setting]
    assert expected in ran["observed"]["Linear"]["outputs"] or setting == "float32"
    assert (ran["loss_scale"] is not None) == (setting == "float16") and ran["skipped_steps"] == 0
    assert result.evaluation.layout["precision"] == ran["ran"]
    assert result.training.threads == torch.get_num_threads() == result.provenance.device["threads"]


def test_float16_skips_the_updates_whose_gradients_overflow_and_counts_them(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(policy.Precision, "grad_scaler",
                        lambda self, device: torch.amp.GradScaler(device.type, init_scale=2.0 ** 120))
    result = train(spec(data_dir, tmp_path / "run", precision="float16"), show_progress=False)
    ran = result.training.precision
    assert ran["skipped_steps"] >= 1 and ran["loss_scale"] < 2.0 ** 120  # the scale fell at each skip
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert any(r.get("skipped_steps") for r in log if "loss_scale" in r)


def test_a_float16_run_resumed_after_a_signal_is_bit_exact(data_dir, tmp_path, sigterm_after_step, monkeypatch):
    from bench.engine.trainer import TrainingInterrupted

    # a scale that doubles after every good step and halves at each overflow: its state is in the checkpoint
    monkeypatch.setattr(policy.Precision, "grad_scaler",
                        lambda self, device: torch.amp.GradScaler(device.type, init_scale=2.0 ** 14, growth_interval=1))
    whole = train(spec(data_dir, tmp_path / "whole", precision="float16", checkpoint_every=100), show_progress=False)
    disarm = sigterm_after_step(3)
    with pytest.raises(TrainingInterrupted):
        train(spec(data_dir, tmp_path / "cut", precision="float16", checkpoint_every=100), show_progress=False)
    disarm()
    resumed = train(spec(data_dir, tmp_path / "cut", precision="float16", checkpoint_every=100), show_progress=False)
    assert resumed.metrics["test"].total_nll_nats == whole.metrics["test"].total_nll_nats
    assert resumed.training.precision == whole.training.precision and whole.training.precision["skipped_steps"] > 0


def test_a_resumed_run_uses_its_first_attempts_thread_count(data_dir, tmp_path, sigterm_after_step, capsys):
    from bench.engine.trainer import TrainingInterrupted

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        whole = train(spec(data_dir, tmp_path / "whole", checkpoint_every=100), show_progress=False)
        disarm = sigterm_after_step(3)
        with pytest.raises(TrainingInterrupted):
            train(spec(data_dir, tmp_path / "cut", checkpoint_every=100), show_progress=False)
        disarm()
        torch.set_num_threads(2)  # a busier or larger machine, another default
        resumed = train(spec(data_dir, tmp_path / "cut", checkpoint_every=100), show_progress=False)
    finally:
        torch.set_num_threads(before)
    assert "resuming with 1 CPU threads, as the run's first attempt (not 2)" in capsys.readouterr().err
    assert resumed.training.threads == 1 == resumed.provenance.device["threads"]
    assert resumed.metrics["test"].total_nll_nats == whole.metrics["test"].total_nll_nats


def test_a_run_on_a_busy_machine_gives_the_same_bits_as_on_an_idle_one(data_dir, tmp_path, monkeypatch):
    from bench.engine.hardware.device import use_threads

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    results = []
    try:
        for name, load in (("idle", 0.0), ("busy", 40.0)):
            monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
            use_threads(None)  # what bench train does before a run
            results.append(train(spec(data_dir, tmp_path / name), show_progress=False))
    finally:
        torch.set_num_threads(before)
    idle, busy = results
    assert idle.training.threads == busy.training.threads
    assert idle.metrics["test"].total_nll_nats == busy.metrics["test"].total_nll_nats


def test_the_dtype_watch_records_nested_outputs_and_removes_its_hooks():
    model = lstm_model()
    watch = DtypeWatch(model)
    model(torch.randint(0, 32, (1, 3)))
    seen = watch.close()
    assert set(seen) == {"Embedding", "LSTM"} and seen["LSTM"]["weights"] == ["float32"]
    model(torch.randint(0, 32, (1, 3)))
    assert watch.seen["LSTM"]["outputs"] == {"float32"}  # closed: nothing more recorded
    assert dataclasses.is_dataclass(policy.FLOAT32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_probing_the_cpu_leaves_the_global_generator_as_it_was(dtype):
    """The probe runs once per process: if it drew from the generator, a process's first run would get other dropout
    masks than its later ones wherever nothing seeds between the plan and the first step."""
    policy.cpu_lstm_runs_in.cache_clear()
    torch.manual_seed(0)
    policy.cpu_lstm_runs_in(dtype)
    after_probe = torch.rand(4)
    torch.manual_seed(0)
    assert torch.equal(after_probe, torch.rand(4))


def test_a_model_follows_the_rule_from_where_it_is_built_and_the_plan_decides_only():
    """The rule is given to recurrent layers once, by bench.models.build_model; plan_precision takes no model."""
    import inspect

    from bench.models import build_model

    built = build_model("lstm", {"vocab_size": 32, "emsize": 8, "nhid": 8, "nlayers": 1})
    [rnn] = [m for m in built.modules() if isinstance(m, torch.nn.RNNBase)]
    assert type(rnn) is not torch.nn.LSTM and type(rnn).__name__ == "LSTM"  # the subclass that follows the rule
    [plain] = [m for m in lstm_model().modules() if isinstance(m, torch.nn.RNNBase)]
    assert type(plain) is torch.nn.LSTM
    assert "model" not in inspect.signature(plan_precision).parameters
