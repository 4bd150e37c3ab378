"""The LAMB optimizer of the SHA-RNN recipe and the learning-rate schedules."""

import pytest
import torch

from bench.engine.optim import Lamb, lr_factor
from bench.engine.spec import TrainConfig


def test_lamb_matches_its_definition():
    torch.manual_seed(0)
    w = torch.randn(5, 3, requires_grad=True)
    w0 = w.detach().clone()
    opt = Lamb([w], lr=0.1, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01, min_trust=0.25)
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


@pytest.mark.parametrize("weight, min_trust, expected", [
    (1e-4, 0.25, 1e-4 - 0.25),  # tiny weights: trust ~1e-3, floored at 0.25; the update u = g/|g| is 1 per element
    (100.0, 0.0, 100.0 - 1.0),  # |w| = 1000 is clamped to 10, |u| = 10: trust 1
])
def test_lamb_trust_ratio_floor_and_weight_norm_clamp(weight, min_trust, expected):
    w = torch.full((100,), weight, requires_grad=True)
    w.grad = torch.ones(100)
    Lamb([w], lr=1.0, betas=(0.0, 0.0), eps=0.0, min_trust=min_trust).step()
    assert torch.allclose(w.detach(), torch.full((100,), expected))


def test_zero_weights_get_trust_one():
    w = torch.zeros(4, requires_grad=True)
    w.grad = torch.ones(4)
    Lamb([w], lr=0.5, betas=(0.0, 0.0), eps=0.0, min_trust=0.25).step()
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
