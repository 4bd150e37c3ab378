"""``bench speed`` of two checkouts on this machine, side by side: alternating rounds, medians, ratios.

Each round runs every model and preset once in each checkout (its own ``cli.py``, one process each), the order of
the two alternating from round to round, so that a load that comes and goes hits both; the table gives the median
training tokens/s of each, and evaluation's at 16 and 256 streams, and the ratio after / before, with each round's
ratio (evaluation: n/a against a checkout from before ``bench speed`` timed it at those streams). The machine's load
average is printed before and after (a busy machine spreads the rounds).

    python experiments/speed_before_after.py --before ../before --after . --rounds 5 --steps 20,4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


KINDS = {"train": "train tokens/s", "16": "eval tokens/s, 16 streams", "256": "eval tokens/s, 256 streams"}


def rate(row: dict, kind: str) -> float | None:
    """Training's tokens/s (``train``), or evaluation's at a stream count; None where the row has none (out of
    memory, or an earlier version's row)."""
    if kind == "train":
        return row["train_tokens_per_second"]
    return ((row.get("eval") or {}).get(kind) or {}).get("tokens_per_second")


def measure(checkout: Path, model: str, preset: str, steps: int, threads: int) -> dict:
    command = [sys.executable, "cli.py", "speed", "--model", model, "--preset", preset, "--vocab-size", "256",
               "--steps", str(steps), "--json", "--set", f"threads={threads}"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(checkout)})
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} in {checkout} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--models", default="sha-rnn,lstm,transformer")
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", default="20,4", help="Timed steps of each measurement, for each preset.")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    steps = dict(zip(args.presets.split(","), map(int, args.steps.split(",")), strict=True))
    cells = [(m, p) for p in steps for m in args.models.split(",")]
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rates = {(side, cell, kind): [] for side in sides for cell in cells for kind in KINDS}
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    for round_ in range(args.rounds):
        for cell in cells:
            for side in (["before", "after"] if round_ % 2 == 0 else ["after", "before"]):
                row = measure(sides[side], *cell, steps[cell[1]], args.threads)
                for kind in KINDS:
                    rates[side, cell, kind].append(rate(row, kind))
        print(f"round {round_ + 1} of {args.rounds} done, load average {os.getloadavg()}", flush=True)
    print("\n| model | preset | " + " | ".join(f"{name} before | after | after / before (rounds)"
                                              for name in KINDS.values())
          + " |\n| --- | --- |" + " ---: | ---: | --- |" * len(KINDS))
    for cell in cells:
        columns = []
        for kind in KINDS:
            before, after = rates["before", cell, kind], rates["after", cell, kind]
            if None in before + after:
                columns.append("n/a | n/a | n/a")
                continue
            ratios = [a / b for a, b in zip(after, before)]
            columns.append(f"{statistics.median(before):,.0f} | {statistics.median(after):,.0f} | "
                           f"**{statistics.median(ratios):.2f}** ({', '.join(f'{r:.2f}' for r in ratios)})")
        print(f"| {cell[0]} | {cell[1]} | {' | '.join(columns)} |")
    print(f"\nload average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
