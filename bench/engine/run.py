"""Run one resolved run: ``execute(config) -> RunResult``; ``train(spec)`` resolves then executes.

1. open the run's data and check it is the data the run was resolved with;
2. train (or resume, or return the finished result when the run is done);
3. evaluate the best weights on the whole final splits;
4. write ``result.json`` (bench.engine.result) with every normalized metric and the provenance.

The run folder holds ``spec.json`` (the resolved configuration), ``tokenizer.json``,
``log.jsonl``, ``checkpoint.pt``, ``best.pt`` and ``result.json``.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import TextIO

from bench.data.facts import load_data_facts
from bench.data.paths import resolve_data_dir
from bench.engine import checkpoint
from bench.engine.device import describe
from bench.engine.evaluation import EvalLayout, evaluate_splits
from bench.engine.layout import prepare_corpus
from bench.engine.resolve import RunConfig, resolve
from bench.engine.result import (DataSummary, EvaluationSummary, ModelSummary, Provenance, RunResult, RunStatus,
                                 SplitMetrics, SplitProvenance, TokenizerSummary, TrainingSummary)
from bench.engine.spec import RunSpec, validate_spec
from bench.engine.trainer import BEST, Trainer
from bench.fileio import write_bytes_atomic, write_json_atomic

RESULT = "result.json"
SPEC = "spec.json"


def default_run_dir(spec: RunSpec) -> Path:
    name = f"{spec.model}-{spec.preset}-{spec.tokenizer.replace(':', '')}-{spec.dataset}-s{spec.seed}"
    return Path("runs") / name


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def finished_result(run_dir: Path, run_id: str) -> RunResult | None:
    """The run's result if the folder holds the finished result of this very run."""
    path = run_dir / RESULT
    if not path.is_file():
        return None
    result = RunResult.read(path)
    return result if result.run_id == run_id and result.status is RunStatus.DONE else None


def plan_run(spec: RunSpec) -> RunConfig:
    """Resolve a spec from the command line: validate it, measure its data, resolve once."""
    spec = validate_spec(spec)
    data_dir = resolve_data_dir(spec.data_dir)
    config = resolve(spec, load_data_facts(spec.dataset, spec.tokenizer, data_dir))
    out = Path(spec.out_dir) if spec.out_dir else default_run_dir(spec)
    return config.with_spec(out_dir=str(out), data_dir=str(data_dir))


def train(spec: RunSpec, show_progress: bool = True) -> RunResult:
    """Train (or resume, or return the finished result of) the run a spec describes."""
    return execute(plan_run(spec), show_progress=show_progress)


def execute(config: RunConfig, console: TextIO | None = None, show_progress: bool = True) -> RunResult:
    """Train, evaluate and record one resolved run; ``console`` receives its messages (default stderr)."""
    started, wall_start = _now(), time.perf_counter()
    spec, out = config.spec, Path(config.spec.out_dir)
    corpus = prepare_corpus(spec.dataset, spec.tokenizer, spec.data_dir, expected=config.data)
    previous = finished_result(out, config.run_id())
    if previous is not None:
        return previous
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / SPEC, config.to_json())
    trainer = Trainer(config, corpus, out, console, show_progress)
    write_bytes_atomic(out / "tokenizer.json", trainer.tokenizer.to_bytes())
    if trainer.resume():
        print(f"resuming {out} from step {trainer.progress.step}", file=trainer.console, flush=True)
    elif config.train.init_from:
        trainer.model.load_state_dict(checkpoint.load(config.train.init_from)["model"])
    trainer.run()
    evaluated = "final"
    if (out / BEST).is_file():
        trainer.model.load_state_dict(checkpoint.load(out / BEST)["model"])
        evaluated = f"best (step {trainer.progress.best_step})"
    layout = trainer.eval_layout()
    metrics = evaluate_splits(trainer.model, corpus, layout, trainer.device, trainer.amp, config.train.final_splits,
                              out if config.train.dump_token_losses else None)
    result = build_result(trainer, metrics, layout, evaluated, started, time.perf_counter() - wall_start)
    write_json_atomic(out / RESULT, result.to_json())
    return result


def build_result(trainer: Trainer, metrics: dict[str, SplitMetrics], layout: EvalLayout, evaluated: str,
                 started: str, wall: float) -> RunResult:
    from bench.provenance import comparability, git_commit, library_versions, machine

    config, corpus, p = trainer.config, trainer.corpus, trainer.progress
    splits = corpus.encoded.splits
    lossy = [s for s, ok in corpus.lossless.items() if not ok]
    comparable, notes = comparability(trainer.tokenizer.spec.name, lossy, {s: d.status for s, d in splits.items()})
    chars = p.tokens * trainer.chars_per_token
    model = trainer.model
    return RunResult(
        status=RunStatus.DONE, run_id=config.run_id(), spec=config.spec,
        resolved={k: v for k, v in config.to_json().items() if k in ("model", "train")},
        model=ModelSummary(config.spec.model, model.num_params(), model.non_embedding_params(),
                           3 * model.flops_per_token(config.train.bptt)),
        tokenizer=TokenizerSummary(trainer.tokenizer.spec.name, trainer.tokenizer.hash, trainer.tokenizer.vocab_size,
                                   trainer.chars_per_token, corpus.lossless),
        data=DataSummary(config.spec.dataset, all(s.verified for s in splits.values()),
                         {s: SplitProvenance(**d.provenance()) for s, d in splits.items()}),
        training=TrainingSummary(
            steps=p.step, epochs=p.epoch + p.pos / (trainer.rows.shape[1] - 1), tokens=p.tokens, chars=chars,
            seconds=p.seconds, chars_per_second=chars / max(p.seconds, 1e-9),
            tokens_per_second=p.tokens / max(p.seconds, 1e-9), best_step=p.best_step,
            best_valid_bits_per_char_during_training=p.best_valid_bpc),
        evaluation=EvaluationSummary(evaluated, layout.to_json(), "whole split, first token predicted from <bos>"),
        metrics=metrics, comparable=comparable, comparability_notes=notes,
        provenance=Provenance(git_commit(), library_versions(), describe(trainer.device), machine(), started, _now(),
                              wall),
    )
