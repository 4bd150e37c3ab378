"""The speed stage's markdown table, from ``bench speed --json`` lines and the reference side-by-side's JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def fmt(value, pattern: str = "{:,.0f}") -> str:
    return "n/a" if value is None else pattern.format(value)


EVAL_STREAMS = ("16", "256")  # bench speed's default stream counts: the columns when no row has any


def eval_streams_of(rows: list[dict]) -> list[str]:
    """The stream counts the rows measured evaluation at, in order: a column pair each."""
    measured = {streams for r in rows for streams in (r.get("eval") or {})}
    return sorted(measured, key=int) if measured else list(EVAL_STREAMS)


def table(rows: list[dict]) -> list[str]:
    streams = eval_streams_of(rows)
    evals = " | ".join(f"eval chars/s, {s} streams | eval / train" for s in streams)
    lines = ["| model | preset | settings | params | batch x segment | precision | optimizer | compile | CUDA graphs | "
             f"train chars/s | TFLOP/s | MFU | {evals} | warm-up s (train) | compiling s | peak GiB |",
             "| --- | --- | --- | ---: | --- | --- | --- | --- | --- |" + " ---: |" * (6 + 2 * len(streams))]
    for r in rows:
        # rows of earlier versions have neither compile_seconds nor the optimizer and graphs fields
        compiling = fmt((r.get("compile_seconds") or {}).get("train"), "{:.1f}") if r["compile"] else "-"
        mfu = "no peak" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        lines.append(
            f"| {r['model']} | {r['preset']} | {settings(r)} | {r['params_total'] / 1e6:.1f}M | "
            f"{r['batch_size']} x {r['bptt']} | "
            f"{r['precision']} | {r.get('optimizer', 'n/a')} | {'yes' if r['compile'] else 'no'} | "
            f"{'yes' if r.get('cuda_graphs') else 'no'} | {fmt(r['train_tokens_per_second'])} | "
            f"{r['train_tflops']:.1f} | {mfu} | {eval_cells(r, streams)} | "
            f"{r['warmup_seconds']['train']:.1f} | {compiling} | "
            f"{fmt(r['peak_memory_gb'], '{:.1f}')} |")
    return lines


def settings(row: dict) -> str:
    """The row's --set pairs that no column shows (layer_overlap, lamb_impl, ...); "-" for none (or an older row)."""
    shown = ("precision", "compile", "cuda_graphs", "threads")
    return ", ".join(f"{k}={v}" for k, v in sorted((row.get("settings") or {}).items()) if k not in shown) or "-"


def profile_table(rows: list[dict]) -> list[str]:
    """Each profiled row's step split by part (ms per step and share), and the step over its recurrent time."""
    profiled = [r for r in rows if r.get("profile")]
    if not profiled:
        return []
    parts = list(profiled[0]["profile"]["seconds"])
    lines = ["", "Profile of a training step (`bench speed --profile`, torch.profiler; ms per step, share of the "
             "step):", "", "| model | settings | step ms | " + " | ".join(parts) + " | step / recurrent |",
             "| --- | --- | ---: |" + " ---: |" * (len(parts) + 1)]
    for r in profiled:
        prof, step = r["profile"], r["profile"]["step_seconds"]
        cells = ["n/a" if prof["seconds"][part] is None else
                 f"{1e3 * prof['seconds'][part]:.1f} ({100 * prof['seconds'][part] / step:.0f}%)" for part in parts]
        ratio = prof.get("step_over_recurrent")
        lines.append(f"| {r['model']} {r['preset']}, {r['precision']} | {settings(r)} | {1e3 * step:.1f} | "
                     + " | ".join(cells) + f" | {fmt(ratio, '{:.2f}x')} |")
    return lines


def sweep_table(sweeps: list[list[dict]]) -> list[str]:
    """Each batch sweep (`bench speed --batch-sizes`): a row per batch size, the fastest marked."""
    lines = []
    for sweep in sweeps:
        first = next((r for r in sweep if "error" not in r), None)
        if first is None:
            continue
        lines += ["", f"Batch sweep, {first['model']} {first['preset']}, {first['precision']}"
                  + (", compiled" if first["compile"] else "") + f", segments of {first['bptt']}:", "",
                  "| batch | train chars/s | TFLOP/s | MFU | peak GiB |", "| ---: | ---: | ---: | ---: | ---: |"]
        for r in sweep:
            if "error" in r:
                lines.append(f"| {r['batch_size']} | {r['error']} | | | |")
                continue
            mfu = "no peak" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
            best = " (fastest)" if r.get("best") else ""
            lines.append(f"| {r['batch_size']}{best} | {fmt(r['train_tokens_per_second'])} | "
                         f"{r['train_tflops']:.1f} | {mfu} | {fmt(r['peak_memory_gb'], '{:.1f}')} |")
    return lines


