"""The speed stage's markdown table, from ``bench speed --json`` lines and the reference side-by-side's JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def fmt(value, pattern: str = "{:,.0f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def table(rows: list[dict]) -> list[str]:
    lines = ["| model | preset | params | batch x segment | compile | train chars/s | TFLOP/s | MFU | "
             "eval chars/s | eval / train | warm-up s (train) | peak GiB |",
             "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['preset']} | {r['params_total'] / 1e6:.1f}M | {r['batch_size']} x {r['bptt']} | "
            f"{'yes' if r['compile'] else 'no'} | {fmt(r['train_tokens_per_second'])} | "
            f"{r['train_tflops']:.1f} | {fmt(r['mfu'] and 100 * r['mfu'], '{:.1f}%')} | "
            f"{fmt(r['eval_tokens_per_second'])} | {r['eval_over_train']:.1f}x | "
            f"{r['warmup_seconds']['train']:.1f} | {fmt(r['peak_memory_gb'], '{:.1f}')} |")
    return lines


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
    args = parser.parse_args()
    rows = read_objects(args.rows.read_text())
    device = rows[0]["device"]
    print(f"Device: {device.get('name')} ({device['type']}), torch {device['torch']}"
          + (f", CUDA {device.get('cuda')}, cuDNN {device.get('cudnn')}" if device["type"] == "cuda" else "")
          + f". Precision {rows[0]['precision']}; random tokens over a 256-symbol vocabulary (a token is a "
          f"byte, so tokens/s = characters/s on enwik8); MFU = 3 x forward FLOPs per token x tokens/s over "
          f"the data-sheet dense bf16 peak ({fmt(rows[0]['peak_tflops'], '{:.0f}')} TFLOP/s). Warm-up steps "
          f"(compilation, cuDNN autotuning, the SHA-RNN memory filling) are timed apart.\n")
    print("\n".join(table(rows)))
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
