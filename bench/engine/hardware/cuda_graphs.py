"""CUDA graphs (``cuda_graphs=true``): the whole training step captured once, then replayed with one launch.

A step of the ``paper`` SHA-RNN launches hundreds of small kernels from Python (LAMB's loop alone took 46.6 ms of
CPU time for 3.3 ms of GPU work on an H100, ``results/reference/speed-h100.md``); a CUDA graph records them once
and the GPU replays them without the host. A graph replays fixed addresses and shapes, so here:

* **what is captured** is the whole step: forward, loss, backward, gradient clipping, the zero-gradient counts
  (``bench.engine.learning``) and the optimizer's update. Parameters, gradients' memory and optimizer state keep
  their addresses (every update is in place; AdamW is built ``capturable``, its step count on the device).
* **what is static**: the segment's input and target ids, the carried state (LSTM ``(h, c)``, the SHA-RNN's
  memory), which the graph overwrites with the state after the segment, and each parameter group's learning rate,
  a device tensor filled before each replay (a Python float would stay the captured value).
* **when**: a step runs eagerly until its shapes (segment and state) have repeated :data:`EAGER_STEPS` times
  (optimizer state created, cuDNN's autotuning and lazy initialisation done), then it is captured, and replayed for
  every later step of those shapes. A step of other shapes (an epoch's first, while the SHA-RNN's memory fills, an
  epoch's shorter last segment) runs eagerly, as without graphs; there is one graph.
* the loss returned is a copy: the graph overwrites its own at the next replay, and the trainer keeps each step's
  loss on the device until a log line reads them (``bench.engine.window``); so is a loss scaler's skip flag.
* float16's loss scaler (a GradScaler) keeps its scale, growth count and inf checks in device tensors, and the
  optimizers skip an update on the device (``_step_supports_amp_scaling``: LAMB, fused AdamW), so a graph can hold
  a float16 step, and :class:`GraphedStep` takes one. A run does not capture one until ``tests/test_cuda.py`` has seen
  a replayed float16 step compute what eager steps do on a GPU: :func:`check_cuda_graphs` refuses it till then.
* dropout masks are drawn inside the graph from the same generator (PyTorch's graph-safe RNG), not necessarily
  the masks an eager step would draw; without dropout a replayed step computes what the eager one does, to rounding.
* memory: the graph keeps its own pool, a step's activations, for the whole run; an eager step of other shapes
  takes as much again from the ordinary one.

Refused at resolution in one line (:func:`check_cuda_graphs`), and again where a resolved run executes
(``bench.engine.step.make_step``, :class:`GraphedStep`): seq_jitter (a new segment length each step), float16
(not yet proven on a GPU, above), several processes, a device that is not CUDA.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from bench.engine.hardware.device import device_here
from bench.engine.hardware.distributed import Ranks
from bench.engine.hardware.precision import auto_precision
from bench.errors import BenchError
from bench.models.common import State

EAGER_STEPS = 2  # eager steps of the captured shapes before the capture
JITTER = ("cuda_graphs replays steps of one shape, but seq_jitter draws a new segment length each step; set "
          "seq_jitter=false (or cuda_graphs=false)")
Flag = torch.Tensor | None  # a loss scaler's skip flag of the step (1.0: update skipped), None without one
PROCESSES = "cuda_graphs does not capture a run on several processes (DistributedDataParallel); set cuda_graphs=false"


def float16_refusal(why: str = "") -> str:
    return (f"cuda_graphs with float16's loss scaler is not yet proven on a GPU (tests/test_cuda.py){why}; set "
            f"precision=bfloat16 or float32 (or cuda_graphs=false)")


def _not_cuda(device_type: str) -> str:
    return f"cuda_graphs needs a CUDA device; this run's device is {device_type} (set cuda_graphs=false)"


def check_cuda_graphs(train, has_rnn: bool) -> None:
    """At resolution: refuse ``cuda_graphs`` where it cannot run (``train`` is a TrainConfig; ``has_rnn``: the
    model has cuDNN RNNs, which precision auto runs in float16 on CUDA)."""
    if not train.cuda_graphs:
        return
    if train.seq_jitter:
        raise BenchError(JITTER)
    if train.precision == "float16":
        raise BenchError(float16_refusal())
    if Ranks.from_env().distributed:
        raise BenchError(PROCESSES)
    device = device_here(train.device)
    if device is None:
        return  # another machine's device: checked where the run executes
    if device.type != "cuda":
        raise BenchError(_not_cuda(device.type))
    if train.precision == "auto" and auto_precision(device.type, has_rnn) == "float16":
        raise BenchError(float16_refusal(" (precision auto is float16 on CUDA for a model with LSTMs)"))


def _leaves(state: State) -> list[torch.Tensor]:
    if state is None:
        return []
    if isinstance(state, torch.Tensor):
        return [state]
    return [t for s in state for t in _leaves(s)]


def _shapes(x: torch.Tensor, y: torch.Tensor, state: State) -> tuple:
    """What a graph fixes: the segment's shape and every state tensor's (a None in the state is part of it)."""

    def of(s):
        if s is None or isinstance(s, torch.Tensor):
            return None if s is None else (tuple(s.shape), s.dtype)
        return tuple(of(t) for t in s)

    return tuple(x.shape), tuple(y.shape), of(state)


def _clone(state: State) -> State:
    if state is None or isinstance(state, torch.Tensor):
        return None if state is None else state.clone()
    return type(state)(_clone(s) for s in state)


class GraphedStep:
    """``(x, y, state) -> (loss, new state, skip flag or None)``: one training step, replayed from a CUDA graph
    where its shapes are the captured ones (see the module's description); the same interface as
    ``bench.engine.step.make_step``'s eager step."""

    def __init__(self, step_module: torch.nn.Module, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 update: Callable[[torch.Tensor], torch.Tensor | None], device: torch.device):
        """``update(loss)``: backward, clipping and the optimizer's step, returning a loss scaler's skip flag
        (``bench.engine.step.apply_gradients``), handed in so that this module does not import the step it
        replays."""
        from torch.nn.parallel import DistributedDataParallel

        if device.type != "cuda":
            raise BenchError(_not_cuda(device.type))
        if isinstance(step_module, DistributedDataParallel):
            raise BenchError(PROCESSES)
        self.step_module, self.model, self.optimizer = step_module, model, optimizer
        self.update = update
        self.graph: torch.cuda.CUDAGraph | None = None
        self.seen, self.repeats = None, 0  # the shapes of the last eager step, and its eager steps in a row

    def __call__(self, x: torch.Tensor, y: torch.Tensor, state: State) -> tuple[torch.Tensor, State, Flag]:
        shapes = _shapes(x, y, state)
        if self.graph is not None and shapes == self.captured:
            return self._replay(x, y, state)
        if self.graph is None and shapes == self.seen and self.repeats >= EAGER_STEPS:
            return self._capture(x, y, state)
        self.repeats = self.repeats + 1 if shapes == self.seen else 1
        self.seen = shapes
        loss, new_state = self.step_module(x, y, state)
        return loss, new_state, self.update(loss)

    def _capture(self, x: torch.Tensor, y: torch.Tensor, state: State) -> tuple[torch.Tensor, State, Flag]:
        self.captured = _shapes(x, y, state)
        self.x, self.y, self.state = x.clone(), y.clone(), _clone(state)
        groups = self.optimizer.param_groups
        rates = [group["lr"] for group in groups]
        self.lrs = [torch.tensor(float(rate), device=x.device) for rate in rates]
        for group, lr in zip(groups, self.lrs):
            group["lr"] = lr  # what the captured update reads: a tensor, filled before each replay
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                loss, new_state = self.step_module(self.x, self.y, self.state)
                skipped = self.update(loss)
                for static, new in zip(_leaves(self.state), _leaves(new_state)):
                    static.copy_(new.detach())  # the next replay starts from the state after this one
                self.loss = loss.detach()
                self.skipped = None if skipped is None else skipped.detach()
        except RuntimeError as exc:  # an operation a graph cannot hold: named in one line, not a traceback
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BenchError(f"the CUDA graph capture of the training step failed ({first}); set "
                             f"cuda_graphs=false") from None
        finally:
            for group, rate in zip(groups, rates):
                group["lr"] = rate  # a float again for the trainer, the log and checkpoints
        self.graph.replay()  # the capture only recorded this step: the replay runs it
        return self._outputs()

    def _replay(self, x: torch.Tensor, y: torch.Tensor, state: State) -> tuple[torch.Tensor, State, Flag]:
        self.x.copy_(x)
        self.y.copy_(y)
        for static, given in zip(_leaves(self.state), _leaves(state)):
            if given.data_ptr() != static.data_ptr():  # the state the last replay left is there already
                static.copy_(given)
        for lr, group in zip(self.lrs, self.optimizer.param_groups):
            lr.fill_(group["lr"])
        self.graph.replay()
        return self._outputs()

    def _outputs(self) -> tuple[torch.Tensor, State, Flag]:
        """Copies of what the next replay overwrites: the loss and the skip flag."""
        return self.loss.clone(), self.state, None if self.skipped is None else self.skipped.clone()
