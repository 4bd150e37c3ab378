"""Why the GPU study's SHA-RNN stayed at its unigram floor: its cell trained one factor at a time.

The cell of configs/gpu-wikitext2.toml (SHA-RNN `small` recipe, width 512, Boom 2048, memory 1024, byte level,
batch 32 x 512 characters, LAMB lr 2e-3, warmup 100, seed 0) under variants that each change one thing:

    python experiments/sharnn_plateau.py run float32 --steps 200      # on the CPU; run again: resumes, or goes further
    python experiments/sharnn_plateau.py run float16-scaled --minutes 1   # the GPU runbook's diagnose stage
    python experiments/sharnn_plateau.py table > results/reference/sharnn-plateau.md

``gpu-as-before`` is what the GPU study ran: bf16 autocast, and every LSTM in float16 without loss scaling
(cuDNN's autocast wrapper casts RNNs to float16 whatever dtype autocast was given). On CUDA it is that
(``rnn_precision=autocast``). A CPU has no float16 LSTM kernel, so there it is emulated: the LSTM's inputs, state
and weights are rounded to float16 on the way in and its outputs on the way out, and each rounding's backward
rounds the gradient to float16 as well (values under float16's smallest subnormal, 6e-8, become 0: the underflow
a loss scaler prevents); the recursion inside the LSTM runs in float32. Each variant is a training run in
OUT/<variant> (checkpoints every 25 steps) whose log the table reads; a run at its floor is what is studied, so
it is not stopped as not-learning. ``--tiny``: toy sizes, for the runbook's CPU dry run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CELL = dict(emsize=512, nhid=2048, max_memory=1024, batch_size=32, context_chars=512, eval_every=50,
            eval_max_chars=50_000, checkpoint_every=25, log_every=10, max_steps=100_000, final_eval_splits="valid")
TINY = dict(emsize=32, nhid=128, max_memory=64, batch_size=4, context_chars=32, eval_every=5, eval_max_chars=2_000,
            checkpoint_every=5, log_every=5, warmup_steps=5)


@dataclass(frozen=True)
class Variant:
    what: str
    settings: dict = field(default_factory=dict)
    unscaled_float16_lstms: bool = False  # CUDA: rnn_precision=autocast under bf16; a CPU: emulated
    attention_dropout: bool = True
    attention_kernel: str = "auto"  # bench.models.sharnn.SingleHeadAttention.kernel


AS_BEFORE = {"precision": "bfloat16"}
BATCH_8X128 = {"batch_size": 8, "context_chars": 128}  # 16 times cheaper per step than the cell's 32 x 512
VARIANTS: dict[str, Variant] = {
    "float32": Variant("float32 everywhere (the CPU run that trained used batch 8 x 128)", {"precision": "float32"}),
    "gpu-as-before": Variant("bf16 autocast, LSTMs float16 without loss scaling: what the GPU study ran", AS_BEFORE,
                             unscaled_float16_lstms=True),
    "fp16-lstm-only": Variant("float32, LSTMs float16 without loss scaling", {"precision": "float32"},
                              unscaled_float16_lstms=True),
    "bf16-fp32-lstm": Variant("bf16 autocast, LSTMs float32 (the policy for bfloat16 on CUDA)",
                              {"precision": "bfloat16", "rnn_precision": "float32"}),
    "float16-scaled": Variant("float16 autocast with loss scaling (the policy's auto for LSTM models on CUDA)",
                              {"precision": "float16"}),
    "as-before-warmup800": Variant("gpu-as-before, warmup 800 (the paper's)", {**AS_BEFORE, "warmup_steps": 800},
                                   unscaled_float16_lstms=True),
    "as-before-batch8x128": Variant("gpu-as-before, batch 8 x 128 characters",
                                    {**AS_BEFORE, **BATCH_8X128}, unscaled_float16_lstms=True),
    "as-before-no-attn-dropout": Variant("gpu-as-before, the attention's dropout off", AS_BEFORE,
                                         unscaled_float16_lstms=True, attention_dropout=False),
    "float32-batch8x128": Variant("float32, batch 8 x 128 characters (the CPU run that trained)",
                                  {"precision": "float32", **BATCH_8X128}),
    "fp16-lstm-only-batch8x128": Variant("fp16-lstm-only, batch 8 x 128 characters",
                                         {"precision": "float32", **BATCH_8X128}, unscaled_float16_lstms=True),
    "bf16-fp32-lstm-batch8x128": Variant("bf16-fp32-lstm, batch 8 x 128 characters",
                                         {"precision": "bfloat16", "rnn_precision": "float32", **BATCH_8X128}),
    "as-before-warmup800-batch8x128": Variant("as-before-batch8x128, warmup 800 (the paper's)",
                                              {**AS_BEFORE, **BATCH_8X128, "warmup_steps": 800},
                                              unscaled_float16_lstms=True),
    "float32-warmup800-batch8x128": Variant("float32-batch8x128, warmup 800 (the paper's)",
                                            {"precision": "float32", **BATCH_8X128, "warmup_steps": 800}),
    "fp16-lstm-only-warmup800-batch8x128": Variant("fp16-lstm-only-batch8x128, warmup 800 (the paper's)",
                                                   {"precision": "float32", **BATCH_8X128, "warmup_steps": 800},
                                                   unscaled_float16_lstms=True),
    "as-before-no-attn-dropout-batch8x128": Variant("as-before-batch8x128, the attention's dropout off",
                                                    {**AS_BEFORE, **BATCH_8X128}, unscaled_float16_lstms=True,
                                                    attention_dropout=False),
    "float32-warmup800": Variant("float32, warmup 800 (the paper's)", {"precision": "float32", "warmup_steps": 800}),
    "float32-lr5e-4": Variant("float32, peak lr 5e-4", {"precision": "float32", "lr": 5e-4}),
    "as-before-sdpa": Variant("gpu-as-before, attention on PyTorch's fused kernel (as in the GPU study)", AS_BEFORE,
                              unscaled_float16_lstms=True, attention_kernel="sdpa"),
}
FLOOR_SHARE = 0.95  # a training loss below 95% of the unigram entropy has left the floor


def half_rounded(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to float16 and back: the forward rounds the value, the backward rounds the gradient."""
    return t.to(torch.float16).to(t.dtype)


