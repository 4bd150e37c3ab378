"""CUDA graphs (bench.engine.hardware.cuda_graphs), what a CPU can check: when a step is captured and when it is replayed,
the refusals where a resolved run executes, and state a graph replays kept in place. That a replayed step computes
what an eager one does is tests/test_cuda.py's (skipped without CUDA); the refusals at resolution are in
tests/test_resolve_refusals.py."""

import pytest
import torch

from bench.engine.hardware import cuda_graphs
from bench.engine.hardware.cuda_graphs import EAGER_STEPS, GraphedStep
from bench.engine.learning import ZeroGradients
from bench.engine.hardware.precision import FLOAT32
from bench.engine.step import TrainingStep, apply_gradients, make_step
from bench.errors import BenchError
from bench.models import build_model
from bench.models.common import detach_state

SIZES = {"vocab_size": 32, "emsize": 16, "nhid": 32, "nlayers": 2, "dropout": 0.0, "dropouth": 0.0, "dropouti": 0.0,
         "max_memory": 40}


def _graphed(monkeypatch, events: list[str]) -> GraphedStep:
    """A GraphedStep of a tiny SHA-RNN whose capture and replay are recorded and run eagerly (a CPU has no graphs)."""
    model = build_model("sha-rnn", SIZES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = GraphedStep(TrainingStep(model, torch.device("cpu"), FLOAT32), model, optimizer,
                       lambda loss: apply_gradients(model, optimizer, loss, 0.25), torch.device("cuda"))

    def eager(self, x, y, state):
        loss, new_state = self.step_module(x, y, state)
        self.update(loss)
        return loss, new_state, None

    def capture(self, x, y, state):
        events.append("capture")
        self.captured, self.graph = cuda_graphs._shapes(x, y, state), "a graph"
        return eager(self, x, y, state)

    def replay(self, x, y, state):
        events.append("replay")
        return eager(self, x, y, state)

    monkeypatch.setattr(GraphedStep, "_capture", capture)
    monkeypatch.setattr(GraphedStep, "_replay", replay)
    return step


def test_a_step_is_captured_once_its_shapes_repeat_and_replayed_only_for_those_shapes(monkeypatch):
    events = []
    step = _graphed(monkeypatch, events)
    tokens = torch.randint(0, 32, (4, 17))

    def run(state, length=16):
        before = len(events)
        _, new_state, skipped = step(tokens[:, :length], tokens[:, 1:length + 1], state)
        assert skipped is None
        if len(events) == before:
            events.append("eager")
        return detach_state(new_state)

    state = None
    for length in [16] * (3 + EAGER_STEPS) + [8]:  # the memory fills (0, 16, 32 positions), is full (40) for as
        state = run(state, length)  # many steps as a capture waits for, then a shorter segment: other shapes
    assert events == ["eager"] * (3 + EAGER_STEPS + 1)
    for _ in range(EAGER_STEPS + 2):  # the full memory's shapes again: counted from 1, then captured and replayed
        state = run(state)
    assert events[3 + EAGER_STEPS + 1:] == ["eager"] * EAGER_STEPS + ["capture", "replay"]
    state = run(state, length=8)  # an epoch's shorter last segment
    state = None  # a new epoch: the memory fills again, then the captured graph is replayed, not captured again
    for _ in range(4):
        state = run(state)
    assert events[-6:] == ["replay"] + ["eager"] * 4 + ["replay"]

def test_where_a_resolved_run_executes_graphs_are_refused_on_a_cpu_and_with_a_loss_scaler():
    model = build_model("sha-rnn", SIZES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainingStep(model, torch.device("cpu"), FLOAT32)
    with pytest.raises(BenchError, match=r"^cuda_graphs needs a CUDA device; this run's device is cpu"):
        GraphedStep(step, model, optimizer, print, torch.device("cpu"))
    with pytest.raises(BenchError, match=r"^cuda_graphs with float16's loss scaler is not yet proven on a GPU"):
        make_step(step, model, optimizer, 0.25, True, torch.device("cuda"), torch.amp.GradScaler("cpu"))


def test_the_zero_gradient_counts_stay_in_the_tensor_a_graph_captured():
    model = build_model("sha-rnn", SIZES)
    counts = ZeroGradients(model, torch.device("cpu"))
    captured = counts.in_a_row
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    counts.update()
    counts.update()
    assert counts.in_a_row is captured and captured.tolist() == [2] * len(counts.names)
