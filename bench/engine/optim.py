"""Optimizers and the learning-rate schedule.

``Lamb`` is the variant the SHA-RNN reference trains with (Smerity/pytorch-lamb,
after You et al. 2019, "Large Batch Optimization for Deep Learning"):

    m = beta1 m + (1 - beta1) g             v = beta2 v + (1 - beta2) g^2     (no bias correction)
    u = m / (sqrt(v) + eps) + weight_decay * w
    trust = ||w|| clamped to [0, 10] / ||u||   (1 when either norm is 0), then at least min_trust
    w = w - lr * trust * u

The floor on the trust ratio (``min_trust``, 0.25 in the reference) keeps layers
whose weights are small (LayerNorm biases, gates starting at zero) learning.
"""

from __future__ import annotations

import math

import torch

from bench.engine.spec import TrainConfig


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, min_trust: float = 0.25):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or not 0 <= min_trust < 1:
            raise ValueError("invalid LAMB hyper-parameters")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, min_trust=min_trust))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = exp_avg / exp_avg_sq.sqrt().add_(group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                weight_norm = p.norm().clamp(0, 10)
                update_norm = update.norm()
                trust = torch.where(
                    (weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, torch.ones_like(weight_norm)
                )
                if group["min_trust"]:
                    trust = trust.clamp(min=group["min_trust"])
                p.add_(update * trust, alpha=-group["lr"])
        return loss


def build_optimizer(parameters, config: TrainConfig) -> torch.optim.Optimizer:
    betas = (config.beta1, config.beta2)
    if config.optimizer == "lamb":
        return Lamb(parameters, lr=config.lr, betas=betas, eps=config.eps, weight_decay=config.weight_decay,
                    min_trust=config.min_trust)
    return torch.optim.AdamW(parameters, lr=config.lr, betas=betas, eps=config.eps, weight_decay=config.weight_decay)


def lr_factor(step: int, progress: float, config: TrainConfig) -> float:
    """Multiplier of ``lr`` at optimizer step ``step`` (1-based), ``progress`` in [0, 1] of the budget.

    Warmup is linear over ``warmup_steps`` as in the reference (step/warmup); the
    decay that follows is a function of the budget used, so it works the same
    whether the budget is steps, epochs, characters or tokens.
    """
    warm = min(step, config.warmup_steps) / config.warmup_steps if config.warmup_steps else 1.0
    if config.schedule == "constant":
        return warm
    progress = min(max(progress, 0.0), 1.0)
    floor = config.min_lr_ratio
    if config.schedule == "linear":
        decay = 1.0 - (1.0 - floor) * progress
    else:
        decay = floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return warm * decay