def eval_cells(row: dict, stream_counts: list[str]) -> str:
    """Evaluation's rate and its ratio to training's at each stream count; the error where it failed (out of
    memory), n/a where not measured (rows of earlier versions timed evaluation in the training batch's layout
    instead: not comparable, not shown)."""
    cells = []
    for streams in stream_counts:
        measured = (row.get("eval") or {}).get(streams) or {}
        cells += ([fmt(measured["tokens_per_second"]), f"{measured['over_train']:.1f}x"] if "over_train" in measured
                  else [measured.get("error", "n/a"), "n/a"])
    return " | ".join(cells)


def read_objects(text: str) -> list[dict]:
    """The JSON objects written one after another (``bench speed --json`` prints indented JSON)."""
    decoder, objects, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        obj, end = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        objects.append(obj)
        at = end
    return objects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("rows", type=Path)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--notes", type=Path, help="Lines on variants not measured (skipped, failed) and on the "
                        "CUDA tests a variant waits on.")
    args = parser.parse_args()
    objects = read_objects(args.rows.read_text())
    rows = [obj for obj in objects if isinstance(obj, dict)]
    sweeps = [obj for obj in objects if isinstance(obj, list)]  # --batch-sizes prints a list of rows
    any_row = (rows + [r for sweep in sweeps for r in sweep if "error" not in r])[0]
    device, peak = any_row["device"], any_row["peak_tflops"]
    print(f"Device: {device.get('name')} ({device['type']}), torch {device['torch']}"
          + (f", CUDA {device.get('cuda')}, cuDNN {device.get('cudnn')}" if device["type"] == "cuda" else "")
          + ". Random tokens over a 256-symbol vocabulary (a token is a byte, so tokens/s = characters/s on "
          "enwik8); MFU = 3 x forward FLOPs per token x tokens/s over "
          + (f"the data-sheet dense bf16 peak ({peak:.0f} TFLOP/s)" if peak else "a peak: none is known for this "
             "device") + ". Evaluation is timed as it runs (carried state, the run's chunk, float32 output "
          "projection) at each number of streams shown. Warm-up steps (compilation, cuDNN autotuning, the SHA-RNN memory "
          "filling, a CUDA graph's capture) are timed apart; compiling s is torch.compile's share of them.\n")
    print("\n".join(table(rows) + profile_table(rows) + sweep_table(sweeps)))
    notes = args.notes.read_text().splitlines() if args.notes and args.notes.is_file() else []
    if notes:
        print("\nNotes (what was not measured, and why; the CUDA test a variant waits on):\n")
        print("\n".join(f"- {line}" for line in notes))
    if args.reference and args.reference.is_file():
        ref = json.loads(args.reference.read_text())
        cps = ref["chars_per_second"]
        print(f"\nSide by side with the reference SHA-RNN (Smerity/sha-rnn model.py, apex LayerNorm -> "
              f"torch LayerNorm), same GPU, same command, {ref['rounds']} alternating rounds of "
              f"{ref['steps_per_round']} steps, batch {ref['batch_size']} x {ref['bptt']}, memory "
              f"{ref['max_memory']}, {ref['precision']}, the same LAMB for both:\n")
        print("| implementation | parameters with a gradient | train chars/s (median) | rounds |")
        print("| --- | ---: | ---: | --- |")
        for name in ("bench", "reference"):
            rounds = ", ".join(f"{c:,.0f}" for c in ref["chars_per_second_rounds"][name])
            print(f"| {name} | {ref['params'][name]:,} | {cps[name]:,.0f} | {rounds} |")
        print(f"\nRatio bench / reference: **{ref['ratio_median']:.2f}x** (median over rounds; per round "
              f"{', '.join(f'{r:.2f}' for r in ref['ratio_rounds'])}).")


if __name__ == "__main__":
    main()
