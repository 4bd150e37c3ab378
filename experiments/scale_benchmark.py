"""How each stage of the toolkit scales with the corpus: wall time and peak resident memory at several sizes of a
synthetic corpus (bench data synthesize), each stage a `bench` command (or a short script) in its own process.

    python experiments/scale_benchmark.py --sizes 10,30,100 --out scale-out            # enwik8-shaped, MB of text
    python experiments/scale_benchmark.py --corpus wikitext-103 --sizes 540 --out s2    # MB of train text

enwik8: per size N MB the synthetic file is cut 90/5/5 into train, valid and test (enwik8's proportions) and added
as a user corpus; at 100 MB the real enwik8 path (zip, reference split) is measured too. Then every scheme is
trained, every split encoded, cached and measured (tokenize stats); a tiny LSTM starts warm (cache hit) and
evaluates the 5% test split, a second run (seed 1) starts with everything cached (the time to their first step
is their results' startup_seconds), the first model evaluates that split again alone, the document bootstrap runs
on its per-token losses, a matrix of four tiny runs that dump their token losses runs, the compressor baselines
run (the report shows them) and the four runs are reported. wikitext-103: the stand-in is fetched through its zip
and the word and BPE schemes measured (--schemes). Time per MB and memory per MB at each size say whether a stage
is linear. Figures, not assertions: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMES = {"enwik8": "byte,char,bpe:32768,sp-unigram:16384,word:50000,word-open:50000",
           "wikitext-103": "word:50000,bpe:32768"}
TINY = ["--set", "emsize=16", "--set", "nhid=16", "--set", "batch_size=4", "--set", "bptt=32", "--set", "max_steps=1",
        "--set", "eval_every=0", "--set", "final_eval_splits=test", "--set", "dump_token_losses=true"]
BOOTSTRAP = """
import sys
from pathlib import Path
from bench.engine.result import RunResult
from bench.study.matrix.finished_run import FinishedRun
from bench.study.stats.uncertainty import document_interval
run = Path(sys.argv[1])
result = RunResult.from_json(__import__("json").loads((run / "result.json").read_text()))
losses = FinishedRun({}, result, run).text_losses("test")
if losses is None:
    sys.exit("error: no document losses (too few documents, or no token losses dumped)")
low, high = document_interval([losses])
print(f"{len(losses.bits)} documents, 95% interval {low:.4f} to {high:.4f} bits/byte")
"""
MATRIX = """[matrix]
name = "scale-{name}"
description = "Four tiny runs that dump their test losses: what bench report reads at this size."
match = "tokens"

[axes]
model = ["lstm"]
tokenizer = ["byte", "char"]
dataset = ["{name}"]
seed = [0, 1]

[budget]
tokens = 128  # one step of 4 rows of 32 tokens

[context]
tokens = 32

[shared]
preset = "tiny"
emsize = 16
nhid = 16
batch_size = 4
eval_every = 0
final_eval_splits = "test"
dump_token_losses = true
"""


def measure(command: list[str], env: dict) -> tuple[float, float, str]:
    """Wall seconds and peak resident memory (MiB) of one command run in its own process (GNU time's %M:
    getrusage's children figure is the largest child so far, not this one's)."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "peak-kib %M", *command], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    peak = next((int(line.split()[1]) / 1024 for line in reversed(lines) if line.startswith("peak-kib")), float("nan"))
    if done.returncode != 0:
        problem = next((line for line in lines if line.startswith("error:") or "Error" in line), lines[-2:])
        return wall, peak, f"FAILED: {str(problem)[:200]}"
    return wall, peak, done.stdout.strip().splitlines()[-1][:120] if command[1] == "-c" else ""


def bench(*args: str) -> list[str]:
    return [sys.executable, str(REPO / "cli.py"), *args]


