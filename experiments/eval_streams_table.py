"""What a throughput setting of evaluation costs: test bits per byte of finished runs scored with 1 stream (no
restart) and with more streams (each restarted from <bos>, so its first tokens see less context). Prints the rows
of ``results/reference/eval-streams-cost.md``; what the streams buy in speed is ``bench speed``'s to measure.

    python experiments/eval_streams_table.py RUN_FOLDER... [--streams 16,64,256] [--data-dir DIR]

Each score is ``bench eval RUN --split test --streams S --json`` in a subprocess of its own (nothing is written).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CLI = Path(__file__).resolve().parent.parent / "cli.py"


def score(run: Path, streams: int, data_dir: str | None) -> dict:
    command = [sys.executable, str(CLI), "eval", str(run), "--split", "test", "--streams", str(streams), "--json",
               "--threads", "1"]  # one thread: two oversubscribe a loaded 2-core machine
    if data_dir:
        command += ["--data-dir", data_dir]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["metrics"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--streams", default="16,64,256")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    layouts = [int(s) for s in args.streams.split(",")]
    print("| run | tokens | bits/byte, 1 stream | " + " | ".join(f"{s} streams" for s in layouts) + " |")
    print("|---|---:|---:|" + "---:|" * len(layouts))
    for run in args.runs:
        spec = json.loads((run / "spec.json").read_text())["spec"]
        one, cells = score(run, 1, args.data_dir), []
        for streams in layouts:
            many = score(run, streams, args.data_dir)
            cost = many["bits_per_byte"] / one["bits_per_byte"] - 1
            cells.append(f"{many['bits_per_byte']:.6f} ({100 * cost:+.3f}%)")
        print(f"| {spec['model']} {spec['preset']}, {spec['tokenizer']} | {one['n_tokens']:,} | "
              f"{one['bits_per_byte']:.6f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
