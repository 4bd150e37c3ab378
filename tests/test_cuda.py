"""The CUDA path: run by the GPU runbook's prove stage (``scripts/gpu/runbook.sh prove``); skipped without CUDA.

Each test trains or evaluates a tiny model on the toy corpus on the GPU and checks
what must hold there: bf16 autocast and TF32 on, cuDNN's flattened LSTM weights kept
through weight drop, the attention kernels, compilation, bit-exact resume, the
output projection in float32, agreement with a CPU run within what bf16 allows.
"""

import dataclasses
import warnings

import numpy as np
import pytest
import torch

from bench.engine.hardware.device import configure
from bench.engine.score.inference import load_model
from bench.engine.hardware.precision import plan_precision
from bench.models.recurrent import has_rnn
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.engine.trainer import TrainingInterrupted

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TINY = {"emsize": 32, "nhid": 128, "bptt": 32, "batch_size": 8, "max_steps": 12, "eval_every": 6,
        "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 64, "log_every": 2, "eval_max_tokens": 2000}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, model="sha-rnn", **overrides):
    settings = dict(TINY)
    if model == "transformer":
        settings = {k: v for k, v in settings.items() if k not in ("emsize", "nhid", "eval_chunk")}
        settings.update(d_model=32, nheads=2)
    settings.update(overrides)
    return RunSpec(model=model, preset="tiny", tokenizer="byte", dataset="toy", seed=3, overrides=settings,
                   data_dir=str(data_dir), out_dir=str(out))


# precision=auto on CUDA: float16 with loss scaling for models with LSTMs (cuDNN's float16 LSTM, the reference's
# apex O1 recipe), bf16 for the Transformer (bench.engine.hardware.precision)
AUTO = {"sha-rnn": "float16 autocast, loss scaling", "lstm": "float16 autocast, loss scaling",
        "transformer": "bfloat16 autocast"}


@pytest.mark.parametrize("model", ["sha-rnn", "lstm", "transformer"])
def test_a_cuda_run_trains_as_the_policy_says_with_tf32_and_scores_in_float32_at_the_output(data_dir, tmp_path, model):
    result = train(spec(data_dir, tmp_path / "run", model, stop_if_not_learning=False), show_progress=False)
    assert result.status == "done" and result.provenance.device["type"] == "cuda"
    assert result.evaluation.layout["precision"] == result.training.precision["ran"] == AUTO[model]
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    loaded = load_model(tmp_path / "run").model.cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        hidden, _ = loaded(torch.randint(0, 256, (2, 16), device="cuda"))
        assert loaded.logits(hidden).dtype == torch.float32  # the projection is not rounded to bf16


@pytest.mark.parametrize("model", ["sha-rnn", "lstm"])
def test_no_lstm_runs_in_float16_under_bfloat16(data_dir, tmp_path, model):
    """torch 2.11 + cuDNN 9.19 under plain bf16 autocast run nn.LSTM in float16, unscaled (seen on an H100,
    2026-11-23); precision=bfloat16 runs them in float32, and the result says so from what it observed."""
    result = train(spec(data_dir, tmp_path / "run", model, max_steps=2, precision="bfloat16"), show_progress=False)
    assert result.training.precision["observed"]["LSTM"]["outputs"] == ["float32"]
    assert result.training.precision["ran"] == "bfloat16 autocast, RNNs float32"
    as_before = train(spec(data_dir, tmp_path / "before", model, max_steps=2, precision="bfloat16",
                           rnn_precision="autocast"), show_progress=False)
    assert as_before.training.precision["observed"]["LSTM"]["outputs"] == ["float16"]  # what the old study ran


@pytest.mark.parametrize("model,overrides", [("lstm", {"wdrop": 0.3}), ("sha-rnn", {})])
def test_cudnn_lstm_weights_stay_one_flat_block_through_training(data_dir, tmp_path, model, overrides):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        train(spec(data_dir, tmp_path / "run", model, **overrides), show_progress=False)
    assert not [w for w in seen if "contiguous chunk of memory" in str(w.message)]


def test_the_transformer_attention_runs_on_a_fused_kernel(data_dir, tmp_path):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    train(spec(data_dir, tmp_path / "run", "transformer", max_steps=2), show_progress=False)
    model = load_model(tmp_path / "run").model.cuda()
    tokens = torch.randint(0, 256, (2, 32), device="cuda")
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]), \
            torch.autocast("cuda", dtype=torch.bfloat16):
        model(tokens)  # raises when no fused kernel accepts the call (a materialised mask, say)


