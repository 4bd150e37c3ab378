"""How each stage of the toolkit scales with the corpus: wall time and peak resident memory at several sizes of a
synthetic enwik8 (bench data synthesize), each stage a `bench` command in its own process.

    python scripts/scale_benchmark.py --sizes 10,30,100 --out scale-out       # MB of text; prints a Markdown table

Per size N MB: the synthetic file is cut 90/5/5 into train, valid and test (enwik8's proportions) and added as a
user corpus; then every stage runs on it. At 100 MB the real enwik8 path (zip, reference split) is measured too.
Time per MB and memory per MB at each size say whether a stage is linear (the issue's target: time per byte at
100 MB within 1.3x of that at 10 MB). Figures, not assertions: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMES = ("byte", "char", "bpe:32768", "sp-unigram:16384", "word:50000", "word-open:50000")
TINY = ["--model", "lstm", "--set", "emsize=16", "--set", "nhid=16", "--set", "batch_size=4", "--set", "bptt=32",
        "--set", "max_steps=1", "--set", "eval_every=0", "--set", "final_eval_splits=test", "--quiet"]


def measure(args: list[str], env: dict) -> tuple[float, float, str]:
    """Wall seconds and peak resident memory (MiB) of one `bench` command run in its own process (GNU time's %M:
    getrusage's children figure is the largest child so far, not this one's)."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "peak-kib %M", sys.executable, str(REPO / "cli.py"), *args], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    peak = next((int(line.split()[1]) / 1024 for line in reversed(lines) if line.startswith("peak-kib")), float("nan"))
    if done.returncode != 0:
        problem = next((line for line in lines if line.startswith("error:") or "Error" in line), lines[-2:])
        return wall, peak, f"FAILED: {str(problem)[:200]}"
    return wall, peak, ""


def stages(name: str, data: Path, out: Path, mirror: Path | None) -> list[tuple[str, list[str]]]:
    common = ["--data-dir", str(data)]
    plan = [(f"tokenize stats {s} (train, encode and measure every split)",
             ["tokenize", "stats", "--dataset", name, "--schemes", s, *common]) for s in SCHEMES]
    plan.append(("train byte, warm cache: 1 step and the 5%-test evaluation",
                 ["train", "--dataset", name, "--tokenizer", "byte", *TINY, "--out", str(out / f"run-{name}"),
                  *common]))
    plan.append(("baselines (gzip, bzip2, xz, zstd, brotli, PPMd on test, primed with train)",
                 ["baselines", name, "--splits", "test", "--quiet", *common]))
    if mirror is not None:
        plan.insert(0, ("fetch enwik8 from the zip (reference split, unverified)",
                        ["data", "fetch", "enwik8", "--mirror", str(mirror), "--allow-unverified", *common]))
    return plan


def run_size(megabytes: int, out: Path, env: dict, real_path: bool) -> list[dict]:
    size = megabytes * 1_000_000
    mirror = out / f"mirror-{megabytes}"
    subprocess.run([sys.executable, str(REPO / "cli.py"), "data", "synthesize", "enwik8", "--bytes", str(size),
                    "--out", str(mirror)], env=env, check=True, capture_output=True)
    import zipfile

    text = zipfile.ZipFile(mirror / "enwik8.zip").read("enwik8")
    cut = [0, int(size * 0.9), int(size * 0.95), size]
    for split, (a, b) in zip(("train", "valid", "test"), zip(cut, cut[1:])):
        (out / f"syn{megabytes}.{split}.txt").write_bytes(text[a:b])
    data, name = out / f"data-{megabytes}", f"syn{megabytes}"
    rows = []
    files = [x for s in ("train", "valid", "test") for x in (f"--{s}", str(out / f"{name}.{s}.txt"))]
    add = ["data", "add", name, *files, "--data-dir", str(data)]
    for label, args in [("add the corpus (read, hash, copy)", add)] + stages(name, data, out,
                                                                               mirror if real_path else None):
        wall, peak, problem = measure(args, env)
        rows.append({"MB": megabytes, "stage": label, "seconds": wall, "s/MB": wall / megabytes,
                     "peak MiB": peak, "note": problem})
        print(f"{megabytes} MB | {label} | {wall:.1f} s | {peak:.0f} MiB {problem}", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,30,100", help="MB of text, comma-separated")
    parser.add_argument("--out", default="scale-out", help="scratch folder (corpora, caches, runs)")
    parser.add_argument("--mirror", default=os.environ.get("BENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data")))
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BENCH_DATA_MIRROR": options.mirror,
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    rows = []
    for megabytes in (int(s) for s in options.sizes.split(",")):
        rows += run_size(megabytes, out, env, real_path=megabytes == 100)
    print("| MB | stage | seconds | s/MB | peak MiB | note |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['MB']} | {r['stage']} | {r['seconds']:.1f} | {r['s/MB']:.2f} | {r['peak MiB']:.0f} "
              f"| {r['note']} |")


if __name__ == "__main__":
    main()
