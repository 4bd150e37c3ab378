"""The SHA-RNN's blocks overlapped (``layer_overlap``, bench.models.sharnn_overlap): the chunked wavefront forward
and its gradients are the one-chunk forward's with the same dropout masks, and without dropout the block-after-block
forward's, in float64 to 1e-12; a training run gives the same log to float32 rounding, under another run id."""

import json

import pytest
import torch
import torch.nn.functional as F

from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.models.sharnn import SHARNN, SHARNNConfig
from bench.models.sharnn_overlap import overlapped_forward

VOCAB = 40
EXACT = 1e-12  # float64: the chunks change the rounding of the LSTMs' and the attention's products only



def model_of(dropout: float, max_memory: int, attention: str = "all") -> SHARNN:
    torch.manual_seed(0)
    config = SHARNNConfig(vocab_size=VOCAB, emsize=8, nhid=32, nlayers=3, attention=attention, dropout=dropout,
                          dropouth=dropout, dropouti=dropout, max_memory=max_memory)
    return SHARNN(config).double()


def segments(length: int, count: int = 3, batch: int = 2, device: str = "cpu") -> list[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (batch, length * count + 1), generator=generator).to(device)
    return [(tokens[:, i * length:(i + 1) * length], tokens[:, i * length + 1:(i + 1) * length + 1])
            for i in range(count)]


def run(model: SHARNN, forward, data) -> dict[str, object]:
    """Loss summed over consecutive segments (the state carried, not detached), every gradient, the last state:
    the state's own values enter the loss too, so that their gradients are compared."""
    torch.manual_seed(7)  # the same dropout masks for every forward compared
    model.zero_grad(set_to_none=True)
    state, losses = None, []
    for tokens, targets in data:
        hidden, state = forward(model, tokens, state)
        losses.append(F.cross_entropy(model.logits(hidden).flatten(0, 1), targets.flatten()))
    loss = torch.stack(losses).sum()
    lstm_states, memories = state
    carried = [t for pair in lstm_states for t in pair] + [m for m in memories if m is not None]
    (loss + sum(t.sin().sum() for t in carried)).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return {"loss": loss.detach(), "state": [t.detach() for t in carried], **grads}


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    worst = 0.0
    for key in a:
        pairs = zip(a[key], b[key]) if isinstance(a[key], list) else [(a[key], b[key])]
        for x, y in pairs:
            assert x.shape == y.shape, key
            worst = max(worst, (x - y).abs().max().item())
    return worst


def in_chunks(chunks: int):
    return lambda model, tokens, state: overlapped_forward(model, tokens, state, chunks)


def block_after_block(model, tokens, state):
    return model(tokens, state)


def overlapped(chunks: int):
    def forward(model, tokens, state):
        model.config.layer_overlap = chunks
        try:
            return model(tokens, state)
        finally:
            model.config.layer_overlap = 1
    return forward


# 13 positions: no N > 1 divides them; 5 < 8, fewer positions than chunks
@pytest.mark.parametrize("length,chunks", [(13, 1), (13, 2), (13, 4), (13, 8), (5, 8), (12, 4)])
@pytest.mark.parametrize("attention", ["all", "second-last"])
def test_the_overlapped_forward_and_backward_are_the_one_chunk_ones_with_the_same_dropout_masks(length, chunks,
                                                                                                attention, one_thread):
    model = model_of(dropout=0.3, max_memory=2 * length - 3, attention=attention).train()
    data = segments(length)
    one_chunk = run(model, in_chunks(1), data)
    worst = largest_difference(run(model, in_chunks(chunks), data), one_chunk)
    assert worst <= EXACT, worst
    without = largest_difference(run(model.eval(), in_chunks(1), data), one_chunk)
    assert without > 1e-3  # the masks were drawn and applied, not skipped


# max_memory 30: the memory grows, then is trimmed to make room; 10: shorter than a segment, no memory carried
@pytest.mark.parametrize("max_memory", [30, 10])
@pytest.mark.parametrize("chunks", [2, 4, 8])
@pytest.mark.parametrize("training", [True, False], ids=["training-dropouts-0", "eval-dropouts-0.3"])
def test_without_dropout_the_overlapped_forward_is_the_block_after_block_one(max_memory, chunks, training,
                                                                            one_thread):
    model = model_of(dropout=0.0 if training else 0.3, max_memory=max_memory).train(training)
    data = segments(13)
    worst = largest_difference(run(model, overlapped(chunks), data), run(model, block_after_block, data))
    assert worst <= EXACT, worst


def test_one_is_the_block_after_block_forward_and_draws_what_it_drew(monkeypatch, one_thread):
    import bench.models.sharnn as sharnn

    monkeypatch.setattr(sharnn, "overlapped_forward", lambda *args: pytest.fail("layer_overlap=1 ran chunked"))
    model = model_of(dropout=0.3, max_memory=20).train()
    tokens, _ = segments(13)[0]
    torch.manual_seed(3)
    hidden, _ = model(tokens)
    assert SHARNNConfig().layer_overlap == 1
    # what the forward computed and drew before layer_overlap existed (the commit before it)
    assert hidden.sum().item() == pytest.approx(14.249172709626727, rel=1e-9)
    assert torch.rand(1).item() == pytest.approx(0.8716618418693542, rel=1e-12)


