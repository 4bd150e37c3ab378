"""The LAMB optimizer of the SHA-RNN recipe and the learning-rate schedules."""

import copy

import pytest
import torch

from bench.engine.optim import Lamb, build_optimizer, lr_factor
from bench.engine.presets import get_preset
from bench.engine.run import train
from bench.engine.spec import TrainConfig
from bench.models import build_model, make_config
from tests.test_train import _final_weights, spec


@pytest.mark.parametrize("foreach", [True, False])
def test_lamb_matches_its_definition(foreach):
    torch.manual_seed(0)
    w = torch.randn(5, 3, requires_grad=True)
    w0 = w.detach().clone()
    opt = Lamb([w], lr=0.1, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01, min_trust=0.25, foreach=foreach)
    m = torch.zeros_like(w0)
    v = torch.zeros_like(w0)
    ref = w0.clone()
    for _ in range(3):
        g = torch.randn(5, 3)
        w.grad = g.clone()
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.99 * v + 0.01 * g * g
        u = m / (v.sqrt() + 1e-6) + 0.01 * ref  # no bias correction
        trust = max(ref.norm().clamp(0, 10) / u.norm(), 0.25)
        ref = ref - 0.1 * trust * u
    assert torch.allclose(w.detach(), ref, atol=1e-6)


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("weight, min_trust, expected", [
    (1e-4, 0.25, 1e-4 - 0.25),  # tiny weights: trust ~1e-3, floored at 0.25; the update u = g/|g| is 1 per element
    (100.0, 0.0, 100.0 - 1.0),  # |w| = 1000 is clamped to 10, |u| = 10: trust 1
])
def test_lamb_trust_ratio_floor_and_weight_norm_clamp(weight, min_trust, expected, foreach):
    w = torch.full((100,), weight, requires_grad=True)
    w.grad = torch.ones(100)
    Lamb([w], lr=1.0, betas=(0.0, 0.0), eps=0.0, min_trust=min_trust, foreach=foreach).step()
    assert torch.allclose(w.detach(), torch.full((100,), expected))


@pytest.mark.parametrize("foreach", [True, False])
def test_zero_weights_get_trust_one(foreach):
    w = torch.zeros(4, requires_grad=True)
    w.grad = torch.ones(4)
    Lamb([w], lr=0.5, betas=(0.0, 0.0), eps=0.0, min_trust=0.25, foreach=foreach).step()
    assert torch.allclose(w.detach(), torch.full((4,), -0.5))


CONSTANT = dict(warmup_steps=10, schedule="constant", max_steps=100)
COSINE = dict(warmup_steps=0, schedule="cosine", min_lr_ratio=0.1, max_steps=100)
LINEAR = dict(warmup_steps=0, schedule="linear", min_lr_ratio=0.0, max_steps=100)


@pytest.mark.parametrize("schedule, step, progress, factor", [
    (CONSTANT, 1, 0.0, 0.1),  # warm-up: step / warmup_steps
    (CONSTANT, 10, 0.1, 1.0),
    (CONSTANT, 50, 0.5, 1.0),
    (COSINE, 1, 0.0, 1.0),
    (COSINE, 50, 0.5, 0.55),
    (COSINE, 100, 1.0, 0.1),  # ends at min_lr_ratio
    (LINEAR, 30, 0.3, 0.7),
])
def test_learning_rate_schedule(schedule, step, progress, factor):
    assert lr_factor(step, progress, TrainConfig(**schedule)) == pytest.approx(factor)


# ---- the foreach LAMB (lamb_impl): the loop's update, all tensors at once, never waiting for the device ----------

def _sha_rnn(vocab: int = 64) -> torch.nn.Module:
    recipe = get_preset("sha-rnn", "tiny")["model"]
    return build_model("sha-rnn", make_config("sha-rnn", {**recipe, "vocab_size": vocab}))


class _Model(torch.nn.Module):
    """The SHA-RNN at preset tiny, with a weight that starts at zero (weight norm 0 at the first step) and one that
    stays zero with a zero gradient (both norms 0: trust 1)."""

    def __init__(self):
        super().__init__()
        self.net = _sha_rnn()
        self.zero_start = torch.nn.Parameter(torch.zeros(8))
        self.always_zero = torch.nn.Parameter(torch.zeros(3))

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.net(x[:, :-1], None)
        loss = torch.nn.functional.cross_entropy(self.net.logits(hidden).flatten(0, 1), x[:, 1:].flatten())
        return loss + (self.zero_start * torch.arange(8.0)).sum() * 1e-3 + (self.always_zero * 0).sum()


