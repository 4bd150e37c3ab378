"""The grid that chose the not-learning rule (bench.engine.learning): short CPU runs that learn and runs that do
not, each trained once with the stop off, and candidate rules applied to their validations afterwards (training
is deterministic up to a stop, so a rule's verdict on a log is what it would have done in the run).

    python experiments/not_learning_grid.py run [--jobs 2] [--only NAME ...]   # trains what is not done (resumable)
    python experiments/not_learning_grid.py table > results/reference/not-learning-rule.md

Classes, from the last validation against the unigram floor (bits per character): *learns* ends at least 10%
below it (the end-of-run check), *does not learn* ends short of 2% below it (at it, or above it); between the two, no requirement. A rule
must stop no run that learns, and should stop every run that does not, as early as its evidence allows.

The grid: the tiny SHA-RNN, LSTM and Transformer on WikiText-2 bytes (batch 4 x 64 characters, one thread), peak
learning rates 1e-9 to 1e-2, warmups of none, half and 90% of the budget, budgets of 60, 250 and 1,000 steps with
ten validations each; the reported cases (the 100-step tiny SHA-RNN validated every 20 steps; lr 1e-4 with a
warmup of 300 of 400 steps); and the GPU study's SHA-RNN cell (13.5M parameters) at batch 8 x 128 for 300 steps,
validated every 10, in float32 (a plateau that ends late: it sat at its floor until about step 130) and with
unscaled float16 LSTMs as `experiments/sharnn_plateau.py` emulates them (the H100 failure; float32 elsewhere; 150
steps, as the emulation is slow). bf16
autocast, the GPU study's other plateau, is left out: a CPU without bf16 instructions runs it ten times slower.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments"))

OUT = REPO / "runs" / "not-learning-grid"
LEARNS, DOES_NOT, BETWEEN = "learns", "does not learn", "between"
TINY = dict(batch_size=4, context_chars=64, eval_max_chars=10_000, eval_streams=8, log_every=10, threads=1,
            final_eval_splits="valid")
CELL = dict(emsize=512, nhid=2048, max_memory=1024, batch_size=8, context_chars=128, eval_max_chars=20_000,
            eval_streams=8, log_every=10, threads=1, final_eval_splits="valid", warmup_steps=100)


@dataclass(frozen=True)
class Point:
    name: str
    model: str
    preset: str
    settings: dict = field(default_factory=dict)
    emulated_float16_lstms: bool = False  # the H100 failure, as experiments/sharnn_plateau.py emulates it


def _number(x: float) -> str:
    return f"{x:g}".replace("+", "").replace(".", "p")


def grid() -> list[Point]:
    points = []
    for model in ("sha-rnn", "lstm", "transformer"):
        for budget in (60, 250, 1000):
            for lr in (1e-9, 1e-5, 1e-4, 1e-3, 1e-2):
                for warmup_share in (0.0, 0.5, 0.9):
                    warmup = round(budget * warmup_share)
                    settings = {**TINY, "max_steps": budget, "eval_every": budget // 10, "lr": lr,
                                "warmup_steps": warmup, "checkpoint_every": budget}
                    points.append(Point(f"{model}-b{budget}-lr{_number(lr)}-w{warmup}", model, "tiny", settings))
    points.append(Point("issue-sha-rnn-tiny-100-steps", "sha-rnn", "tiny",
                        {**TINY, "max_steps": 100, "eval_every": 20, "checkpoint_every": 100}))
    points.append(Point("issue-sha-rnn-lr1e-4-w300-of-400", "sha-rnn", "tiny",
                        {**TINY, "max_steps": 400, "eval_every": 20, "lr": 1e-4, "warmup_steps": 300,
                         "checkpoint_every": 400}))
    cell = {**CELL, "max_steps": 300, "eval_every": 10, "checkpoint_every": 50}
    points.append(Point("cell-float32", "sha-rnn", "small", {**cell, "precision": "float32"}))
    points.append(Point("cell-unscaled-fp16-lstm", "sha-rnn", "small",  # 150 steps: the emulation is slow
                        {**cell, "max_steps": 150, "precision": "float32"}, emulated_float16_lstms=True))
    return points


def train_point(point: Point) -> str:
    from bench.engine.run import train
    from bench.engine.spec import RunSpec
    from sharnn_plateau import emulated_float16_lstms

    out = OUT / point.name
    settings = {**point.settings, "stop_if_not_learning": False}  # every run whole: the rules judge its log
    emulate = emulated_float16_lstms() if point.emulated_float16_lstms else contextlib.nullcontext()
    with emulate:
        train(RunSpec(point.model, point.preset, "byte", "wikitext-2", 0, settings, out_dir=str(out)),
              show_progress=False)
    return point.name


def run(jobs: int, only: list[str]) -> None:
    todo = [p for p in grid() if (not only or p.name in only) and not (OUT / p.name / "result.json").is_file()]
    # the cells and the reported cases first, then the grid's short budgets before its long ones
    todo.sort(key=lambda p: (not p.name.startswith(("cell-", "issue-")), p.settings["max_steps"]))
    print(f"{len(todo)} runs to train", file=sys.stderr)
    with ProcessPoolExecutor(jobs) as pool:
        for name in pool.map(train_point, todo):
            print(name, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the rules


@dataclass
class Log:
    """What a rule sees of a run: its validations (step, bits per character), its floor, warmup and budget."""

    name: str
    validations: list[tuple[int, float]]
    floor: float
    warmup: int
    budget: int
    eval_every: int

    @property
    def final(self) -> float:
        return self.validations[-1][1]

    @property
    def below(self) -> float:
        return 1.0 - self.final / self.floor

    @property
    def late_progress(self) -> float:
        """How much better (relative) the last validation is than the best up to 70% of the budget."""
        earlier = [bpc for step, bpc in self.validations if step <= 0.7 * self.budget] or [self.validations[0][1]]
        return 1.0 - self.final / min(earlier)

    @property
    def flat(self) -> bool:
        return self.late_progress < 0.01

    @property
    def judgeable(self) -> bool:
        """Whether the chosen rule has the validations to judge it (bench.engine.learning.too_few_validations)."""
        from bench.engine.learning import PATIENCE, validations_to_judge

        total, judged = validations_to_judge(self.budget, self.warmup, self.eval_every)
        return judged >= PATIENCE and total > PATIENCE

    @property
    def verdict(self) -> str:
        return LEARNS if self.below >= 0.10 else DOES_NOT if self.below < 0.02 else BETWEEN


def read_log(point: Point) -> Log | None:
    path = OUT / point.name / "log.jsonl"
    if not (OUT / point.name / "result.json").is_file():
        return None
    validations, floor = [], None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if "valid_bits_per_char" in entry:
            validations.append((entry["step"], entry["valid_bits_per_char"]))
            floor = entry["valid_floor_bits_per_char"]
    return Log(point.name, validations, floor, point.settings.get("warmup_steps", 20), point.settings["max_steps"],
               point.settings["eval_every"])


def rule_as_before(log: Log) -> int | None:
    """The rule this grid replaces: past 25% of the budget and warmup, stop unless 2% below the floor."""
    for step, bpc in log.validations:
        if step >= 0.25 * log.budget and step > log.warmup and bpc > 0.98 * log.floor:
            return step
    return None


def rule_plateau(patience: int, progress: float, after: float):
    """bench.engine.learning's rule with these constants: from ``after`` of the budget, stop at the first
    validation where the last ``patience`` are stalled at the floor (``stalled_at_floor``)."""
    from bench.engine.learning import stalled_at_floor

    def rule(log: Log) -> int | None:
        for i, (step, _) in enumerate(log.validations):
            if step >= after * log.budget and stalled_at_floor(log.validations[: i + 1], log.floor, log.warmup,
                                                               patience, progress):
                return step
        return None
    return rule


def table() -> str:
    from bench.engine.learning import PATIENCE, PROGRESS
    from bench.engine.spec import TrainConfig

    logs = [log for log in map(read_log, grid()) if log is not None]
    rules = {"as before": rule_as_before}
    for after in (0.0, 0.25, 0.5):
        for patience in (2, 3, 4):
            for progress in (0.005, 0.01, 0.02):
                rules[f"{patience} x {progress:.1%} from {after:.0%}"] = rule_plateau(patience, progress, after)
    chosen = f"{PATIENCE} x {PROGRESS:.1%} from {TrainConfig.not_learning_after:.0%}"
    first = json.loads((OUT / logs[0].name / "result.json").read_text())["provenance"] if logs else {}
    where = (f"Trained on {first.get('machine', {}).get('cpu_model', 'a CPU')}, torch {first.get('device', {}).get('torch')}, "
             f"one thread per run, two runs at a time, {first.get('started_at', '')[:10]}." if first else "")
    # docs/training.md includes the grid and the rules by these section markers (pymdownx.snippets)
    lines = ["<!-- --8<-- [start:grid] -->", __doc__.split("\n\n")[0].replace('"""', ""), "", where, "",
             "```bash", "python experiments/not_learning_grid.py run --jobs 2", "python experiments/not_learning_grid.py table",
             "```", "", f"{len(logs)} runs. A plateau rule `K x M from S` stops at a validation after warmup and after a share S",
             "of the budget when it and the K - 1 before it are none 2% below the floor and none is M (relative)",
             "better than the best validation before them. 'as before': 2% below the floor at every validation past",
             f"25% of the budget and warmup. The rule in `bench.engine.learning` is **{chosen}**.",
             "<!-- --8<-- [end:grid] -->", "", "## Each rule over the grid", "", "<!-- --8<-- [start:rules] -->",
             "Runs that do not learn are of two kinds: *flat* (their last validation less than 1% better than the best "
             "up to 70% of the budget: stuck) and *still improving* (too little budget or too low a rate to reach "
             "the floor, but moving: no validation says they will not learn). The target: no run that learns "
             "stopped; every flat one stopped whose budget has the validations to judge it (a run with fewer than 3 "
             "validations after warmup, or none before them, is not judged, and says so when it starts).", "",
             "| rule | runs that learn stopped (must be 0) | flat runs that do not learn, judgeable, stopped | of them, "
             "stopped at (share of budget, median) | flat, too few validations, stopped | still improving, not "
             "learning, stopped | between, stopped |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    groups = {"learns": [log for log in logs if log.verdict == LEARNS],
              "flat": [log for log in logs if log.verdict == DOES_NOT and log.flat and log.judgeable],
              "unjudged": [log for log in logs if log.verdict == DOES_NOT and log.flat and not log.judgeable],
              "improving": [log for log in logs if log.verdict == DOES_NOT and not log.flat],
              "between": [log for log in logs if log.verdict == BETWEEN]}
    ranked = []
    for name, rule in rules.items():
        stops = {log.name: rule(log) for log in logs}
        stopped = {k: [log for log in group if stops[log.name] is not None] for k, group in groups.items()}
        shares = sorted(stops[log.name] / log.budget for log in stopped["flat"])
        median = f"{shares[len(shares) // 2]:.0%}" if shares else "-"
        if name != "as before" and not stopped["learns"] and len(stopped["flat"]) == len(groups["flat"]):
            patience, after = int(name.split(" x ")[0]), name.endswith(f"from {TrainConfig.not_learning_after:.0%}")
            late = bool(shares) and shares[len(shares) // 2] > 0.8
            ranked.append((len(stopped["improving"]) + len(stopped["between"]), late, -patience, not after, name))
        label = f"**{name}** (chosen)" if name == chosen else name
        lines.append(f"| {label} | {len(stopped['learns'])} of {len(groups['learns'])} | {len(stopped['flat'])} of "
                     f"{len(groups['flat'])} | {median} | {len(stopped['unjudged'])} of {len(groups['unjudged'])} | "
                     f"{len(stopped['improving'])} of {len(groups['improving'])} | "
                     f"{len(stopped['between'])} of {len(groups['between'])} |")
    best = min(ranked)[-1] if ranked else None
    lines += ["", "The choice: no run that learns stopped, and every flat run that can be judged stopped; of the rules "
              "that do both, the one that stops the fewest runs that are still moving (still improving, or "
              "between); then one whose median stop of a flat run comes by 80% of the budget; then the one that "
              "rests on the most validations (a plateau can end late: the GPU's bf16 SHA-RNN cell sat at its floor "
              "for 80 steps after its warmup of 100, `sharnn-plateau.md`); then the share of the budget that is the "
              "spec's default (`not_learning_after`, part of a run id when changed). By these the grid picks "
              f"**{best}**; `bench.engine.learning` uses "
              f"**{chosen}**{' (the same)' if best == chosen else ': they differ, so the rule should be revisited'}."]
    lines += ["<!-- --8<-- [end:rules] -->", "", "## Each run", "",
              "'stops at': the step at which each rule would have stopped the run (- never). "
              "Validations: ten per budget in the grid, every 20 steps in the reported cases, every 10 in the cell's.",
              "", "| run | warmup | budget | valid bits/char at the end | floor | below floor | class | late progress | "
              f"as before | chosen ({chosen}) |", "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for log in logs:
        before, now = rule_as_before(log), rules[chosen](log)
        kind = log.verdict + (" (flat)" if log.verdict == DOES_NOT and log.flat else "")
        kind += "" if log.judgeable else ", too few validations to judge"
        lines.append(f"| {log.name} | {log.warmup} | {log.budget} | {log.final:.4f} | {log.floor:.4f} | "
                     f"{log.below:.1%} | {kind} | {log.late_progress:.1%} | {before if before is not None else '-'} | "
                     f"{now if now is not None else '-'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--jobs", type=int, default=2)
    run_parser.add_argument("--only", nargs="*", default=[])
    sub.add_parser("table")
    args = parser.parse_args()
    if args.command == "run":
        run(args.jobs, args.only)
    else:
        print(table(), end="")


if __name__ == "__main__":
    main()
