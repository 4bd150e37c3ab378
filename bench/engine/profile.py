"""``bench speed --profile``: where a training step's time goes, from torch.profiler.

A few training steps (after the timed ones, so warmed up) run under ``torch.profiler.profile`` inside one label
(:data:`STEPS_LABEL`), and every operator is put in one category by the labels around it, the innermost first:

* **recurrent**: an operator named like a recurrent one (``lstm`` or ``rnn`` in its name: ``aten::lstm``,
  ``aten::mkldnn_rnn_layer``, ``aten::_cudnn_rnn``, their autograd nodes such as ``MkldnnRnnLayerBackward0`` or
  ``CudnnRnnBackward0``) and everything it calls; on CUDA also a kernel so named (cuDNN's RNN kernels);
* **attention**: inside the :data:`~bench.models.common.ATTENTION_LABEL` the models put around their attention
  module's forward (the SHA-RNN's SingleHeadAttention, the Transformer's CausalSelfAttention, projections
  included);
* **forward**: the rest of :data:`~bench.engine.step.FORWARD_LABEL` (the model and the loss);
* **backward**: inside an autograd node (``autograd::engine::evaluate_function: ...``), unless the forward
  operator that made the node was recurrent or attention: that node's time counts there. The node and its
  forward operator share a sequence number (the profiler's forward-backward link), per forward thread;
* **optimizer**: inside torch.optim's own labels (``Optimizer.step#Lamb.step``, ``Optimizer.zero_grad#...``),
  which every ``torch.optim.Optimizer`` carries; gradient clipping and the loss scaler are **other**;
* **host gaps** (CUDA only): the steps' wall time when no kernel ran on the GPU;
* **other**: the rest, the Python between operators and the autograd engine's own time on a CPU included.

On a CPU each operator's *self* time (its time less its children's) counts once, so the categories are exclusive
and sum to the profiled steps' time exactly (the label's span). On CUDA the GPU's kernel and copy times count,
each by the CPU operator that launched it (the profiler's correlation): with one stream the kernels do not
overlap and the categories sum to the steps' time too. Compiled parts (``compile=true``) carry no labels (the
compiler would drop them with a warning): their time counts as the rest of the forward and backward. A CUDA
graph's replay hides its operators, so ``--profile`` refuses ``cuda_graphs``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

import torch
from torch.autograd import DeviceType

from bench.engine.step import FORWARD_LABEL
from bench.models.common import ATTENTION_LABEL

CATEGORIES = ("recurrent", "attention", "forward", "backward", "optimizer", "host_gaps", "other")
STEPS_LABEL = "bench::profiled_steps"
RECURRENT = re.compile(r"lstm|rnn", re.IGNORECASE)
BACKWARD_NODE = "autograd::engine::evaluate_function: "
OPTIMIZER = "Optimizer."  # torch.optim's labels: "Optimizer.step#Lamb.step", "Optimizer.zero_grad#Lamb.zero_grad"


class Span(Protocol):
    start: float
    end: float


class Event(Protocol):
    """What is read of the profiler's events (``torch.autograd.profiler_util.FunctionEvent``); times in µs."""

    id: int
    name: str
    thread: int
    fwd_thread: int
    sequence_nr: int
    device_type: DeviceType
    linked_correlation_id: int
    is_async: bool
    time_range: Span
    cpu_parent: Event | None
    cpu_children: list[Event]
    self_cpu_time_total: float


@dataclass(frozen=True)
class StepProfile:
    """Seconds per step in each category (``host_gaps`` None on a CPU) and the measured seconds per profiled step."""

    device: str
    steps: int
    step_seconds: float
    seconds: dict[str, float | None]

    @property
    def step_over_recurrent(self) -> float | None:
        recurrent = self.seconds["recurrent"]
        return self.step_seconds / recurrent if recurrent else None

    def to_json(self) -> dict:
        return {"device": self.device, "steps": self.steps, "step_seconds": self.step_seconds,
                "seconds": self.seconds, "step_over_recurrent": self.step_over_recurrent}


