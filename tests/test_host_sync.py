"""A training step reads nothing from the device (bench.engine.window): the losses and skipped updates are read at
log, validation, checkpoint and stop points only, so that a GPU's queue is not drained between them; a loss that
is not finite is found there and named with its step."""

import collections

import pytest
import torch

from bench.engine.hardware import precision as policy
from bench.engine import step as step_module
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.engine.trainer import Trainer, TrainingDiverged

# nine steps read at step 5 (log) and 9 (log, validation, checkpoint, the end) only
SETTINGS = {"emsize": 16, "nhid": 32, "bptt": 16, "batch_size": 4, "max_steps": 9, "log_every": 5, "eval_every": 9,
            "checkpoint_every": 9, "eval_streams": 4, "eval_chunk": 32, "eval_max_tokens": 300,
            "final_eval_splits": "test", "stop_if_not_learning": False}
# what waits for the device: a tensor's value read on the host
READS = ("item", "cpu", "tolist", "__bool__", "__float__", "__int__")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, **overrides):
    return RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", seed=4,
                   overrides={**SETTINGS, **overrides}, data_dir=str(data_dir), out_dir=str(out))


@pytest.fixture
def reads_by_step(monkeypatch):
    """Counts the reads of tensor values by step: those of step n's training step and of the loop after it."""
    counts: collections.Counter = collections.Counter()
    current = [0]
    for name in READS:
        def counting(self, *args, _original=getattr(torch.Tensor, name), **kwargs):
            counts[current[0]] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    original = Trainer.train_step

    def train_step(self):
        current[0] = self.progress.step + 1
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    return counts


# float16: LAMB skips an update with inf gradients on the device (_step_supports_amp_scaling), where GradScaler.step
# would read its inf check to skip the call (1 read per step before). AdamW does so where it is fused, on CUDA
# (tests/test_cuda.py); on a CPU PyTorch's AdamW loop reads its step counts, which costs nothing there.
@pytest.mark.parametrize("precision,per_step", [("float32", 0), ("float16", 0)])
def test_the_steps_between_log_steps_read_nothing_from_the_device(data_dir, tmp_path, monkeypatch, reads_by_step,
                                                                  precision, per_step):
    monkeypatch.setattr(policy, "cpu_lstm_runs_in", lambda dtype: False)  # the same LSTMs on every CPU
    train(spec(data_dir, tmp_path / "run", precision=precision), show_progress=False)
    assert [reads_by_step[step] for step in (1, 2, 3, 4, 6, 7, 8)] == [per_step] * 7
    assert reads_by_step[5] > per_step and reads_by_step[9] > per_step  # the log steps read the window


def test_a_loss_that_stops_being_finite_is_named_at_its_step_and_never_checkpointed(data_dir, tmp_path, monkeypatch):
    original, calls = step_module.forward_loss, [0]

    def nan_at_step_three(*args):
        loss, state = original(*args)
        calls[0] += 1
        return (loss * float("nan") if calls[0] == 3 else loss), state

    monkeypatch.setattr(step_module, "forward_loss", nan_at_step_three)
    with pytest.raises(TrainingDiverged, match="training loss became nan at step 3; try a lower lr"):
        train(spec(data_dir, tmp_path / "run", checkpoint_every=4), show_progress=False)  # read at step 4
    assert not (tmp_path / "run" / "checkpoint.pt").exists()  # step 4's weights came from a NaN gradient