def test_the_sharnn_attention_runs_on_a_fused_kernel(data_dir, tmp_path):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    train(spec(data_dir, tmp_path / "run", max_steps=2), show_progress=False)
    model = load_model(tmp_path / "run").model.cuda()
    tokens = torch.randint(0, 256, (2, 32), device="cuda")
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]), \
            torch.autocast("cuda", dtype=torch.bfloat16):
        _, state = model(tokens)
        model(tokens, state)  # with a memory: keys outnumber queries


def test_the_overlapped_sharnn_blocks_compute_on_their_streams_what_one_chunk_computes():
    """layer_overlap (bench.models.sharnn_overlap): each block on a stream of its own, events between them; the
    forward, the carried state and every gradient those of one chunk with the same dropout masks, in float32
    (TF32 off: its rounding, not the streams', would set the tolerance)."""
    from bench.models.sharnn import SHARNN, SHARNNConfig
    from bench.models.sharnn_overlap import block_streams
    from tests.test_layer_overlap import VOCAB, block_after_block, in_chunks, overlapped, run, segments

    torch.manual_seed(0)
    config = SHARNNConfig(vocab_size=VOCAB, emsize=64, nhid=256, nlayers=4, attention="all", dropout=0.2,
                          dropouth=0.2, dropouti=0.2, max_memory=80)
    model = SHARNN(config).cuda().train()
    data = segments(37, batch=8, device="cuda")
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        compared = [(run(model, in_chunks(1), data), run(model, overlapped(4), data))]
        model.eval()  # no dropout: the block-after-block forward, on the caller's stream alone
        compared.append((run(model, block_after_block, data), run(model, overlapped(4), data)))
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
    assert block_streams.cache_info().currsize >= 1  # the blocks ran on streams of their own
    for reference, overlapping in compared:
        for key, value in reference.items():
            pairs = zip(value, overlapping[key]) if isinstance(value, list) else [(value, overlapping[key])]
            for a, b in pairs:
                assert (a - b).norm() <= 1e-4 * b.norm() + 1e-6, key


@pytest.mark.parametrize("model", ["sha-rnn", "transformer"])
def test_compiled_training_matches_eager_within_bf16(data_dir, tmp_path, model):
    eager = train(spec(data_dir, tmp_path / "eager", model), show_progress=False)
    compiled = train(spec(data_dir, tmp_path / "compiled", model, compile=True), show_progress=False)
    assert compiled.status == "done"
    assert compiled.metrics["test"].bits_per_byte == pytest.approx(eager.metrics["test"].bits_per_byte, rel=2e-2)


def test_a_cuda_run_resumed_after_a_signal_is_bit_exact(data_dir, tmp_path, sigterm_after_step):
    settings = {"dropout": 0.1, "dropouth": 0.1, "dropouti": 0.1, "seq_jitter": True}
    reference = train(spec(data_dir, tmp_path / "a", **settings), show_progress=False)
    disarm = sigterm_after_step(5)
    with pytest.raises(TrainingInterrupted):
        train(spec(data_dir, tmp_path / "b", **settings), show_progress=False)
    disarm()
    resumed = train(spec(data_dir, tmp_path / "b", **settings), show_progress=False)
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"resumed weights differ: {different[:5]}"
    assert resumed.metrics["test"].total_nll_nats == reference.metrics["test"].total_nll_nats


@pytest.mark.parametrize("precision,tolerance", [("float32", 2e-3), ("bfloat16", 3e-2)])
def test_a_cuda_run_agrees_with_a_cpu_run_of_the_same_spec(data_dir, tmp_path, precision, tolerance):
    """float32 on the GPU still multiplies in TF32 (10-bit mantissa); bf16 autocast has an 8-bit one."""
    cpu = train(spec(data_dir, tmp_path / "cpu", device="cpu"), show_progress=False)
    gpu = train(spec(data_dir, tmp_path / "gpu", device="cuda", precision=precision), show_progress=False)
    assert gpu.metrics["test"].bits_per_byte == pytest.approx(cpu.metrics["test"].bits_per_byte, rel=tolerance)