def test_compiled_parts_run_overlapped_and_compile_nothing_in_the_timed_steps(monkeypatch, one_thread):
    """torch.compile with its eager backend (dynamo traces and guards as with inductor, in a second): the chunks'
    keys/values of every length up to the full one are one dynamic graph, compiled in the warm-up."""
    from bench.data.facts import DataFacts
    from bench.engine.speed import measure_speed

    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module: compile_module(module, backend="eager"))
    torch._dynamo.reset()  # earlier compilations of the same code in this process would count against its limit
    settings = {"emsize": 16, "nhid": 32, "bptt": 13, "batch_size": 2, "max_memory": 32, "threads": 1,
                "compile": True, "layer_overlap": 4}
    compiled = measure_speed(RunSpec(overrides=settings), DataFacts.vocabulary_only(256), steps=3)["compile_seconds"]
    assert compiled["train"] > 0 and compiled["eval"] > 0 and compiled["timed"] == 0


SETTINGS = {"emsize": 16, "nhid": 32, "bptt": 16, "batch_size": 4, "max_steps": 8, "log_every": 1, "eval_every": 4,
            "checkpoint_every": 8, "eval_streams": 4, "eval_chunk": 24, "eval_max_tokens": 300, "max_memory": 40,
            "final_eval_splits": "test", "stop_if_not_learning": False, "threads": 1}


def test_a_training_run_overlapped_logs_what_it_logs_block_after_block_under_another_run_id(make_toy_corpus,
                                                                                            tmp_path):
    data = make_toy_corpus(tmp_path)
    logs, ids = {}, {}
    for overlap in (1, 4):
        spec = RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", seed=4,
                       overrides={**SETTINGS, "layer_overlap": overlap}, data_dir=str(data),
                       out_dir=str(tmp_path / f"overlap{overlap}"))
        result = train(spec, show_progress=False)
        ids[overlap] = result.run_id
        lines = (tmp_path / f"overlap{overlap}" / "log.jsonl").read_text().splitlines()
        logs[overlap] = [{k: v for k, v in json.loads(line).items() if "loss" in k or "bits" in k}
                         for line in lines]
    assert ids[1] != ids[4]
    assert [record.keys() for record in logs[1]] == [record.keys() for record in logs[4]]
    assert sum("train_loss" in record for record in logs[1]) == 8 and any("valid_loss" in r for r in logs[1])
    for before, after in zip(logs[1], logs[4]):
        assert after == pytest.approx(before, rel=1e-4)


def test_a_layer_overlap_below_one_is_refused_in_one_line(cli_here, one_line_error, make_toy_corpus, tmp_path):
    data = make_toy_corpus(tmp_path)
    result = cli_here("train", "--dataset", "toy", "--data-dir", str(data), "--quiet", "--out",
                      str(tmp_path / "run"), "--set", "layer_overlap=0")
    one_line_error(result, "layer_overlap must be at least 1, not 0")
    assert not (tmp_path / "run").exists()


def test_bench_speed_runs_the_overlapped_blocks(cli):
    done = cli("speed", "--preset", "tiny", "--steps", "2", "--warmup", "1", "--set", "layer_overlap=4",
               "--set", "threads=1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["train_tokens_per_second"] > 0


def test_more_chunks_than_a_segment_has_positions_is_refused_at_resolution():
    """A chunk holds at least one position: beyond a training segment's (bptt) or an evaluation chunk's positions the
    chunks would silently be fewer and of one position each, many times slower; resolution (bench train, bench
    speed, a matrix's plan) refuses them."""
    from bench.data.facts import DataFacts
    from bench.engine.resolve import resolve
    from bench.engine.spec import validate_spec
    from bench.errors import BenchError

    def resolved(**overrides):
        return resolve(validate_spec(RunSpec(overrides={"bptt": 16, **overrides})), DataFacts.vocabulary_only(256))

    assert resolved(layer_overlap=16).model.layer_overlap == 16  # a chunk of one position each: the most
    with pytest.raises(BenchError) as refused:
        resolved(layer_overlap=17)
    assert str(refused.value) == ("layer_overlap (17) is more chunks than the 16 positions of a segment (bptt 16); "
                                  "set layer_overlap to at most 16, or raise bptt")
    assert resolved(layer_overlap=8, eval_chunk=8).train.eval_chunk == 8
    with pytest.raises(BenchError, match=r"the 8 positions of a segment \(eval_chunk 8\); set layer_overlap to at "
                                         r"most 8, or raise eval_chunk"):
        resolved(layer_overlap=9, eval_chunk=8)
