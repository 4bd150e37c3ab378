"""The recurrent layers of any model (every ``nn.RNNBase``: LSTM, GRU, RNN) and the precision plan's rule for them.

Under bf16 or fp16 autocast a plan may keep the recurrent layers in float32 (bench.engine.hardware.precision says
when and why). :func:`follow_rnn_rule`, applied once where a model is built (``bench.models.build_model``), gives
each recurrent layer a forward that reads the rule; :func:`rnns_in_float32` sets it while a plan is active. No
family calls a helper for it, and a layer outside an active plan runs exactly as before.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
import torch.nn as nn
from torch.nn.utils.rnn import PackedSequence

# Set while a plan that keeps them in float32 is active: the recurrent layers leave autocast and run in float32.
_RNNS_IN_FLOAT32: contextvars.ContextVar[bool] = contextvars.ContextVar("rnns_in_float32", default=False)


def has_rnn(model: nn.Module) -> bool:
    """Whether ``model`` has layers the precision policy treats apart: any recurrent one (``nn.RNNBase``)."""
    return any(isinstance(m, nn.RNNBase) for m in model.modules())


@contextlib.contextmanager
def rnns_in_float32(on: bool):
    """While the block runs, recurrent layers that follow the rule run in float32 under autocast (``on``) or as
    autocast decides."""
    token = _RNNS_IN_FLOAT32.set(on)
    try:
        yield
    finally:
        _RNNS_IN_FLOAT32.reset(token)


def follow_rnn_rule(model: nn.Module) -> nn.Module:
    """Make every recurrent layer of ``model`` follow the rule (once): its class becomes the subclass
    :func:`_following` makes of it, whose forward, inside :func:`rnns_in_float32` and under autocast, runs in
    float32 with autocast off (its input and state cast up; its weights are float32 parameters). Its name,
    state_dict and copies are unchanged. Returns ``model``."""
    for rnn in model.modules():
        if isinstance(rnn, nn.RNNBase) and type(rnn) not in _FOLLOWING.values():
            rnn.__class__ = _following(type(rnn))
    return model


_FOLLOWING: dict[type, type] = {}  # a recurrent layer's class -> its subclass that follows the rule


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