def test_eval_hf_in_bf16_on_cuda_keeps_the_projection_in_float32(tmp_path, corpus_text):
    transformers = pytest.importorskip("transformers")
    from bench.engine.score.evaluation import EvalLayout, Scorer
    from bench.models.pretrained import PretrainedLM

    config = transformers.GPT2Config(vocab_size=256, n_positions=256, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    model = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "gpt2")
    configure(torch.device("cuda"))
    model = model.cuda().eval()
    ids = list(np.frombuffer(corpus_text.encode()[:3000], dtype=np.uint8))
    scorer = Scorer(PretrainedLM(model, 128), 0, EvalLayout(streams=4, chunk=64, window=128), torch.device("cuda"))
    exact = scorer.score(np.asarray(ids)).total_nll_nats
    bf16 = plan_precision("bfloat16", "auto", torch.device("cuda"), has_rnn(model))
    mixed = dataclasses.replace(scorer, precision=bf16).score(np.asarray(ids)).total_nll_nats
    assert mixed == pytest.approx(exact, rel=1e-2)


def test_on_cuda_lamb_is_foreach_never_waiting_for_the_gpu_and_adamw_is_fused():
    """lamb_impl=auto is the foreach LAMB on CUDA: the loop's update within 1e-6 over 100 steps, and no step reads a
    tensor on the host (CUDA's sync debug mode raises at any synchronising call)."""
    from bench.engine.optim import build_optimizer
    from bench.engine.spec import TrainConfig

    torch.manual_seed(0)
    shapes = [(64, 32), (32,), (128, 32), (7,), (3, 5)]
    weights = [torch.randn(s, device="cuda") for s in shapes] + [torch.zeros(4, device="cuda")]
    twins = [[w.clone().requires_grad_() for w in weights] for _ in range(2)]
    lamb = dict(optimizer="lamb", weight_decay=0.1, min_trust=0.25)
    foreach = build_optimizer(twins[0], TrainConfig(**lamb))
    loop = build_optimizer(twins[1], TrainConfig(**lamb, lamb_impl="loop"))
    assert foreach.foreach and not loop.foreach
    for _ in range(100):
        grads = [torch.randn_like(w) for w in weights]
        for params, opt in ((twins[0], foreach), (twins[1], loop)):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            torch.cuda.set_sync_debug_mode("error" if opt is foreach else "default")
            try:
                opt.step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
    for a, b in zip(*twins):
        assert (a - b).norm() <= 1e-6 * b.norm() or torch.equal(a, b)
    adamw = build_optimizer(twins[0], TrainConfig(optimizer="adamw"))
    assert adamw.param_groups[0]["fused"] is True


FLOAT32_SHARNN_CAPTURE = pytest.mark.xfail(strict=True, reason=(
    "H200, torch 2.11.0+cu130, 2026-11-26: the capture fails ('operation failed due to a previous error during "
    "capture', also under CUDA_LAUNCH_BLOCKING=1), named in one line; the bf16 SHA-RNN captures (speed-h200.md)"))


@pytest.mark.parametrize("model,precision,compiled,tolerance", [
    pytest.param("sha-rnn", "float32", False, 1e-4, marks=FLOAT32_SHARNN_CAPTURE),
    ("sha-rnn", "bfloat16", False, 1e-2), ("lstm", "float32", False, 1e-4),
    ("transformer", "bfloat16", False, 1e-2), ("sha-rnn", "bfloat16", True, 1e-2)])
