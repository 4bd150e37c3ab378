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
from collections import defaultdict

import torch

from bench.engine.spec import TrainConfig


class Lamb(torch.optim.Optimizer):
    """``foreach`` updates all tensors of a group (of one device and dtype) with ``torch._foreach_*`` ops, one
    launch per op instead of one per parameter, and never reads a tensor on the host; the loop is the reference's
    order of operations, one parameter at a time. Both keep the same state per parameter (``step``, ``exp_avg``,
    ``exp_avg_sq``), so a checkpoint of either resumes under the other.

    Under float16 the GradScaler hands its inf check to the step (``found_inf``, and ``grad_scale`` when its
    ``unscale_`` was not called first) instead of reading it on the host to skip the call: an update whose
    gradients are not finite is skipped on the device, the moments multiplied by 1 and the weights moved by 0 (the
    same values as no call, bit for bit), so a float16 step reads nothing and a CUDA graph can hold it. ``step``
    counts the updates made, on the device, as PyTorch's capturable optimizers do."""

    _step_supports_amp_scaling = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, min_trust: float = 0.25, foreach: bool = True):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or not 0 <= min_trust < 1:
            raise ValueError("invalid LAMB hyper-parameters")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, min_trust=min_trust))
        self.foreach = foreach  # not in the groups: their saved values would replace it when a checkpoint loads

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        found_inf, grad_scale = getattr(self, "found_inf", None), getattr(self, "grad_scale", None)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            by_kind = defaultdict(list)  # a foreach op, and a skip's factors, take tensors of one device and dtype
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] = _step_count(state.get("step", 0), p.device)
                by_kind[(p.device, p.dtype)].append(p)
            for (device, dtype), same_kind in by_kind.items():
                if grad_scale is not None:  # GradScaler.step without unscale_: its unscale, in place as there
                    torch._foreach_mul_([p.grad for p in same_kind], grad_scale.double().reciprocal().float())
                skip = None if found_inf is None else SkipFactors(found_inf.to(device), dtype, group["betas"])
                if self.foreach:
                    self._update_foreach(same_kind, group, skip)
                else:
                    for p in same_kind:
                        self._update_one(p, group, skip)
        return loss

    def _update_one(self, p: torch.Tensor, group: dict, skip: SkipFactors | None) -> None:
        beta1, beta2 = group["betas"]
        grad, state = p.grad if skip is None else skip.gradient(p.grad), self.state[p]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1 if skip is None else skip.beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2 if skip is None else skip.beta2).addcmul_(grad, grad, value=1 - beta2)
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
        if skip is not None:
            trust = trust * skip.made
        _descend([p], [update.mul_(trust)], group["lr"])
        state["step"].add_(1 if skip is None else skip.made)

    def _update_foreach(self, params: list[torch.Tensor], group: dict, skip: SkipFactors | None) -> None:
        """The same operations as :meth:`_update_one`, in the same order, on every tensor of ``params`` at once."""
        beta1, beta2 = group["betas"]
        grads = [p.grad if skip is None else skip.gradient(p.grad) for p in params]
        exp_avgs = [self.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_mul_(exp_avgs, beta1 if skip is None else skip.beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2 if skip is None else skip.beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denominators, group["eps"])
        updates = torch._foreach_div(exp_avgs, denominators)
        del denominators  # at most two transient copies of the weights at a time
        if group["weight_decay"]:
            torch._foreach_add_(updates, params, alpha=group["weight_decay"])
        weight_norms = torch.stack(torch._foreach_norm(params)).clamp(0, 10)
        update_norms = torch.stack(torch._foreach_norm(updates))
        trust = torch.where((weight_norms > 0) & (update_norms > 0), weight_norms / update_norms, 1.0)
        if group["min_trust"]:
            trust = trust.clamp(min=group["min_trust"])
        if skip is not None:
            trust = trust * skip.made
        # factors that stay on the device (floats would be read from it); on CUDA PyTorch applies 0-dim factors one
        # tensor at a time, one launch per tensor for this op instead of the loop's ~20
        torch._foreach_mul_(updates, trust.unbind())
        _descend(params, updates, group["lr"])
        torch._foreach_add_([self.state[p]["step"] for p in params], 1 if skip is None else skip.made)


class SkipFactors:
    """What makes an update a no-op on the device when the scaler found inf or NaN gradients (``found_inf`` > 0),
    and changes nothing otherwise: the betas where the update is made, else 1; ``made`` 1 or 0 (the trust ratio's
    factor, and the step count's increment); the gradients, zero where the update is skipped (an inf times 0 is
    NaN). Tensors of the parameters' dtype, so that a factor rounds as the Python float it replaces."""

    def __init__(self, found_inf: torch.Tensor, dtype: torch.dtype, betas: tuple[float, float]):
        self.making = found_inf.eq(0)
        one = torch.ones((), dtype=dtype, device=found_inf.device)
        self.beta1, self.beta2 = (torch.where(self.making, torch.full_like(one, beta), one) for beta in betas)
        self.made = self.making.to(dtype)

    def gradient(self, grad: torch.Tensor) -> torch.Tensor:
        return torch.where(self.making, grad, 0.0)


def _step_count(step: int | torch.Tensor, device: torch.device) -> torch.Tensor:
    """A parameter's update count as a float32 tensor on its device: a checkpoint from before counted on the host
    (an int), and a loaded tensor lies where the checkpoint was mapped."""
    if isinstance(step, torch.Tensor) and step.device == device and step.dtype == torch.float32:
        return step
    return torch.as_tensor(step, dtype=torch.float32).to(device)


def _descend(params: list[torch.Tensor], updates: list[torch.Tensor], lr: float | torch.Tensor) -> None:
    """``params -= lr * updates`` (``updates`` is consumed). A tensor ``lr`` is read on the device at each step: a
    CUDA graph's (bench.engine.hardware.cuda_graphs), filled before each replay, where a float would stay the captured one."""
    if isinstance(lr, torch.Tensor):
        torch._foreach_mul_(updates, lr)
        torch._foreach_sub_(params, updates)
    else:
        torch._foreach_add_(params, updates, alpha=-lr)


def build_optimizer(parameters, config: TrainConfig) -> torch.optim.Optimizer:
    parameters = list(parameters)
    on_cuda = all(p.is_cuda for p in parameters)
    betas = (config.beta1, config.beta2)
    if config.optimizer == "lamb":
        # auto as PyTorch's own optimizers choose: on CUDA a launch per parameter and op costs more than the update;
        # on a CPU the loop was the faster from the small preset up (results/reference/lamb-foreach-cpu.md)
        foreach = on_cuda if config.lamb_impl == "auto" else config.lamb_impl == "foreach"
        return Lamb(parameters, lr=config.lr, betas=betas, eps=config.eps, weight_decay=config.weight_decay,
                    min_trust=config.min_trust, foreach=foreach)
    # on CUDA one fused kernel for the whole update; elsewhere PyTorch's default for the device (on a CPU, its loop);
    # capturable for a CUDA graph: the step count on the device, the learning rate read from a tensor
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, betas=betas, eps=config.eps,
                                  weight_decay=config.weight_decay, fused=True if on_cuda else None,
                                  capturable=config.cuda_graphs)
    optimizer.register_load_state_dict_pre_hook(_keep_implementation)
    return optimizer


def implementation(optimizer: torch.optim.Optimizer) -> str:
    """Which update runs, as ``bench speed`` reports it: "lamb foreach", "lamb loop", "adamw fused", "adamw"."""
    if isinstance(optimizer, Lamb):
        return "lamb foreach" if optimizer.foreach else "lamb loop"
    return "adamw fused" if optimizer.param_groups[0]["fused"] else "adamw"


def _keep_implementation(optimizer: torch.optim.Optimizer, state_dict: dict) -> dict:
    """A checkpoint's groups carry the implementation they were saved with (fused on CUDA, PyTorch's default on a
    CPU, capturable under CUDA graphs) and would replace the one chosen for these parameters when it loads: a run
    resumed on another device or without graphs keeps its own. Applied before loading, so that the step counts move
    where this update wants them."""
    flags = ("foreach", "fused", "capturable")
    groups = [{**saved, **{k: mine[k] for k in flags}}
              for mine, saved in zip(optimizer.param_groups, state_dict["param_groups"], strict=True)]
    return {**state_dict, "param_groups": groups}


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
