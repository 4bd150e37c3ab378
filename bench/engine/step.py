"""One training step, shared by the trainer and ``bench speed``: the model on its device, the loss, the update.

:class:`TrainingStep` holds the forward pass and the loss in one module, so that
DistributedDataParallel sees every use of the (tied) weights when a run spans
several processes.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.engine.hardware.device import flatten_rnns
from bench.engine.learning import ZeroGradients
from bench.engine.hardware.precision import Precision
from bench.engine.resolve import ResolvedRun
from bench.errors import BenchError
from bench.models import build_model
from bench.models.common import LanguageModel, State, profiler_label

FORWARD_LABEL = "bench::forward"  # the forward pass and the loss, for `bench speed --profile`


def build_training_model(resolved: ResolvedRun, device: torch.device) -> LanguageModel:
    """The run's model on its device, LSTM weights flattened for cuDNN; with ``compile``, the parts the
    model names compiled (``nn.Module.compile`` keeps the state_dict names)."""
    model = build_model(resolved.spec.model, resolved.model).to(device)
    flatten_rnns(model)
    if resolved.train.compile:
        model.compile_parts()
    return model


def forward_loss(model: LanguageModel, x: torch.Tensor, y: torch.Tensor, state: State | None,
                 device: torch.device, precision: Precision) -> tuple[torch.Tensor, State]:
    """Mean cross-entropy (nats per token) of predicting ``y`` from ``x``, and the state after ``x``."""
    with precision.active(device):
        hidden, new_state = model(x, state)
        logits = model.logits(hidden)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
    return loss, new_state


def apply_gradients(model: LanguageModel, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip: float,
                    scaler: torch.amp.GradScaler | None = None,
                    zero_gradients: ZeroGradients | None = None) -> torch.Tensor | None:
    """Backward, clip and update; with a loss scaler (float16), the loss is scaled for the backward pass and the
    gradients unscaled before clipping. Returns the scaler's flag of this step on the device (1.0 when it skipped
    the update: inf or NaN gradients), None without a scaler."""
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    if zero_gradients is not None:
        zero_gradients.update()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    if scaler is None:
        optimizer.step()
        skipped = None
    else:
        # unscale_'s inf checks, which scaler.step consults to skip the update (update() forgets them): a flag
        # that stays on the device, where comparing get_scale() before and after would wait for it every step
        skipped = torch.stack(list(scaler._found_inf_per_device(optimizer).values())).amax()
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return skipped


def make_step(step_module: nn.Module, model: LanguageModel, optimizer: torch.optim.Optimizer, clip: float,
              cuda_graphs: bool, device: torch.device, scaler: torch.amp.GradScaler | None = None,
              zero_gradients: ZeroGradients | None = None):
    """One training step as a function ``(x, y, state) -> (mean loss, new state, skip flag or None)``: forward
    (``step_module``, a :class:`TrainingStep` or its DistributedDataParallel), backward and update; with
    ``cuda_graphs``, replayed from a CUDA graph once its shapes repeat (bench.engine.hardware.cuda_graphs)."""
    if cuda_graphs:
        from bench.engine.hardware.cuda_graphs import GraphedStep, float16_refusal

        if scaler is not None:
            raise BenchError(float16_refusal())
        step = GraphedStep(step_module, model, optimizer,
                           lambda loss: apply_gradients(model, optimizer, loss, clip, scaler, zero_gradients), device)
    else:
        def step(x: torch.Tensor, y: torch.Tensor, state: State | None):
            loss, new_state = step_module(x, y, state)
            return loss, new_state, apply_gradients(model, optimizer, loss, clip, scaler, zero_gradients)

    return CompileClock(step) if model.compiled else step


def compile_seconds() -> float:
    """Seconds torch.compile has spent compiling in this process so far, forward and backward graphs (its own
    accounting); 0 while nothing imported it (importing it takes seconds)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return utils.calculate_time_spent().get("total_wall_time", 0.0) if utils is not None else 0.0


class CompileClock:
    """A step function that also counts the seconds torch.compile compiled inside its calls (``seconds``): the
    compiled parts' first steps, reported apart from the steady state (``training.compile_seconds``)."""

    def __init__(self, step):
        self.step, self.seconds = step, 0.0

    def __call__(self, *args):
        before = compile_seconds()
        out = self.step(*args)
        self.seconds += compile_seconds() - before
        return out


class TrainingStep(nn.Module):
    """``forward(x, y, state) -> (mean loss, new state)`` of a model, as one module."""

    def __init__(self, model: LanguageModel, device: torch.device, precision: Precision):
        super().__init__()
        self.model = model
        self.device = device
        self.precision = precision

    def forward(self, x: torch.Tensor, y: torch.Tensor, state: State | None) -> tuple[torch.Tensor, State]:
        with profiler_label(FORWARD_LABEL):
            return forward_loss(self.model, x, y, state, self.device, self.precision)