def _train(model: _Model, foreach: bool, min_trust: float, steps: int = 100) -> Lamb:
    opt = Lamb(model.parameters(), lr=4e-3, betas=(0.9, 0.99), weight_decay=0.1, min_trust=min_trust, foreach=foreach)
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad()
        model.loss(torch.randint(0, 64, (2, 17), generator=data)).backward()
        opt.step()
    return opt


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.0 if torch.equal(a, b) else ((a - b).norm() / b.norm()).item()



def test_the_foreach_lamb_trains_the_sha_rnn_as_the_loop_does_for_100_steps(one_thread):
    torch.manual_seed(0)
    start = _Model()
    runs = {key: copy.deepcopy(start) for key in [(True, 0.25), (False, 0.25), (True, 0.0)]}
    states = {key: _train(model, *key).state for key, model in runs.items()}
    foreach, loop = runs[True, 0.25], runs[False, 0.25]
    for (name, a), b in zip(foreach.named_parameters(), loop.parameters()):
        assert _relative(a, b) <= 1e-6, name
        for key in ("exp_avg", "exp_avg_sq"):
            assert _relative(states[True, 0.25][a][key], states[False, 0.25][b][key]) <= 1e-6, (name, key)
        assert states[True, 0.25][a]["step"] == states[False, 0.25][b]["step"] == 100
    assert foreach.always_zero.abs().sum() == 0 and foreach.zero_start.abs().sum() > 0
    # the floor took part: without it the same run ends elsewhere
    unfloored = runs[True, 0.0].state_dict()
    assert any(_relative(unfloored[k], v) > 1e-3 for k, v in foreach.state_dict().items())


@pytest.mark.parametrize("lr", [1e-3, torch.tensor(1e-3)], ids=["float", "tensor"])
def test_the_foreach_lamb_never_reads_a_tensor_on_the_host(monkeypatch, lr):
    """On CUDA a read (``.item()``, ``if tensor``) waits for every launched kernel: the step must not make one, nor
    read a learning rate given as a tensor (a CUDA graph's: a value read on the host would be captured as is)."""
    model = _Model()
    opt = Lamb(model.parameters(), lr=lr, weight_decay=0.1, foreach=True)
    model.loss(torch.randint(0, 64, (2, 9))).backward()

    def refused(*args, **kwargs):
        raise AssertionError("the LAMB step read a tensor on the host")

    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, refused)
    opt.step()
    opt.step()


def test_a_lamb_checkpoint_resumes_under_the_other_implementation(one_thread):
    """Both keep the same state per parameter (step, exp_avg, exp_avg_sq), as checkpoints before foreach did."""
    torch.manual_seed(0)
    first = _Model()
    saved = _train(first, foreach=False, min_trust=0.25, steps=3).state_dict()
    assert {k for s in saved["state"].values() for k in s} == {"step", "exp_avg", "exp_avg_sq"}
    # counted on the device, where a skipped float16 update is not counted without a read (test_float16_skips)
    assert all(s["step"].dtype == torch.float32 and s["step"].shape == () for s in saved["state"].values())
    assert set(saved["param_groups"][0]) == {"lr", "betas", "eps", "weight_decay", "min_trust", "params"}
    twins = {foreach: copy.deepcopy(first) for foreach in (True, False)}
    for foreach, model in twins.items():
        opt = Lamb(model.parameters(), foreach=foreach)
        opt.load_state_dict(copy.deepcopy(saved))  # as from a file: the twins must not share the moments
        assert opt.foreach is foreach  # the checkpoint does not choose the implementation
        data = torch.Generator().manual_seed(2)
        for _ in range(3):
            opt.zero_grad()
            model.loss(torch.randint(0, 64, (2, 9), generator=data)).backward()
            opt.step()
        assert opt.state[model.zero_start]["step"] == 6
    for a, b in zip(twins[True].parameters(), twins[False].parameters()):
        assert _relative(a, b) <= 1e-6


