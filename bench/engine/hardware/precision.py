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

"LSTMs" is every recurrent module of the model (any ``nn.RNNBase``: LSTM, GRU, RNN), whatever family holds it:
:func:`plan_precision` wraps each one's forward, so that inside :meth:`Precision.active` with ``lstm_float32`` it
runs in float32 outside autocast; no family has to call a helper for it.

Why LSTMs are treated apart: PyTorch's autocast wrapper of cuDNN's RNNs casts them to float16 whatever dtype
autocast was given, so under bf16 autocast an LSTM would run in float16 without the loss scaling float16 needs;
and oneDNN runs bf16 or fp16 LSTMs only on CPUs with the instructions for them (AVX-512 BF16, AVX-512 FP16), a
traceback elsewhere. ``lstm_precision=autocast`` lets autocast decide anyway (to reproduce a run made so);
``float32`` runs LSTMs in float32 under any mode. What ran is observed, not assumed: :class:`DtypeWatch` records
the dtypes at each module family's inputs, weights and outputs during a step.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.utils.rnn import PackedSequence

from bench.errors import BenchError

DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """What a run runs in: ``autocast`` (None: float32), whether LSTMs leave it for float32, loss scaling."""

    autocast: torch.dtype | None
    lstm_float32: bool
    loss_scaling: bool

    @property
    def name(self) -> str:
        """As results and evaluation layouts record it, e.g. "bfloat16 autocast, LSTMs float32"."""
        if self.autocast is None:
            return "float32"
        text = f"{dtype_name(self.autocast)} autocast"
        text += ", LSTMs float32" if self.lstm_float32 else ""
        return text + (", loss scaling" if self.loss_scaling else "")

    @contextlib.contextmanager
    def active(self, device: torch.device):
        """Autocast as planned, with the LSTMs' own rule."""
        if self.autocast is None:
            yield
            return
        token = _RNNS_IN_FLOAT32.set(self.lstm_float32)
        try:
            with torch.autocast(device_type=device.type, dtype=self.autocast):
                yield
        finally:
            _RNNS_IN_FLOAT32.reset(token)

    def grad_scaler(self, device: torch.device) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(device.type) if self.loss_scaling else None


FLOAT32 = Precision(None, False, False)


def dtype_name(dtype: torch.dtype) -> str:
    """"bfloat16" for torch.bfloat16."""
    return str(dtype).replace("torch.", "")


def has_rnn(model: nn.Module) -> bool:
    """Whether ``model`` has modules the policy treats apart: any recurrent module (``nn.RNNBase``)."""
    return any(isinstance(m, nn.RNNBase) for m in model.modules())


def auto_precision(device_type: str, with_rnn: bool) -> str:
    """What ``precision = auto`` means, decided here only: float32 off CUDA; on CUDA float16 for a model with
    recurrent modules (cuDNN's float16 RNNs, the reference's recipe), else bfloat16."""
    if device_type != "cuda":
        return "float32"
    return "float16" if with_rnn else "bfloat16"


def plan_precision(setting: str, lstm_setting: str, device: torch.device, model: nn.Module) -> Precision:
    """The precision a run on ``device`` runs in (see the module's table); refuses what cannot run here. Every
    recurrent module of ``model`` is made to follow the plan's rule for them (:func:`follow_rnn_rule`)."""
    follow_rnn_rule(model)
    if setting == "auto":
        setting = auto_precision(device.type, has_rnn(model))
    dtype = DTYPES[setting]
    if dtype is None:
        return FLOAT32
    native = (device.type == "cuda" and dtype == torch.float16) or (device.type == "cpu" and cpu_lstm_runs_in(dtype))
    if lstm_setting == "autocast" and has_rnn(model) and device.type == "cpu" and not native:
        raise BenchError(f"this CPU cannot run LSTMs in {setting} (oneDNN needs AVX-512 "
                         f"{'BF16' if dtype == torch.bfloat16 else 'FP16'}); set lstm_precision=auto (float32 LSTMs)")
    lstm_float32 = has_rnn(model) and (lstm_setting == "float32" or (lstm_setting == "auto" and not native))
    return Precision(dtype, lstm_float32, dtype == torch.float16)


def check_precision(setting: str, lstm_setting: str, device_name: str) -> None:
    """At resolution (before any folder is made): refuse a precision this machine cannot run, where the device is
    this machine's CPU."""
    from bench.engine.hardware.device import device_here

    if lstm_setting != "autocast" or setting in ("auto", "float32"):
        return
    device = device_here(device_name)
    if device is None:
        return  # another machine's device: checked where the run executes
    plan_precision(setting, lstm_setting, device, nn.LSTM(1, 1))


# Set by Precision.active: the recurrent modules leave autocast and run in float32.
_RNNS_IN_FLOAT32: contextvars.ContextVar[bool] = contextvars.ContextVar("rnns_in_float32", default=False)


def follow_rnn_rule(model: nn.Module) -> None:
    """Make every recurrent module of ``model`` follow the plan's rule (once): its class becomes the subclass
    :func:`_following` makes of it, whose forward, inside an active plan with ``lstm_float32`` and under autocast,
    runs in float32 with autocast off (its input and state cast up; its weights are float32 parameters). Its name,
    state_dict and copies are unchanged; outside such a plan it runs exactly as before."""
    for rnn in model.modules():
        if isinstance(rnn, nn.RNNBase) and type(rnn) not in _FOLLOWING.values():
            rnn.__class__ = _following(type(rnn))


_FOLLOWING: dict[type, type] = {}  # a recurrent module class -> its subclass that follows the plan's rule


def _following(cls: type) -> type:
    if cls not in _FOLLOWING:
        def forward(self, input, hx=None):
            data = input.data if isinstance(input, PackedSequence) else input
            device = data.device.type
            if not (_RNNS_IN_FLOAT32.get() and torch.is_autocast_enabled(device)):
                return cls.forward(self, input, hx)
            with torch.autocast(device, enabled=False):
                return cls.forward(self, input.float(), _float(hx))

        _FOLLOWING[cls] = type(cls.__name__, (cls,), {"forward": forward, "__doc__": cls.__doc__})
    return _FOLLOWING[cls]


def _float(state):
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.float()
    return type(state)(_float(s) for s in state)


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
