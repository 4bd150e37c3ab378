"""What ``bench speed`` and a result say about speed: the variant measured, MFU where no peak is known, the
time torch.compile spent compiling, apart from the steady state, the profile of a step, evaluation at its streams
and the batch sweep."""

import json
import math
from dataclasses import dataclass, field

import pytest
import torch
from torch.autograd import DeviceType

import bench.engine.speed as speed
from bench.data.facts import DataFacts
from bench.engine.profile import CATEGORIES, STEPS_LABEL, Categorizer, cpu_split, gpu_split
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.engine.speed import measure_speed
from bench.engine.step import FORWARD_LABEL
from bench.errors import BenchError
from bench.models.common import ATTENTION_LABEL
from tests.test_bad_inputs import call
from tests.test_train import spec

SMALL = ["--set", "emsize=16", "--set", "nhid=32", "--set", "bptt=8", "--set", "batch_size=2", "--set", "threads=1",
         "--set", "eval_chunk=4"]
UNBATCHED = [a for pair in zip(SMALL[::2], SMALL[1::2]) if pair[1] != "batch_size=2" for a in pair]
TOY = {"emsize": 16, "nhid": 32, "bptt": 8, "batch_size": 2, "threads": 1, "eval_chunk": 4, "max_memory": 16}
TRANSFORMER = {"d_model": 16, "nheads": 2, "bptt": 8, "batch_size": 2, "threads": 1}
LABEL = "[" + " ".join(SMALL[1::2]) + "]"  # the --set overrides, as each line of bench speed names them
UNBATCHED_LABEL = "[" + " ".join(UNBATCHED[1::2]) + "]"


def test_bench_speed_shows_the_variant_it_measured_and_that_a_cpu_has_no_known_peak():
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--set", "lamb_impl=foreach",
                           "--set", "precision=bfloat16", "--json"])
    assert code == 0, err
    row = json.loads(out)
    assert (row["optimizer"], row["lamb_impl"], row["cuda_graphs"], row["compile"]) == ("lamb foreach", "foreach",
                                                                                        False, False)
    assert row["precision"].startswith("bfloat16 autocast") and row["mfu"] is None
    assert row["compile_seconds"] == {"train": 0, "eval": 0, "timed": 0}
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--set", "precision=float16"])
    assert code == 0, err
    assert out.startswith("sha-rnn/tiny [emsize=16 ") and ", loss scaling, lamb loop, on cpu" in out.splitlines()[0]
    assert "MFU: no peak known for this cpu (--peak-tflops)" in out


@pytest.fixture()
def eager_compiler(monkeypatch):
    """torch.compile with its eager backend: dynamo traces and times its compilations as with inductor, in
    seconds instead of a minute on a CPU."""
    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module: compile_module(module, backend="eager"))
    torch._dynamo.reset()  # earlier compilations of the same code in this process would count against its limit


def test_compiling_is_reported_apart_from_the_steady_state(eager_compiler, make_toy_corpus, tmp_path):
    settings = {"emsize": 16, "nhid": 32, "bptt": 8, "batch_size": 2, "max_memory": 16, "threads": 1}
    row = measure_speed(RunSpec(overrides={**settings, "compile": True}), DataFacts.vocabulary_only(256), steps=2)
    compiled = row["compile_seconds"]
    assert 0 < compiled["train"] < row["warmup_seconds"]["train"] and compiled["eval"] > 0
    assert compiled["timed"] == 0  # compiled once, in the warm-up: the timed steps replay what was compiled
    data = make_toy_corpus(tmp_path)
    result = train(spec(data, tmp_path / "compiled", compile=True, max_memory=32), show_progress=False)
    assert 0 < result.training.compile_seconds < result.training.seconds
    assert train(spec(data, tmp_path / "eager"), show_progress=False).training.compile_seconds is None


