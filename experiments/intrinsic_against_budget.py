"""Does a measure's rank correlation with the trained models hold as training goes on? The report's section 9 ranks
the tokenizations by their test bits per byte at the end of training; this table asks the same of the validation
curve at fractions of the budget, so a reader sees whether each correlation is settled or still moving.

For each model, each lossless tokenization and each seed, the validation bits per byte is read off the run's
learning curve at a fraction of the matrix's training characters (linear in log characters between the two
evaluations around it), and the report's own correlations (bench.study.report.intrinsic_section.correlations:
Spearman's rho with the cells' seed means, its interval over tokenizations and seeds) are taken of those values in
place of the test split's. Prints Markdown:

    python experiments/intrinsic_against_budget.py results/cpu-vocab-sweep \
        > results/reference/cpu-vocab-sweep/intrinsic-against-budget.md
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.study.report.intrinsic_section import BITS_PER_BYTE, correlations, tokenization_measures  # noqa: E402
from bench.study.report.report import load_study  # noqa: E402
from tokenizers_study.stats import INTRINSIC  # noqa: E402

FRACTIONS = (0.3, 0.5, 0.75, 1.0)  # the sweep evaluates every 100 steps: first at about 0.27 of its budget


def valid_at(log: list[dict], chars: float) -> float:
    """Validation bits per byte at ``chars`` training characters, interpolated linearly in log characters between
    the evaluations around it (NaN before the first)."""
    points = [(e["train_chars"], e["valid_bits_per_byte"]) for e in log
              if e.get("valid_bits_per_byte") is not None and e.get("train_chars")]
    if not points or chars < points[0][0]:
        return math.nan
    x, y = zip(*points)
    return float(np.interp(math.log(chars), np.log(x), y))


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                if line.startswith("model name")), "") if cpuinfo.exists() else ""
    return f"{cpu or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a matrix's results folder")
    args = parser.parse_args()
    study = load_study(args.results)
    done = study.done[study.done["lossless_bool"]]
    measures = tokenization_measures(done, study.runs)
    settings = [study.runs[d].result.resolved["train"] for d in done["run_dir"]]
    budgets, validation = {s["max_train_chars"] for s in settings}, {s["eval_max_chars"] for s in settings}
    if len(budgets) != 1 or None in budgets:
        sys.exit(f"{args.results}: the runs do not share one max_train_chars ({budgets}): this table needs a matrix "
                 "matched on equal characters")
    budget = float(budgets.pop())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    print(f"# Intrinsic measures against validation bits per byte, along the budget: {study.name}\n")
    print(f"`python experiments/intrinsic_against_budget.py {args.results}`, "
          f"{datetime.date.today().isoformat()}, commit {commit}, {machine()}. {len(done)} finished lossless runs; "
          f"budget {budget:,.0f} training characters per run. Each cell: Spearman ρ of the measure with the seed "
          f"means of validation bits per byte (the first {', '.join(f'{n:,}' for n in validation)} characters of the "
          "valid split) at that share of the budget, and its 95% interval over tokenizations and seeds "
          "(bench.study.stats.intrinsic). A negative ρ: the higher the measure, the lower the bits per byte.\n")
    found = {}  # fraction -> the report's correlations of the validation bits per byte at that share of the budget
    for fraction in FRACTIONS:
        at = done.assign(**{BITS_PER_BYTE: [valid_at(study.runs[d].log, fraction * budget) for d in done["run_dir"]]})
        found[fraction] = correlations(at[at[BITS_PER_BYTE].notna()], measures)
    groups = done.groupby(["dataset", "match"]).ngroups
    for (dataset, match, model), runs in done.groupby(["dataset", "match", "model"]):
        text = f"{dataset}, {match}: " if groups > 1 else ""
        print(f"## {text}{model} ({runs['tokenizer'].nunique()} tokenizations, {len(runs)} runs)\n")
        print("| measure | " + " | ".join(f"{f:g} of the budget" for f in FRACTIONS) + " |")
        print("|---|" + "---|" * len(FRACTIONS))
        for key, label in INTRINSIC.items():
            cells = [found[f].get((dataset, match, model, key)) for f in FRACTIONS]
            print(f"| {label} | " + " | ".join(rho.cell() if rho else "-" for rho in cells) + " |")
        print()


if __name__ == "__main__":
    main()