def enwik8_stages(megabytes: int, out: Path, env: dict, schemes: list[str]) -> list[tuple[str, list[str]]]:
    size = megabytes * 1_000_000
    mirror = out / f"mirror-{megabytes}"
    subprocess.run(bench("data", "synthesize", "enwik8", "--bytes", str(size), "--out", str(mirror)), env=env,
                   check=True, capture_output=True)
    import zipfile

    text = zipfile.ZipFile(mirror / "enwik8.zip").read("enwik8")
    cut = [0, int(size * 0.9), int(size * 0.95), size]
    name, data = f"syn{megabytes}", out / f"data-{megabytes}"
    for split, (a, b) in zip(("train", "valid", "test"), zip(cut, cut[1:])):
        (out / f"{name}.{split}.txt").write_bytes(text[a:b])
    common = ["--data-dir", str(data)]
    run = out / f"run-{name}"
    (out / f"{name}.toml").write_text(MATRIX.format(name=name))
    plan = [("add the corpus (read, hash, copy)",
             bench("data", "add", name, *[x for s in ("train", "valid", "test")
                                          for x in (f"--{s}", str(out / f"{name}.{s}.txt"))], *common))]
    if megabytes == 100:
        plan.append(("fetch enwik8 from the zip (reference split, unverified)",
                     bench("data", "fetch", "enwik8", "--mirror", str(mirror), "--allow-unverified", *common)))
    plan += [(f"tokenize stats {s} (train, encode and measure every split)",
              bench("tokenize", "stats", "--dataset", name, "--schemes", s, *common)) for s in schemes]
    plan += [
        ("train byte, warm cache: 1 step and the 5%-test evaluation",
         bench("train", "--dataset", name, "--tokenizer", "byte", "--model", "lstm", *TINY, "--out", str(run),
               "--quiet", *common)),
        ("train byte again, seed 1 (tokenizer, ids and measures cached): 1 step and the evaluation",
         bench("train", "--dataset", name, "--tokenizer", "byte", "--model", "lstm", *TINY, "--seed", "1", "--out",
               str(out / f"run-{name}-again"), "--quiet", *common)),
        ("eval of the 5%-test split alone by that tiny model", bench("eval", str(run), "--split", "test", *common)),
        ("document bootstrap on its 5%-test token losses (pages, 4,000 resamples)",
         [sys.executable, "-c", BOOTSTRAP, str(run)]),
        ("run-matrix: 4 tiny runs (byte, char x 2 seeds) dumping 5%-test losses",
         bench("run-matrix", str(out / f"{name}.toml"), "--results", str(out / f"results-{name}"), "--quiet",
               *common)),
        ("baselines (gzip, bzip2, xz, zstd, PPMd on test, primed with train)",
         bench("baselines", name, "--splits", "test", "--quiet", *common)),
        ("report of those 4 runs (tables, bootstrap, figures, HTML; baselines cached)",
         bench("report", str(out / f"results-{name}"), "--out", str(out / f"report-{name}"))),
    ]
    return plan


def wikitext103_stages(megabytes: int, out: Path, env: dict, schemes: list[str]) -> list[tuple[str, list[str]]]:
    mirror, data = out / f"wt103-mirror-{megabytes}", out / f"wt103-data-{megabytes}"
    subprocess.run(bench("data", "synthesize", "wikitext-103", "--bytes", str(megabytes * 1_000_000), "--out",
                         str(mirror)), env=env, check=True, capture_output=True)
    common = ["--data-dir", str(data)]
    return ([("fetch wikitext-103 from the zip (unverified)",
              bench("data", "fetch", "wikitext-103", "--mirror", str(mirror), "--allow-unverified", *common))]
            + [(f"tokenize stats {s} (train, encode and measure every split)",
                bench("tokenize", "stats", "--dataset", "wikitext-103", "--schemes", s, *common)) for s in schemes])


def startup_note(run: Path) -> str:
    result = run / "result.json"
    if not result.is_file():
        return ""
    seconds = json.loads(result.read_text())["training"].get("startup_seconds")
    return f"first step {seconds:.1f} s after the start" if seconds else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(SCHEMES), default="enwik8")
    parser.add_argument("--sizes", default="10,30,100", help="MB of text (wikitext-103: of train), comma-separated")
    parser.add_argument("--schemes", help="comma-separated (default: " + "; ".join(f"{c}: {s}" for c, s in
                                                                                   SCHEMES.items()) + ")")
    parser.add_argument("--out", default="scale-out", help="scratch folder (corpora, caches, runs)")
    parser.add_argument("--mirror", default=os.environ.get("BENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data")))
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BENCH_DATA_MIRROR": options.mirror, "PYTHONPATH": str(REPO),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    schemes = (options.schemes or SCHEMES[options.corpus]).split(",")
    stages = enwik8_stages if options.corpus == "enwik8" else wikitext103_stages
    rows = []
    for megabytes in (int(s) for s in options.sizes.split(",")):
        for label, command in stages(megabytes, out, env, schemes):
            wall, peak, note = measure(command, env)
            if label.startswith("train byte"):
                note = note or startup_note(Path(command[command.index("--out") + 1]))
            rows.append({"MB": megabytes, "stage": label, "seconds": wall, "s/MB": wall / megabytes,
                         "peak MiB": peak, "note": note})
            print(f"{megabytes} MB | {label} | {wall:.1f} s | {peak:.0f} MiB {note}", file=sys.stderr, flush=True)
    print("| MB | stage | seconds | s/MB | peak MiB | note |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['MB']} | {r['stage']} | {r['seconds']:.1f} | {r['s/MB']:.2f} | {r['peak MiB']:.0f} "
              f"| {r['note']} |")


if __name__ == "__main__":
    main()
