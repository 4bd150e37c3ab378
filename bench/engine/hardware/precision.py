"""The precision policy: what arithmetic each part of a model actually runs in, decided once per run and device.

The ``precision`` setting asks for a mode; :func:`plan_precision` decides what runs:

==========  =========================================  ==================================================
setting     on a CPU                                   on CUDA
==========  =========================================  ==================================================
float32     float32                                    float32 (TF32 matrix products)
bfloat16    bf16 autocast; LSTMs in bf16 where this    bf16 autocast; LSTMs in float32 (TF32)
            CPU's oneDNN runs them, else float32
float16     fp16 autocast and a loss scaler; LSTMs in  fp16 autocast and a loss scaler; cuDNN's float16
            fp16 where this CPU runs them, else fp32   LSTMs (the reference's apex O1 recipe)
auto        float32                                    float16 for a model with LSTMs, else bfloat16
==========  =========================================  ==================================================

"LSTMs" is every recurrent layer of the model (any ``nn.RNNBase``: LSTM, GRU, RNN; "RNNs" in what a run records),
whatever family holds it. :func:`plan_precision` is a pure function of the settings, the device and whether the
model has recurrent layers: it touches no model. Each recurrent layer was made to follow the plan's rule once,
where the model was built (bench.models.recurrent), so that inside :meth:`Precision.active` with ``rnn_float32``
it runs in float32 outside autocast; no family has to call a helper for it.

Why LSTMs are treated apart: PyTorch's autocast wrapper of cuDNN's RNNs casts them to float16 whatever dtype
autocast was given, so under bf16 autocast an LSTM would run in float16 without the loss scaling float16 needs;
and oneDNN runs bf16 or fp16 LSTMs only on CPUs with the instructions for them (AVX-512 BF16, AVX-512 FP16), a
traceback elsewhere. ``rnn_precision=autocast`` lets autocast decide anyway (to reproduce a run made so);
``float32`` runs LSTMs in float32 under any mode. What ran is observed, not assumed: :class:`DtypeWatch` records
the dtypes at each module family's inputs, weights and outputs during a step.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch
import torch.nn as nn
from bench.errors import BenchError
from bench.models.recurrent import rnns_in_float32

DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """What a run runs in: ``autocast`` (None: float32), whether the recurrent layers leave it for float32, loss
    scaling."""

    autocast: torch.dtype | None
    rnn_float32: bool
    loss_scaling: bool

    @property
    def name(self) -> str:
        """As results and evaluation layouts record it, e.g. "bfloat16 autocast, RNNs float32" (results written
        before recurrent layers other than LSTMs were named say "LSTMs float32", the same plan)."""
        if self.autocast is None:
            return "float32"
        text = f"{dtype_name(self.autocast)} autocast"
        text += ", RNNs float32" if self.rnn_float32 else ""
        return text + (", loss scaling" if self.loss_scaling else "")

    @contextlib.contextmanager
    def active(self, device: torch.device):
        """Autocast as planned, with the recurrent layers' own rule."""
        if self.autocast is None:
            yield
            return
        with rnns_in_float32(self.rnn_float32), torch.autocast(device_type=device.type, dtype=self.autocast):
            yield

    def grad_scaler(self, device: torch.device) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(device.type) if self.loss_scaling else None


FLOAT32 = Precision(None, False, False)


def dtype_name(dtype: torch.dtype) -> str:
    """"bfloat16" for torch.bfloat16."""
    return str(dtype).replace("torch.", "")


def auto_precision(device_type: str, with_rnn: bool) -> str:
    """What ``precision = auto`` means, decided here only: float32 off CUDA; on CUDA float16 for a model with
    recurrent modules (cuDNN's float16 RNNs, the reference's recipe), else bfloat16."""
    if device_type != "cuda":
        return "float32"
    return "float16" if with_rnn else "bfloat16"


def plan_precision(setting: str, rnn_setting: str, device: torch.device, with_rnn: bool) -> Precision:
    """The precision a run on ``device`` runs in (see the module's table), for a model with recurrent layers or
    without (``has_rnn(model)``); refuses what cannot run here. Decides only: it touches no model."""
    if setting == "auto":
        setting = auto_precision(device.type, with_rnn)
    dtype = DTYPES[setting]
    if dtype is None:
        return FLOAT32
    native = (device.type == "cuda" and dtype == torch.float16) or (device.type == "cpu" and cpu_lstm_runs_in(dtype))
    if rnn_setting == "autocast" and with_rnn and device.type == "cpu" and not native:
        raise BenchError(f"this CPU cannot run recurrent layers (LSTMs) in {setting} (oneDNN needs AVX-512 "
                         f"{'BF16' if dtype == torch.bfloat16 else 'FP16'}); set rnn_precision=auto (float32 recurrent "
                         f"layers)")
    rnn_float32 = with_rnn and (rnn_setting == "float32" or (rnn_setting == "auto" and not native))
    return Precision(dtype, rnn_float32, dtype == torch.float16)


def check_precision(setting: str, rnn_setting: str, device_name: str) -> None:
    """At resolution (before any folder is made): refuse a precision this machine cannot run, where the device is
    this machine's CPU."""
    from bench.engine.hardware.device import device_here

    if rnn_setting != "autocast" or setting in ("auto", "float32"):
        return
    device = device_here(device_name)
    if device is None:
        return  # another machine's device: checked where the run executes
    plan_precision(setting, rnn_setting, device, with_rnn=True)


@functools.cache
def cpu_lstm_runs_in(dtype: torch.dtype) -> bool:
    """Whether this CPU runs an LSTM under autocast to ``dtype``, forward and backward (tried once, on a tiny one:
    oneDNN refuses at run time where the instructions are missing). The global generator is left as it was: a
    process's first plan would otherwise draw other dropout masks than its later ones."""
    with torch.random.fork_rng(devices=[]):
        lstm = nn.LSTM(8, 8, batch_first=True)
        x = torch.randn(2, 3, 8, requires_grad=True)
        try:
            with torch.autocast("cpu", dtype=dtype):
                out, _ = lstm(x)
            out.float().sum().backward()
        except RuntimeError:
            return False
    return True


class DtypeWatch:
    """Records, per module family (the class of each module that holds parameters), the dtypes seen at its inputs,
    weights and outputs while active: what actually ran, not what was planned."""

    def __init__(self, model: nn.Module):
        self.seen: dict[str, dict[str, set[str]]] = {}
        self._handles = [module.register_forward_hook(self._record) for module in model.modules()
                         if module is not model and any(True for _ in module.parameters(recurse=False))]

    def _record(self, module: nn.Module, inputs, output) -> None:
        family = self.seen.setdefault(type(module).__name__, {"inputs": set(), "weights": set(), "outputs": set()})
        family["inputs"].update(_dtypes(inputs))
        family["weights"].update(dtype_name(p.dtype) for p in module.parameters(recurse=False))
        family["outputs"].update(_dtypes(output))

    def close(self) -> dict[str, dict[str, list[str]]]:
        for handle in self._handles:
            handle.remove()
        return {family: {k: sorted(v) for k, v in kinds.items()} for family, kinds in sorted(self.seen.items())}


def _dtypes(value) -> set[str]:
    """The floating dtypes of the tensors in a (nested) module input or output."""
    if isinstance(value, torch.Tensor):
        return {dtype_name(value.dtype)} if value.is_floating_point() else set()
    if isinstance(value, (tuple, list)):
        return set().union(*(_dtypes(v) for v in value)) if value else set()
    return set()
