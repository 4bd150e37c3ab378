"""Where the demo's time went (``make demo`` prints it last): each part's wall seconds from the times
``scripts/demo.sh`` marked, and inside the runs, the training and the evaluation each run recorded.

    python scripts/demo_split.py PHASES_FILE RESULTS_FOLDER

PHASES_FILE holds lines ``NAME UNIX_TIME``, the first ``start``: each part ends at its line. The runs' own seconds
add up to more than the runs' wall time when they run side by side (two at a time on two cores).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PARTS = {"fetch": "fetching WikiText-2", "tokenizers": "training the tokenizers and encoding the splits",
         "runs": "the runs (two at a time)", "baselines": "waiting for the compressor baselines",
         "report": "the report", "reproduce": "the comparison with results/reference/quick-2cpu"}


def main(phases_file: str, results: str) -> None:
    marks = [line.split() for line in Path(phases_file).read_text().splitlines() if line.strip()]
    times = [(name, float(when)) for name, when in marks]
    print("where the demo's time went (wall seconds):")
    for (_, before), (name, after) in zip(times, times[1:]):
        print(f"  {after - before:6.1f}  {PARTS.get(name, name)}")
        if name == "runs":
            print_runs(Path(results))
    print(f"  {times[-1][1] - times[0][1]:6.1f}  demo work in all (after set-up)")


def print_runs(results: Path) -> None:
    runs = [json.loads(path.read_text()) for path in sorted(results.glob("*/result.json"))]
    if not runs:
        return
    training = sum(run["training"]["seconds"] for run in runs)
    evaluation = sum(split["eval_seconds"] for run in runs for split in run["metrics"].values())
    whole = sum(run["provenance"]["wall_seconds"] for run in runs)
    print(f"          inside them, summed over {len(runs)} runs: training {training:.1f} s, final evaluation "
          f"{evaluation:.1f} s, the rest (start, validation, checkpoints) {whole - training - evaluation:.1f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
