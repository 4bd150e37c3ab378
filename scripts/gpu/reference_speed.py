"""Side-by-side training speed of this toolkit's SHA-RNN and the reference implementation's, same GPU, same command.

The reference is Smerity/sha-rnn's ``model.py``, fetched by the user into a folder
git ignores (it is never committed; ``scripts/gpu/README.md`` says how). Its apex
``FusedLayerNorm`` is replaced by ``torch.nn.LayerNorm`` (the same function), and
both models train under the same bf16 autocast, the same loss (cross-entropy over
the tied softmax), the same clipping and the same optimizer (this toolkit's LAMB,
so the ratio measures the models, not two optimizer loops). Rounds alternate
(ours, reference, ours, ...) after each model's untimed warm-up, so drifts of
clock or temperature hit both; the ratio is the median over rounds.

    python scripts/gpu/reference_speed.py --reference .gpu/sha-rnn --out speed.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.engine.hardware.device import configure, flatten_rnns, pick_device  # noqa: E402
from bench.engine.optim import Lamb  # noqa: E402
from bench.models.common import detach_state  # noqa: E402
from bench.models.sharnn import SHARNN, SHARNNConfig  # noqa: E402


def load_reference(folder: Path):
    """The reference ``model`` module, with apex's fused LayerNorm mapped to ``torch.nn.LayerNorm``."""
    fused = types.ModuleType("apex.normalization.fused_layer_norm")
    fused.FusedLayerNorm = torch.nn.LayerNorm
    for name, module in (("apex", types.ModuleType("apex")), ("apex.normalization", types.ModuleType("n")),
                         ("apex.normalization.fused_layer_norm", fused)):
        sys.modules.setdefault(name, module)
    sys.path.insert(0, str(folder))
    import model as reference  # noqa: PLC0415

    return reference


class Ours:
    name = "bench"

    def __init__(self, args, device):
        config = SHARNNConfig(vocab_size=256, emsize=args.emsize, nhid=args.nhid, nlayers=args.nlayers,
                              max_memory=args.max_memory)
        self.model = SHARNN(config).to(device)
        flatten_rnns(self.model)
        self.state = None

    def loss(self, x, y):
        hidden, state = self.model(x, self.state)
        self.state = detach_state(state)
        return F.cross_entropy(self.model.logits(hidden).float().reshape(-1, 256), y.reshape(-1))


class Reference:
    name = "reference"

    def __init__(self, args, device, module):
        self.model = module.SHARNN("LSTM", 256, args.emsize, args.nhid, args.nlayers, dropout=0.1, dropouth=0.1,
                                   dropouti=0.1, dropoute=0.0, wdrop=0.0, tie_weights=True).to(device)
        self.model.num_max_positions = args.max_memory
        self.hidden, self.mems = None, None

    def loss(self, x, y):  # the reference is sequence-first: [T, B]
        h, hidden, mems, _, _ = self.model(x.t(), self.hidden, mems=self.mems, return_h=True)
        self.hidden = [tuple(t.detach() for t in pair) for pair in hidden]
        self.mems = [m.detach() if m is not None and not isinstance(m, list) else m for m in mems]
        logits = F.linear(h, self.model.decoder.weight, self.model.decoder.bias)
        return F.cross_entropy(logits.float().reshape(-1, 256), y.t().reshape(-1))


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """The paper SHA-RNN's sizes and batch, as options (defaults: the reference's enwik8 model, batch 16)."""
    for name, default in (("batch-size", 16), ("bptt", 1024), ("emsize", 1024), ("nhid", 4096), ("nlayers", 4),
                          ("max-memory", 5000)):
        parser.add_argument(f"--{name}", type=int, default=default)


def timed_steps(runner, optimizer, tokens, steps: int, device, amp) -> float:
    """Seconds of ``steps`` training steps (forward, loss, backward, clip 0.25, LAMB), between device syncs."""
    runner.model.train()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = runner.loss(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(runner.model.parameters(), 0.25)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="Folder with the reference's model.py.")
    add_size_arguments(parser)
    parser.add_argument("--steps", type=int, default=10, help="Timed steps per round.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, help="Write the figures here as JSON.")
    args = parser.parse_args(argv)
    if not (args.reference / "model.py").is_file():
        print(f"error: no model.py in {args.reference}; fetch Smerity/sha-rnn's model.py there", file=sys.stderr)
        return 1
    device = pick_device(args.device)
    configure(device)
    amp = torch.bfloat16 if device.type == "cuda" else None
    torch.manual_seed(0)
    runners = [Ours(args, device), Reference(args, device, load_reference(args.reference))]
    optimizers = [Lamb(r.model.parameters(), lr=2e-3, weight_decay=1.2e-6, min_trust=0.25) for r in runners]
    tokens = torch.randint(0, 256, (args.batch_size, args.bptt + 1), device=device)
    warmup = -(-args.max_memory // args.bptt) + 1  # until the memory is full
    for runner, optimizer in zip(runners, optimizers):
        timed_steps(runner, optimizer, tokens, warmup, device, amp)
    seconds = {r.name: [] for r in runners}
    for _ in range(args.rounds):
        for runner, optimizer in zip(runners, optimizers):
            seconds[runner.name].append(timed_steps(runner, optimizer, tokens, args.steps, device, amp))
    step_tokens = args.steps * args.batch_size * args.bptt
    chars = {name: [step_tokens / s for s in values] for name, values in seconds.items()}
    ratios = [a / b for a, b in zip(seconds["reference"], seconds["bench"])]
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        "torch": torch.__version__, "precision": "bfloat16 autocast" if amp else "float32",
        "batch_size": args.batch_size, "bptt": args.bptt, "emsize": args.emsize, "nhid": args.nhid,
        "nlayers": args.nlayers, "max_memory": args.max_memory, "steps_per_round": args.steps,
        "rounds": args.rounds, "warmup_steps": warmup,
        "params": {r.name: sum(p.numel() for p in r.model.parameters() if p.requires_grad) for r in runners},
        "chars_per_second": {name: statistics.median(v) for name, v in chars.items()},
        "chars_per_second_rounds": chars, "ratio_median": statistics.median(ratios), "ratio_rounds": ratios,
    }
    for name, value in result["chars_per_second"].items():
        print(f"{name}: {value:,.0f} characters/s (rounds: {', '.join(f'{c:,.0f}' for c in chars[name])})")
    print(f"ratio bench / reference: {result['ratio_median']:.2f}x (median of {args.rounds} alternating rounds)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
