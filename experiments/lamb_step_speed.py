"""The optimizer step alone, LAMB's loop against its foreach version (and AdamW's, for scale).

    python experiments/lamb_step_speed.py --presets tiny,small,paper --rounds 9
    python experiments/lamb_step_speed.py --presets small,paper --device cuda    # a GPU session: launches, not FLOPs

For each SHA-RNN preset (byte vocabulary) the variants take turns, ``--steps`` steps each per round (after one
untimed step that creates the state), so that a load that changes during the run falls on every variant alike. Each
step follows a real forward and backward pass (2 x 32 bytes, untimed), as in training: what they allocate and free
decides whether the step's temporaries find memory already mapped. Prints a Markdown table of the median
milliseconds per step: on a CPU the process's CPU time (another job's load does not count, its cache and memory
traffic do), on CUDA wall time to the last kernel's end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine.optim import Lamb  # noqa: E402
from bench.engine.presets import get_preset  # noqa: E402
from bench.models import build_model, make_config  # noqa: E402

VARIANTS = {
    "lamb loop": lambda params, cfg: Lamb(params, lr=cfg["lr"], foreach=False),
    "lamb foreach": lambda params, cfg: Lamb(params, lr=cfg["lr"], foreach=True),
    "adamw default": lambda params, cfg: torch.optim.AdamW(params, lr=cfg["lr"]),
    "adamw foreach": lambda params, cfg: torch.optim.AdamW(params, lr=cfg["lr"], foreach=True),
    "adamw fused": lambda params, cfg: torch.optim.AdamW(params, lr=cfg["lr"], fused=True),
}


def backward(model: torch.nn.Module, device: torch.device) -> None:
    x = torch.randint(0, 256, (2, 32), device=device)
    model.zero_grad(set_to_none=True)
    hidden, _ = model(x, None)
    torch.nn.functional.cross_entropy(model.logits(hidden).reshape(-1, 256), x.reshape(-1)).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    wait = torch.cuda.synchronize if device.type == "cuda" else lambda: None  # time the kernels, not the launches
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    print(f"torch {torch.__version__} on {device}, {args.threads} thread(s), median of {args.rounds} rounds x "
          f"{args.steps} steps\n")
    print("| preset | parameters | tensors | " + " | ".join(f"{v} (ms)" for v in VARIANTS) + " | loop / foreach |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in VARIANTS) + " | ---: |")
    for preset in args.presets.split(","):
        recipe = get_preset("sha-rnn", preset)
        model = build_model("sha-rnn", make_config("sha-rnn", {**recipe["model"], "vocab_size": 256})).to(device)
        backward(model, device)
        params = [p for p in model.parameters() if p.grad is not None]
        optimizers = {name: make(params, recipe["train"]) for name, make in VARIANTS.items()}
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for opt in optimizers.values():
            opt.step()
        for _ in range(args.rounds):
            for name, opt in optimizers.items():
                spent = 0.0
                for _ in range(args.steps):
                    backward(model, device)
                    wait()
                    start = clock()
                    opt.step()
                    wait()
                    spent += clock() - start
                times[name].append(spent / args.steps * 1e3)
        ms = {name: statistics.median(t) for name, t in times.items()}
        cells = " | ".join(f"{ms[v]:.2f}" for v in VARIANTS)
        print(f"| {preset} | {sum(p.numel() for p in params):,} | {len(params)} | {cells} | "
              f"{ms['lamb loop'] / ms['lamb foreach']:.2f}x |", flush=True)
        del model, params, optimizers


if __name__ == "__main__":
    main()
