"""float16 without a host read: the optimizers skip an update whose gradients are not finite on the device
(``_step_supports_amp_scaling``), given the GradScaler's inf check, where GradScaler.step would read the check on
the host and not call them. Both paths must train the same model bit for bit, skipped steps included, and a run
resumed from a checkpoint must end where the uninterrupted one does."""

import copy

import pytest
import torch

from bench.engine.hardware import precision as policy
from bench.engine.hardware.precision import plan_precision
from bench.models.recurrent import has_rnn
from bench.engine.optim import Lamb
from bench.engine.run import train
from bench.engine.step import TrainingStep, apply_gradients
from bench.models import build_model
from tests.test_train import _final_weights, spec

SIZES = {"vocab_size": 64, "emsize": 16, "nhid": 32, "nlayers": 2, "dropout": 0.1, "dropouth": 0.1, "dropouti": 0.1,
         "max_memory": 48}
FORCED_OVERFLOWS = {9, 10, 41, 77}  # steps whose loss is made infinite; the scaler's own backoffs add more


def _optimizer(kind: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if kind == "adamw fused":  # what CUDA runs for the LSTM and the Transformer; PyTorch has a CPU kernel of it too
        return torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
    return Lamb(model.parameters(), lr=4e-3, weight_decay=0.1, foreach=kind == "lamb foreach")


def _train_float16(kind: str, on_device: bool, steps: int = 100) -> dict:
    """``steps`` float16 steps of a tiny SHA-RNN on the CPU with a scaler that overflows often; ``on_device``
    False hides the optimizer's own skip, so that GradScaler.step reads its inf check and skips the call."""
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    model = build_model("sha-rnn", SIZES)
    optimizer = _optimizer(kind, model)
    if not on_device:
        optimizer._step_supports_amp_scaling = False
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 20, growth_interval=3)
    step = TrainingStep(model, cpu, plan_precision("float16", "auto", cpu, has_rnn(model)))
    data, state, losses, skipped = torch.Generator().manual_seed(1), None, [], []
    for i in range(1, steps + 1):
        tokens = torch.randint(0, 64, (4, 17), generator=data)
        loss, new_state = step(tokens[:, :-1], tokens[:, 1:], state)
        state = [[(h.detach(), c.detach()) for h, c in new_state[0]],
                 [m if m is None else m.detach() for m in new_state[1]]]
        if i in FORCED_OVERFLOWS:
            loss = loss * float("inf")
        losses.append(loss.detach())
        skipped.append(apply_gradients(model, optimizer, loss, 0.25, scaler))
    return {"losses": torch.stack(losses), "skipped": torch.stack(skipped), "model": model.state_dict(),
            "optimizer": optimizer.state_dict()["state"], "scaler": scaler.state_dict()}


def _assert_bitwise_equal(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_bitwise_equal(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("kind", ["lamb foreach", "lamb loop", "adamw fused"])
def test_an_update_skipped_on_the_device_trains_as_the_skipped_call_bit_for_bit(kind):
    on_device, on_host = _train_float16(kind, True), _train_float16(kind, False)
    skips = int(on_device["skipped"].sum())
    assert skips >= len(FORCED_OVERFLOWS) + 2  # the forced ones and the scaler's own backoffs
    _assert_bitwise_equal(on_device, on_host)
    if kind.startswith("lamb"):  # the count of updates made: skipped ones are not counted
        assert {float(s["step"]) for s in on_device["optimizer"].values()} == {100.0 - skips}


def test_a_scaler_step_without_unscale_unscales_inside_lamb():
    """GradScaler.step hands ``grad_scale`` to an optimizer whose gradients it has not unscaled (no clipping)."""
    torch.manual_seed(0)
    models = [build_model("sha-rnn", SIZES) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    for unscale_first, model in zip((True, False), models):
        optimizer, scaler = Lamb(model.parameters(), lr=4e-3), torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        torch.manual_seed(1)  # the same dropout masks for both
        for i in range(3):
            hidden, _ = model(torch.arange(16).view(2, 8) + i)
            scaler.scale(model.logits(hidden).logsumexp(-1).mean()).backward()
            if unscale_first:
                scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    _assert_bitwise_equal(models[0].state_dict(), models[1].state_dict())


def test_a_checkpoint_that_counted_lamb_steps_on_the_host_still_resumes():
    torch.manual_seed(0)
    model = build_model("sha-rnn", SIZES)
    optimizer = Lamb(model.parameters(), lr=4e-3)
    for _ in range(2):
        hidden, _ = model(torch.arange(16).view(2, 8))
        model.logits(hidden).logsumexp(-1).mean().backward()
        optimizer.step()
    saved = copy.deepcopy(optimizer.state_dict())
    for state in saved["state"].values():
        state["step"] = int(state["step"])  # as saved before the count moved to the device
    twin = copy.deepcopy(model)
    resumed = Lamb(twin.parameters(), lr=4e-3)
    resumed.load_state_dict(saved)
    for p, q in zip(model.parameters(), twin.parameters()):
        q.grad = p.grad.clone()
    optimizer.step()
    resumed.step()
    _assert_bitwise_equal(model.state_dict(), twin.state_dict())
    assert {float(s["step"]) for s in resumed.state.values()} == {3.0}


def test_a_float16_run_with_skipped_steps_resumes_bit_exactly(make_toy_corpus, tmp_path, monkeypatch, crash_at_step):
    """The trainer's side: the scaler's scale and growth count and LAMB's device step counts go through the
    checkpoint, and the log counts the skipped steps."""
    monkeypatch.setattr(policy, "cpu_lstm_runs_in", lambda dtype: False)  # the same LSTMs on every CPU
    monkeypatch.setattr(policy.Precision, "grad_scaler",  # a scale that overflows every few steps
                        lambda self, device: torch.amp.GradScaler(device.type, init_scale=2.0 ** 22,
                                                                  growth_interval=2) if self.loss_scaling else None)
    data = make_toy_corpus(tmp_path)
    settings = dict(precision="float16", max_steps=12, checkpoint_every=4, log_every=4, eval_every=12)
    reference = train(spec(data, tmp_path / "a", **settings), show_progress=False)
    crash_at_step(7)  # the last checkpoint is step 4's
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(data, tmp_path / "b", **settings), show_progress=False)
    crash_at_step(None)
    resumed = train(spec(data, tmp_path / "b", **settings), show_progress=False)
    assert reference.training.precision["skipped_steps"] >= 2
    assert resumed.training.precision["skipped_steps"] == reference.training.precision["skipped_steps"]
    _assert_bitwise_equal(_final_weights(tmp_path / "a"), _final_weights(tmp_path / "b"))