@contextlib.contextmanager
def emulated_float16_lstms():
    """Every LSTM of the SHA-RNN emulates cuDNN's float16 LSTM without loss scaling (see the module's doc)."""
    import bench.models.sharnn as sharnn

    original = sharnn.run_lstm

    def emulated(lstm, x, state, **weights):
        params = {name: half_rounded(p) for name, p in lstm.named_parameters()}
        params.update({name: half_rounded(w) for name, w in weights.items()})
        state = None if state is None else tuple(half_rounded(s.float()) for s in state)
        with torch.autocast(x.device.type, enabled=False):
            out, (h, c) = original(lstm, half_rounded(x.float()), state, **params)
        return half_rounded(out), (half_rounded(h), half_rounded(c))

    sharnn.run_lstm = emulated
    try:
        yield
    finally:
        sharnn.run_lstm = original


def run_folder(name: str, seed: int) -> str:
    return name if seed == 0 else f"{name}-seed{seed}"


def run_variant(name: str, out_root: Path, steps: int | None, minutes: float | None, threads: int | None,
                tiny: bool, seed: int = 0) -> None:
    from bench.engine.hardware.device import pick_device
    from bench.engine.corpus import prepare_corpus
    from bench.engine.run import plan_run
    from bench.engine.spec import RunSpec, validate_spec
    from bench.engine.trainer import Trainer
    from bench.fileio import write_json_atomic
    from bench.models.sharnn import SingleHeadAttention
    from bench.run_files import SPEC

    variant = VARIANTS[name]
    on_cuda = pick_device("auto").type == "cuda"
    settings = {**CELL, **(TINY if tiny else {}), **variant.settings}
    if variant.unscaled_float16_lstms and on_cuda:
        settings["rnn_precision"] = "autocast"  # cuDNN's float16 LSTM under bf16 autocast, as PyTorch does it
    if threads:
        torch.set_num_threads(threads)
        settings["threads"] = threads
    out = out_root / run_folder(name, seed)
    resolved = plan_run(validate_spec(RunSpec("sha-rnn", "small", "byte", "wikitext-2", seed, settings,
                                              out_dir=str(out))))
    # More steps later: the same run resumed. A run at its floor is what is studied here: it is not stopped.
    train = dataclasses.replace(resolved.train, max_steps=steps, max_minutes=minutes, stop_if_not_learning=False)
    planned = resolved
    resolved = dataclasses.replace(resolved, train=train)
    object.__setattr__(resolved, "_run_id", planned.run_id())
    corpus = prepare_corpus("wikitext-2", "byte", resolved.spec.data_dir, expected=resolved.data)
    trainer = Trainer(resolved, corpus, out)
    for module in trainer.model.modules():
        if isinstance(module, SingleHeadAttention):
            module.kernel = variant.attention_kernel
            module.dropout = module.dropout if variant.attention_dropout else 0.0
    if not trainer.resume():
        trainer.start_fresh(None)
    write_json_atomic(out / SPEC, planned.to_json())  # the folder is this run's: a later call may resume it
    emulate = variant.unscaled_float16_lstms and not on_cuda
    write_json_atomic(out / "variant.json", {"variant": name, "seed": seed, "floor_nats": unigram_entropy(corpus),
                                             "precision": trainer.precision.name, "emulated_float16_lstms": emulate,
                                             "device": trainer.device.type})
    with emulated_float16_lstms() if emulate else contextlib.nullcontext():
        trainer.run()