def test_a_step_replayed_from_a_cuda_graph_computes_what_the_eager_step_does(model, precision, compiled, tolerance):
    """bench.engine.hardware.cuda_graphs: the same losses, weights and LAMB step counts as eager steps (without dropout), the
    graph captured once the shapes repeat (the SHA-RNN's memory full), and no replay waiting for the GPU."""
    from bench.engine.hardware.cuda_graphs import GraphedStep
    from bench.engine.optim import build_optimizer
    from bench.engine.spec import TrainConfig
    from bench.engine.step import TrainingStep, make_step
    from bench.models import build_model
    from bench.models.common import detach_state

    device = torch.device("cuda")
    configure(device)
    sizes = {"sha-rnn": dict(emsize=32, nhid=128, nlayers=2, max_memory=40, dropout=0.0, dropouth=0.0, dropouti=0.0),
             "lstm": dict(emsize=32, nhid=64, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0),
             "transformer": dict(d_model=32, nheads=2, nlayers=2, context=16, dropout=0.0)}[model]
    optimizer = "lamb" if model == "sha-rnn" else "adamw"
    runs = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        net = build_model(model, {"vocab_size": 256, **sizes}).to(device)
        if compiled:
            net.compile_parts()
        cfg = TrainConfig(optimizer=optimizer, lr=3e-3, precision=precision, cuda_graphs=graphs)
        opt = build_optimizer(net.parameters(), cfg)
        plan = plan_precision(precision, "auto", device, has_rnn(net))
        step = make_step(TrainingStep(net, device, plan), net, opt, 0.25, graphs, device)
        data, state, losses = torch.Generator(device="cuda").manual_seed(1), None, []
        for i in range(12):
            tokens = torch.randint(0, 256, (4, 17), device=device, generator=data)
            for group in opt.param_groups:
                group["lr"] = 3e-3 * (i + 1) / 12  # a schedule: a replay must read each step's rate
            torch.cuda.set_sync_debug_mode("error" if graphs and i >= 8 else "default")
            try:
                loss, new_state, _ = step(tokens[:, :-1], tokens[:, 1:], state if net.carries_state_in_training
                                          else None)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            state = detach_state(new_state)
            losses.append(loss.detach())
        runs[graphs] = net, opt, torch.stack(losses).tolist(), step
    (eager, _, eager_losses, _), (graphed, opt, graphed_losses, step) = runs[False], runs[True]
    graph_step = step.step if compiled else step  # compiled: inside the compile clock (bench.engine.step)
    assert isinstance(graph_step, GraphedStep) and graph_step.graph is not None
    assert graphed_losses == pytest.approx(eager_losses, rel=tolerance)
    for (name, a), b in zip(graphed.named_parameters(), eager.parameters()):
        assert (a - b).norm() <= tolerance * b.norm() + 1e-6, name
    if optimizer == "lamb":
        assert {float(s["step"]) for s in opt.state.values()} == {12.0}


def _float16_steps(model: str, graphs: bool, steps: int = 14, overflow_at: int = 11):
    """``steps`` float16 steps with a loss scaler of a tiny model on CUDA, eager or through a GraphedStep built
    directly (runs refuse float16 graphs until this test has passed on a GPU); at step ``overflow_at`` (a replayed
    one) the scale is made huge, so that the gradients overflow and the update is skipped on the device."""
    from bench.engine.hardware.cuda_graphs import GraphedStep
    from bench.engine.optim import build_optimizer
    from bench.engine.spec import TrainConfig
    from bench.engine.step import TrainingStep, apply_gradients, make_step
    from bench.models import build_model
    from bench.models.common import detach_state

    device = torch.device("cuda")
    configure(device)
    sizes = {"sha-rnn": dict(emsize=32, nhid=128, nlayers=2, max_memory=32, dropout=0.0, dropouth=0.0,
                             dropouti=0.0),
             "lstm": dict(emsize=32, nhid=64, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0)}[model]
    torch.manual_seed(0)
    net = build_model(model, {"vocab_size": 256, **sizes}).to(device)
    opt = build_optimizer(net.parameters(), TrainConfig(optimizer="lamb" if model == "sha-rnn" else "adamw",
                                                        lr=3e-3, cuda_graphs=graphs))
    plan = plan_precision("float16", "auto", device, has_rnn(net))
    scaler = plan.grad_scaler(device)
    forward = TrainingStep(net, device, plan)
    step = (GraphedStep(forward, net, opt, lambda loss: apply_gradients(net, opt, loss, 0.25, scaler), device)
            if graphs else make_step(forward, net, opt, 0.25, False, device, scaler))
    data, state, losses, skipped = torch.Generator(device="cuda").manual_seed(1), None, [], []
    for i in range(1, steps + 1):
        tokens = torch.randint(0, 256, (8, 17), device=device, generator=data)
        if i == overflow_at:
            scaler._scale.fill_(2.0 ** 100)
        torch.cuda.set_sync_debug_mode("error" if i > 7 else "default")  # no step once captured reads the GPU
        try:
            loss, new_state, flag = step(tokens[:, :-1], tokens[:, 1:], state if net.carries_state_in_training
                                         else None)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        state = detach_state(new_state)
        losses.append(loss.detach())
        skipped.append(flag)
    return net, opt, scaler, torch.stack(losses).tolist(), torch.stack(skipped).tolist(), step