def test_a_run_checkpointed_under_the_loop_resumes_under_foreach(make_toy_corpus, tmp_path, crash_at_step, one_thread):
    """lamb_impl is not in the run id: ``bench train --set lamb_impl=foreach`` resumes a loop run's folder, and ends
    where the uninterrupted loop run does."""
    data = make_toy_corpus(tmp_path)
    reference = train(spec(data, tmp_path / "a", lamb_impl="loop"), show_progress=False)
    crash_at_step(7)  # the last checkpoint is step 4's
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(data, tmp_path / "b", lamb_impl="loop"), show_progress=False)
    crash_at_step(None)
    resumed = train(spec(data, tmp_path / "b", lamb_impl="foreach"), show_progress=False)
    assert resumed.run_id == reference.run_id and resumed.resolved["train"]["lamb_impl"] == "foreach"
    a, b = _final_weights(tmp_path / "a"), _final_weights(tmp_path / "b")
    assert all(_relative(b[k], a[k]) <= 1e-6 for k in a)


@pytest.mark.parametrize("foreach", [True, False])
def test_lamb_reads_a_learning_rate_tensor_at_each_step_as_a_cuda_graph_needs(foreach, one_thread):
    """Under CUDA graphs the rate is a tensor filled before each replay (bench.engine.hardware.cuda_graphs): the same update
    as the float's to rounding, and a new value acts at the next step."""
    torch.manual_seed(0)
    start = _Model()
    as_float, as_tensor = copy.deepcopy(start), copy.deepcopy(start)
    _train(as_float, foreach, 0.25, steps=5)
    opt = _train(as_tensor, foreach, 0.25, steps=0)
    opt.param_groups[0]["lr"] = torch.tensor(4e-3)
    data = torch.Generator().manual_seed(1)
    for _ in range(5):
        opt.zero_grad()
        as_tensor.loss(torch.randint(0, 64, (2, 17), generator=data)).backward()
        opt.step()
    assert all(_relative(a, b) <= 1e-6 for a, b in zip(as_tensor.parameters(), as_float.parameters()))
    opt.param_groups[0]["lr"].fill_(0.0)
    before = copy.deepcopy(as_tensor.state_dict())
    as_tensor.loss(torch.randint(0, 64, (2, 17), generator=data)).backward()
    opt.step()
    assert all(torch.equal(before[k], v) for k, v in as_tensor.state_dict().items())


def test_under_cuda_graphs_adamw_is_capturable_and_a_checkpoint_does_not_carry_it_elsewhere(one_thread):
    """Capturable: its step count on the device and its rate readable from a tensor, as a graph replays them; a run
    resumed without graphs (on a CPU, where capturable cannot step) keeps its own setting."""
    model = _sha_rnn()
    graphed = build_optimizer(model.parameters(), TrainConfig(optimizer="adamw", cuda_graphs=True))
    assert graphed.param_groups[0]["capturable"] is True
    opt = build_optimizer(model.parameters(), TrainConfig(optimizer="adamw"))
    saved = graphed.state_dict()
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["capturable"] is False
    model(torch.randint(0, 64, (2, 9)))[0].sum().backward()
    opt.step()


@pytest.mark.parametrize("optimizer,impl,foreach", [("lamb", "auto", False), ("lamb", "foreach", True),
                                                    ("lamb", "loop", False)])
def test_lamb_impl_chooses_the_implementation_and_auto_is_the_loop_on_a_cpu(optimizer, impl, foreach):
    opt = build_optimizer(_sha_rnn().parameters(), TrainConfig(optimizer=optimizer, lamb_impl=impl))
    assert isinstance(opt, Lamb) and opt.foreach is foreach


def test_adamw_keeps_the_implementation_chosen_for_its_device_when_a_checkpoint_loads(one_thread):
    """Fused on CUDA (tests/test_cuda.py), PyTorch's default on a CPU; a checkpoint's groups name the
    implementation they were saved with, which must not follow the state to another device."""
    model = _sha_rnn()
    opt = build_optimizer(model.parameters(), TrainConfig(optimizer="adamw"))
    assert opt.param_groups[0]["fused"] is None and opt.param_groups[0]["foreach"] is None
    other = torch.optim.AdamW(model.parameters(), fused=True)  # as a CUDA run saves it
    model(torch.randint(0, 64, (2, 9)))[0].sum().backward()
    other.step()
    opt.load_state_dict(other.state_dict())
    assert opt.param_groups[0]["fused"] is None and opt.param_groups[0]["foreach"] is None
    assert opt.state[model.embedding.weight]["step"].item() == 1