def unigram_entropy(corpus) -> float:
    """Nats per token of the train split under its own unigram distribution: the loss of a model that ignores
    its input."""
    counts = np.bincount(np.asarray(corpus.encoded.ids["train"], dtype=np.int64)).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def table(out_root: Path) -> str:
    lines = ["| variant | what it changes | seed | device | steps | train loss at 50 / 100 / 150 / 200 / last "
             "(nats/byte) | floor (nats/byte) | left the floor (loss < 95% of it) at step | last valid bits/char | "
             "chars/s |", "|---|---|---:|---|---:|---|---:|---|---:|---:|"]
    runs = [json.loads(p.read_text()) | {"folder": p.parent} for p in out_root.glob("*/variant.json")]
    order = list(VARIANTS)
    for meta in sorted(runs, key=lambda m: (order.index(m["variant"]), m.get("seed", 0))):
        log = meta["folder"] / "log.jsonl"
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []
        lines.append(table_row(meta, records))
    return "\n".join(lines)


def table_row(meta: dict, records: list[dict]) -> str:
    name, floor = meta["variant"], meta["floor_nats"]
    device = meta.get("device", "cpu") + (" (float16 LSTMs emulated)" if meta.get("emulated_float16_lstms") else "")
    first = f"| {name} | {VARIANTS[name].what} | {meta.get('seed', 0)} | {device}"
    train = {r["step"]: r["train_loss"] for r in records if "train_loss" in r}
    valid = [r for r in records if "valid_bits_per_char" in r]
    speed = [r["chars_per_second"] for r in records if "chars_per_second" in r]
    if not train or not speed:
        return f"{first} | 0 | | | | | |"
    last = max(train)
    at = " / ".join(f"{train[s]:.3f}" if s in train else "-" for s in (50, 100, 150, 200) if s <= last or s == 50)
    at += f" / {train[last]:.3f}"
    left = next((s for s in sorted(train) if train[s] < FLOOR_SHARE * floor), None)
    nan = next((s for s in sorted(train) if not math.isfinite(train[s])), None)
    verdict = str(left) if left is not None else (f"never (NaN at {nan})" if nan else f"not by {last}")
    last_valid = f"{valid[-1]['valid_bits_per_char']:.3f} (step {valid[-1]['step']})" if valid else "-"
    return f"{first} | {last} | {at} | {floor:.3f} | {verdict} | {last_valid} | {speed[-1]:,.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("variant", choices=sorted(VARIANTS))
    budget = run.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=int)
    budget.add_argument("--minutes", type=float)
    run.add_argument("--threads", type=int, default=None)
    run.add_argument("--seed", type=int, default=0, help="another seed runs in OUT/<variant>-seed<N>")
    run.add_argument("--tiny", action="store_true")
    sub.add_parser("table")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "plateau")
    args = parser.parse_args()
    if args.command == "run":
        run_variant(args.variant, args.out, args.steps, args.minutes, args.threads, args.tiny, args.seed)
    else:
        print(table(args.out))


if __name__ == "__main__":
    main()