def test_evaluation_is_timed_at_16_and_256_streams_in_the_runs_chunks_with_the_state_carried(monkeypatch):
    seen = []

    def spy(model, x, y, state, *args):
        seen.append((tuple(x.shape), state is None))
        return chunk_nll(model, x, y, state, *args)

    chunk_nll = speed.chunk_nll
    monkeypatch.setattr(speed, "chunk_nll", spy)
    row = measure_speed(RunSpec(overrides=TOY), DataFacts.vocabulary_only(256), steps=2, warmup=1)
    assert list(row["eval"]) == ["16", "256"]
    for streams, measured in row["eval"].items():
        assert (measured["streams"], measured["chunk"], measured["window"]) == (int(streams), 4, None)  # not bptt
        assert measured["over_train"] == pytest.approx(measured["tokens_per_second"] / row["train_tokens_per_second"])
        chunks = measured["chunks_warmup"] + measured["chunks_timed"]
        # a fresh state for each stream count, then carried from chunk to chunk
        assert seen[:chunks] == [((int(streams), 4), True)] + [((int(streams), 4), False)] * (chunks - 1)
        seen = seen[chunks:]
    assert not seen
    windowed = measure_speed(RunSpec(model="transformer", overrides={**TRANSFORMER, "context": 12}),
                             DataFacts.vocabulary_only(256), steps=1, warmup=0, eval_streams=(3,))
    assert [(e["streams"], e["chunk"], e["window"]) for e in windowed["eval"].values()] == [(3, 6, 12)]


def test_bench_speed_prints_evaluation_at_each_stream_count():
    code, out, err = call(["speed", "--steps", "1", "--warmup", "0", *SMALL])
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("eval "))
    assert line.startswith(f"eval {LABEL} at 16 streams: ") and "; at 256: " in line and "x training)" in line
    assert line.endswith("chunks of 4 tokens, state carried")
    code, out, err = call(["speed", "--steps", "1", "--warmup", "0", *SMALL, "--eval-streams", "4", "--json"])
    assert code == 0, err
    assert list(json.loads(out)["eval"]) == ["4"]


def test_a_profiled_step_is_split_into_exclusive_parts_that_sum_to_it():
    row = measure_speed(RunSpec(overrides={**TOY, "attention": "all"}), DataFacts.vocabulary_only(256), steps=2,
                        warmup=1, eval_streams=(), profile=True)
    profile = row["profile"]
    seconds = profile["seconds"]
    assert tuple(seconds) == CATEGORIES and seconds["host_gaps"] is None  # no GPU: no host gaps
    parts = [seconds[c] for c in CATEGORIES if c != "host_gaps"]
    assert all(part > 0 for part in parts)
    # each operator's time once: the parts sum to the steps' span, both on the profiler's clock, however busy the
    # machine (a clock read around the label differed by 27% beside other work)
    assert sum(parts) == pytest.approx(profile["step_seconds"], rel=1e-9)
    assert profile["step_over_recurrent"] == pytest.approx(profile["step_seconds"] / seconds["recurrent"])
    transformer = measure_speed(RunSpec(model="transformer", overrides=TRANSFORMER), DataFacts.vocabulary_only(256),
                                steps=1, warmup=1, eval_streams=(), profile=True)
    assert transformer["profile"]["seconds"]["recurrent"] == 0 and transformer["profile"]["step_over_recurrent"] is None
    assert transformer["profile"]["seconds"]["attention"] > 0