def profile_steps(step: Callable[[], None], device: torch.device, steps: int) -> StepProfile:
    """``steps`` calls of ``step`` under torch.profiler, their time split into :data:`CATEGORIES`."""
    cuda = device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize(device)
    with torch.profiler.profile(activities=activities) as profiler:
        with torch.profiler.record_function(STEPS_LABEL):
            for _ in range(steps):
                step()
            if cuda:  # inside the label: its span ends when the GPU's work does
                torch.cuda.synchronize(device)
    events = list(profiler.events())
    split = gpu_split(events) if cuda else cpu_split(events)
    # the steps' time is the label's span, on the profiler's clock as the parts are: a clock read around the label
    # would also count whatever delayed this process between it and the label's edges (a busy machine)
    span = _root(events).time_range
    return StepProfile(device.type, steps, (span.end - span.start) / 1e6 / steps,
                       {k: None if v is None else v / steps for k, v in split.items()})


def cpu_split(events: Iterable[Event]) -> dict[str, float | None]:
    """Seconds of the steps' label in each category: each operator's self time under it, counted once."""
    events = list(events)
    root = _root(events)
    categorize = Categorizer(events)
    totals: dict[str, float | None] = {c: 0.0 for c in CATEGORIES}
    totals["host_gaps"] = None
    pending = [root]
    while pending:
        event = pending.pop()
        totals[categorize(event)] += event.self_cpu_time_total / 1e6
        pending.extend(event.cpu_children)
    return totals


def gpu_split(events: Iterable[Event]) -> dict[str, float | None]:
    """Seconds of the GPU's kernels and copies in the steps' label, each in its launching operator's category,
    and the host gaps: the label's span less the union of those intervals."""
    events = list(events)
    root = _root(events)
    categorize = Categorizer(events)
    launchers = {e.id: e for e in events if _on_cpu(e) and e.linked_correlation_id == 0}
    totals: dict[str, float | None] = {c: 0.0 for c in CATEGORIES}
    intervals = []
    for kernel in events:
        if kernel.device_type != DeviceType.CUDA:
            continue
        start = max(kernel.time_range.start, root.time_range.start)
        end = min(kernel.time_range.end, root.time_range.end)
        if end <= start:
            continue
        launcher = launchers.get(kernel.linked_correlation_id) if kernel.linked_correlation_id > 0 else None
        category = ("recurrent" if RECURRENT.search(kernel.name)
                    else categorize(launcher) if launcher is not None else "other")
        totals[category] += (end - start) / 1e6
        intervals.append((start, end))
    totals["host_gaps"] = (root.time_range.end - root.time_range.start - _union(intervals)) / 1e6
    return totals


class Categorizer:
    """The category of a CPU event: the first decisive label from the event out through its parents."""

    def __init__(self, events: list[Event]):
        self.known: dict[int, str] = {}
        # the category of the forward operator behind each autograd node: (forward thread, sequence number)
        self.forward: dict[tuple[int, int], str] = {}
        for event in events:
            if _on_cpu(event) and event.sequence_nr >= 0 and not _in_backward(event):
                self.forward.setdefault((event.thread, event.sequence_nr), self(event))

    def __call__(self, event: Event) -> str:
        chain = []
        node: Event | None = event
        while node is not None and id(node) not in self.known:
            chain.append(node)
            node = node.cpu_parent
        found = self.known[id(node)] if node is not None else "other"
        for link in reversed(chain):  # outermost first, so that an inner decisive label wins
            found = self._decisive(link) or found
            self.known[id(link)] = found
        return found

    def _decisive(self, event: Event) -> str | None:
        name = event.name
        if RECURRENT.search(name):
            return "recurrent"
        if name == ATTENTION_LABEL:
            return "attention"
        if name.startswith(BACKWARD_NODE):
            made_by = self.forward.get((event.fwd_thread, event.sequence_nr))
            return made_by if made_by in ("recurrent", "attention") else "backward"
        if name.startswith(OPTIMIZER):
            return "optimizer"
        if name == FORWARD_LABEL:
            return "forward"
        return None


def _in_backward(event: Event) -> bool:
    node: Event | None = event
    while node is not None:
        if node.name.startswith(BACKWARD_NODE):
            return True
        node = node.cpu_parent
    return False


def _on_cpu(event: Event) -> bool:
    return event.device_type == DeviceType.CPU and not event.is_async


def _root(events: list[Event]) -> Event:
    return next(e for e in events if e.name == STEPS_LABEL and _on_cpu(e))


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length covered by the intervals, overlaps counted once."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered
