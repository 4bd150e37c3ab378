"""Where a paper-size SHA-RNN training step spends its GPU time: torch.profiler over a few steps, for this
toolkit's model and (with --reference) the reference's, the top operators by CUDA time.

    python scripts/gpu/profile_step.py --reference .gpu/sha-rnn
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_speed import Ours, Reference, add_size_arguments, load_reference, timed_steps  # noqa: E402

from bench.engine.hardware.device import configure, pick_device  # noqa: E402
from bench.engine.optim import Lamb  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path)
    add_size_arguments(parser)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    device = pick_device("auto")
    configure(device)
    amp = torch.bfloat16 if device.type == "cuda" else None
    runners = [Ours(args, device)]
    if args.reference:
        runners.append(Reference(args, device, load_reference(args.reference)))
    tokens = torch.randint(0, 256, (args.batch_size, args.bptt + 1), device=device)
    activities = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    for runner in runners:
        optimizer = Lamb(runner.model.parameters(), lr=2e-3, weight_decay=1.2e-6, min_trust=0.25)
        timed_steps(runner, optimizer, tokens, -(-args.max_memory // args.bptt) + 1, device, amp)
        with torch.profiler.profile(activities=activities) as prof:
            seconds = timed_steps(runner, optimizer, tokens, args.steps, device, amp)
        print(f"\n## {runner.name}: {args.steps} steps in {seconds:.3f} s "
              f"({args.steps * args.batch_size * args.bptt / seconds:,.0f} characters/s under the profiler)")
        print(prof.key_averages().table(sort_by=sort, row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