def test_an_autograd_node_counts_where_the_operator_that_made_it_did():
    torch.manual_seed(0)
    lstm, weight = torch.nn.LSTM(8, 8, batch_first=True), torch.randn(8, 8, requires_grad=True)
    optimizer = torch.optim.SGD([weight, *lstm.parameters()], lr=0.1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        with torch.profiler.record_function(STEPS_LABEL):
            with torch.profiler.record_function(FORWARD_LABEL):
                hidden, _ = lstm(torch.randn(2, 4, 8))
                with torch.profiler.record_function(ATTENTION_LABEL):
                    attended = torch.tanh(hidden @ weight)
                loss = attended.exp().sum()
            loss.backward()
            optimizer.step()
    events = list(profiler.events())
    categorize = Categorizer(events)
    nodes = {e.name.split(": ")[-1]: categorize(e) for e in events if e.name.startswith("autograd::engine")}
    assert nodes["TanhBackward0"] == "attention" and nodes["ExpBackward0"] == nodes["SumBackward0"] == "backward"
    assert [c for name, c in nodes.items() if "Rnn" in name or "Lstm" in name] == ["recurrent"]
    assert {categorize(e) for e in events if e.name.startswith("aten::tanh")} == {"attention"}
    assert {categorize(e) for e in events if e.name.startswith("Optimizer.step")} == {"optimizer"}
    split = cpu_split(events)
    root = next(e for e in events if e.name == STEPS_LABEL)
    assert sum(v for v in split.values() if v is not None) == pytest.approx(root.cpu_time_total / 1e6, rel=1e-6)


@dataclass
class Span:
    start: float
    end: float


@dataclass
class FakeEvent:
    """The fields of a profiler event that the split reads."""

    name: str
    start: float
    end: float
    device_type: DeviceType = DeviceType.CPU
    id: int = 0
    linked_correlation_id: int = 0
    cpu_parent: "FakeEvent | None" = None
    thread: int = 1
    fwd_thread: int = 1
    sequence_nr: int = -1
    is_async: bool = False
    cpu_children: list = field(default_factory=list)

    @property
    def time_range(self) -> Span:
        return Span(self.start, self.end)


def test_on_a_gpu_kernels_count_by_their_launching_operator_and_host_gaps_are_the_time_without_one():
    root = FakeEvent(STEPS_LABEL, 0, 100)
    forward = FakeEvent(FORWARD_LABEL, 1, 40, cpu_parent=root)
    matmul = FakeEvent("aten::mm", 2, 3, id=7, cpu_parent=forward, sequence_nr=5)
    node = FakeEvent("autograd::engine::evaluate_function: MmBackward0", 41, 50, id=8, thread=2, sequence_nr=5)
    inner = FakeEvent("aten::mm", 42, 43, id=9, cpu_parent=node, thread=2)
    kernels = [FakeEvent("gemm", 10, 30, DeviceType.CUDA, linked_correlation_id=7),
               FakeEvent("gemm", 20, 40, DeviceType.CUDA, linked_correlation_id=9),  # overlaps the one before
               FakeEvent("RNN_blockPersist_fp_LSTM", 50, 60, DeviceType.CUDA),  # cuDNN's, by its name
               FakeEvent("memcpy", 90, 110, DeviceType.CUDA)]  # launched by no operator; past the steps' end
    split = gpu_split([root, forward, matmul, node, inner, *kernels])
    assert split == {"recurrent": 10e-6, "attention": 0.0, "forward": 20e-6, "backward": 20e-6, "optimizer": 0.0,
                     "host_gaps": 50e-6, "other": 10e-6}  # 100 - the union [10, 40] + [50, 60] + [90, 100]


def test_bench_speed_profile_prints_the_parts_of_a_step():
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--eval-streams", "2", "--profile"])
    assert code == 0, err
    table = out.split("profile of 1 training steps")[1]
    for part in ("recurrent (LSTM)", "attention", "rest of the forward", "rest of the backward", "optimizer",
                 "host gaps", "other", "step / recurrent: "):
        assert part in table
    code, out, err = call(["speed", "--steps", "1", "--warmup", "1", *SMALL, "--eval-streams", "2", "--json"])
    assert code == 0 and json.loads(out)["profile"] is None


def test_a_batch_sweep_measures_each_batch_size_and_marks_the_fastest():
    code, out, err = call(["speed", "--steps", "1", "--warmup", "0", *UNBATCHED, "--batch-sizes", "1,3", "--json"])
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["batch_size"], r["eval"]) for r in rows] == [(1, {}), (3, {})]
    fastest = max(rows, key=lambda r: r["train_tokens_per_second"])
    assert [r["best"] for r in rows] == [r is fastest for r in rows]
    assert all(r["mfu"] is None and r["train_tflops"] > 0 for r in rows)
    code, out, err = call(["speed", "--steps", "1", "--warmup", "0", *UNBATCHED, "--batch-sizes", "1,2",
                           "--peak-tflops", "10"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"sha-rnn/tiny {UNBATCHED_LABEL}: ") and "segments of 8" in lines[0]
    assert [line.split()[0] for line in lines[3:]] == ["1", "2"] and out.count("<- best") == 1
    assert all(line.split()[4].endswith("%") for line in lines[3:])  # MFU from the peak given
    assert lines[1].split()[-1] == "--set"  # each row names the other --set overrides it measured
    assert all(line.endswith(f"  {UNBATCHED_LABEL[1:-1]}") for line in lines[3:])


@pytest.mark.parametrize("option, fragment", [
    (["--batch-sizes", ""], "--batch-sizes is empty"),
    (["--batch-sizes", "16,x"], "'x' is not a positive whole number"),
    (["--batch-sizes", "0"], "'0' is not a positive whole number"),
    (["--batch-sizes", "-4"], "'-4' is not a positive whole number"),
    (["--batch-sizes", "1.5"], "'1.5' is not a positive whole number"),
    (["--batch-sizes", "16,016"], "lists 16 more than once"),
    (["--eval-streams", ""], "--eval-streams is empty"),
    (["--eval-streams", "16,x"], "'x' is not a positive whole number"),
    (["--eval-streams", "16,,0"], "--eval-streams '0' is not a positive whole number"),
    (["--eval-streams", "-4"], "'-4' is not a positive whole number"),
    (["--eval-streams", "1.5"], "'1.5' is not a positive whole number"),
    (["--eval-streams", "16,016"], "lists 16 more than once"),
    (["--batch-sizes", "4", "--profile"], "--profile profiles one batch size"),
    (["--batch-sizes", "4", "--set", "batch_size=2"], "drop --set batch_size"),
    (["--batch-sizes", "4", "--eval-streams", "16"], "measures training only"),
])
def test_bad_lists_and_conflicts_are_refused_in_one_line(option, fragment, one_line_error, cli_here):
    one_line_error(cli_here("speed", "--steps", "1", *option), fragment)


def test_a_cuda_graph_is_not_profiled(monkeypatch):
    import bench.engine.hardware.cuda_graphs as cuda_graphs

    monkeypatch.setattr(cuda_graphs, "check_cuda_graphs", lambda *args: None)  # as on a GPU, where graphs run
    with pytest.raises(BenchError, match="--profile cannot see inside a CUDA graph's replay"):
        measure_speed(RunSpec(overrides={**TOY, "cuda_graphs": True}), DataFacts.vocabulary_only(256), profile=True)


def test_each_measured_line_names_the_set_variant_it_measured():
    from bench.commands.speed import speed_text, sweep_text

    info = measure_speed(RunSpec(overrides={**TOY, "layer_overlap": 2}), DataFacts.vocabulary_only(256), steps=1,
                         warmup=0, eval_streams=(2,))
    label = " [emsize=16 nhid=32 bptt=8 batch_size=2 threads=1 eval_chunk=4 max_memory=16 layer_overlap=2]"
    lines = speed_text(info).splitlines()
    assert [line.startswith(f"{first}{label}") for line, first in zip(lines, ("sha-rnn/tiny", "train", "eval"))] == [
        True] * 3
    plain = speed_text({**info, "settings": {}}).splitlines()  # the preset as it is: nothing to name
    assert plain[0].startswith("sha-rnn/tiny: ") and plain[1].startswith("train: ")
    assert plain[2].startswith("eval at 2 streams: ")
    failed = {"batch_size": 4, "settings": {**info["settings"], "batch_size": 4}, "error": "out of memory"}
    rows = sweep_text([{**info, "best": True}, {**failed, "best": False}]).splitlines()
    assert rows[0].startswith("sha-rnn/tiny [emsize=16 nhid=32 bptt=8 threads=1 ")  # the sweep sets the batch
    assert [row.split()[-1] for row in rows[3:]] == ["layer_overlap=2"] * 2
    assert all("max_memory=16" in row and "batch_size" not in row for row in rows[3:])


def test_evaluation_streams_whose_logits_cannot_fit_are_refused_before_anything_is_timed(monkeypatch):
    import bench.engine.hardware.memory as memory
    from bench.engine.resolve import resolve
    from bench.engine.spec import validate_spec

    facts = DataFacts.vocabulary_only(256)
    params = resolve(validate_spec(RunSpec(overrides=TOY)), facts).size().params_total
    per_stream = memory.EVAL_LOGIT_COPIES * memory.FLOAT32 * 256 * TOY["eval_chunk"]  # logits of one stream's chunk
    most = 40  # streams this machine holds: its memory set to their logits and the weights (training needs less)
    monkeypatch.setattr(memory, "device_memory", lambda device: (memory.FLOAT32 * params + most * per_stream,
                                                                 "this machine's"))
    timed = []
    monkeypatch.setattr(speed, "_timed", lambda *args: timed.append(args) or {
        "warmup": 0.0, "timed": 1.0, "warmup_compile": 0.0, "timed_compile": 0.0})
    with pytest.raises(BenchError) as refused:
        measure_speed(RunSpec(overrides=TOY), facts, steps=1, warmup=0, eval_streams=(2, most + 1))
    assert str(refused.value).startswith("--eval-streams 41 in chunks of 4 tokens: evaluation needs at least ")
    assert timed == []  # refused before training was timed or any stream's tokens allocated
    assert list(measure_speed(RunSpec(overrides=TOY), facts, steps=1, warmup=0, eval_streams=(most,))["eval"]) == [
        "40"]
    monkeypatch.undo()
    with pytest.raises(BenchError, match="--eval-streams 100,000,000 in chunks of 4 tokens: evaluation needs"):
        measure_speed(RunSpec(overrides=TOY), facts, eval_streams=(10**8,))  # this machine's own memory
    with pytest.raises(BenchError, match="--eval-streams 0 is not a positive whole number"):
        measure_speed(RunSpec(overrides=TOY), facts, eval_streams=(0,))