@pytest.mark.parametrize("model", ["sha-rnn", "lstm"])
def test_a_float16_step_reads_nothing_and_skips_an_overflow_on_the_device(model):
    """LAMB (foreach on CUDA) and fused AdamW take the scaler's inf check: no step waits for the GPU, and the update
    of an overflowing step is skipped (the weights as before it), the scale backed off."""
    net, opt, scaler, losses, skipped, _ = _float16_steps(model, graphs=False, steps=11)
    assert skipped[-1] == 1.0 and sum(skipped) >= 1
    assert scaler.get_scale() == 2.0 ** 99  # backed off once from the forced 2^100


@pytest.mark.parametrize("model", ["sha-rnn", "lstm"])
def test_a_float16_step_replayed_from_a_cuda_graph_computes_what_the_eager_step_does(model):
    """What must hold before a run may capture float16 (``check_cuda_graphs`` refuses it till then): the scaler's
    scale, growth count and inf check live in device tensors the graph holds, a skipped update is skipped inside the
    replay, and losses, skip flags, scale, weights and LAMB's update counts follow the eager steps."""
    from bench.engine.hardware.cuda_graphs import GraphedStep

    eager, eager_opt, eager_scaler, eager_losses, eager_skipped, _ = _float16_steps(model, graphs=False)
    graphed, opt, scaler, losses, skipped, step = _float16_steps(model, graphs=True)
    assert isinstance(step, GraphedStep) and step.graph is not None
    assert skipped == eager_skipped and skipped[10] == 1.0
    assert scaler.get_scale() == eager_scaler.get_scale()
    assert losses == pytest.approx(eager_losses, rel=1e-3)
    for (name, a), b in zip(graphed.named_parameters(), eager.parameters()):
        assert (a - b).norm() <= 1e-3 * b.norm() + 1e-6, name
    if model == "sha-rnn":
        assert {float(s["step"]) for s in opt.state.values()} == {14.0 - sum(skipped)}


def test_a_training_run_with_cuda_graphs_trains_as_the_eager_run(data_dir, tmp_path):
    """The trainer's side: validations and checkpoints between replays, the carried state in the graph's buffers,
    each step's loss kept until a log line reads it (bf16; no dropout: the graph draws its own masks)."""
    import json

    settings = dict(precision="bfloat16", dropout=0.0, dropouth=0.0, dropouti=0.0, max_memory=64)
    eager = train(spec(data_dir, tmp_path / "eager", **settings), show_progress=False)
    graphed = train(spec(data_dir, tmp_path / "graphed", cuda_graphs=True, **settings), show_progress=False)
    assert graphed.run_id == eager.run_id and graphed.resolved["train"]["cuda_graphs"]
    logs = [[json.loads(line)["train_loss"] for line in (tmp_path / run / "log.jsonl").read_text().splitlines()
             if "train_loss" in line] for run in ("eager", "graphed")]
    assert len(logs[1]) == 6 and logs[1] == pytest.approx(logs[0], rel=1e-2)
    assert graphed.metrics["test"].bits_per_byte == pytest.approx(eager.metrics["test"].bits_per_byte, rel=1e-2)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs for 2-process DDP with NCCL")
def test_two_processes_with_nccl_train_like_one_gpu(data_dir, tmp_path, cli, repo):
    """torchrun on two GPUs (NCCL) against one GPU with the same global batch, in float32 (TF32) so that the
    comparison is not bf16 rounding."""
    import json
    import subprocess
    import sys

    args = ["train", "--model", "sha-rnn", "--tokenizer", "byte", "--dataset", "toy", "--data-dir", str(data_dir),
            "--quiet", "--json", "--set", "precision=float32"]
    for key, value in TINY.items():
        args += ["--set", f"{key}={value}"]
    one = cli(*args, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(repo / "cli.py"), *args, "--out", str(tmp_path / "two")],
                         capture_output=True, text=True, cwd=repo, timeout=600)
    assert two.returncode == 0, two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["run_id"] == b["run_id"] and a["provenance"]["device"]["type"] == "cuda"
    assert b["metrics"]["test"]["total_nll_nats"] == pytest.approx(a["metrics"]["test"]["total_nll_nats"], rel=2e-3)
