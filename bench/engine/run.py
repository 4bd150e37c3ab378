"""Run one resolved run: ``execute(resolved) -> RunResult``; ``train(spec)`` resolves then executes.

1. open the run's data and check it is the data the run was resolved with;
2. train (or resume, or return the finished result when the run is done);
3. evaluate the best weights on the whole final splits;
4. write ``result.json`` (bench.engine.result) with every normalized metric and the provenance.

The run folder holds ``spec.json`` (the resolved configuration), ``tokenizer.json``,
``log.jsonl``, ``checkpoint.pt``, ``best.pt`` and ``result.json``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TextIO

import torch

from bench.arguments import flag_argument
from bench.data.facts import load_data_facts
from bench.data.paths import resolve_data_dir
from bench.engine import checkpoint
from bench.engine.hardware.device import describe, use_threads
from bench.engine.curves import check_curves_folder
from bench.engine.hardware.distributed import Ranks
from bench.engine.score.evaluation import EvalLayout, evaluate_splits
from bench.engine.learning import too_few_validations
from bench.engine.corpus import prepare_corpus
from bench.engine.resolve import ResolvedRun, resolve
from bench.engine.result import (DONE, DataSummary, EvaluationSummary, ModelSummary, Provenance, RunResult,
                                 SplitMetrics, SplitProvenance, TokenizerSummary, TrainingSummary, finished_result)
from bench.engine.spec import RunSpec, validate_spec
from bench.engine.lock import RunLock
from bench.engine.trainer import Trainer
from bench.errors import BenchError
from bench.fileio import require_folder, write_bytes_atomic, write_json_atomic
from bench.ownership import claim_run_folder
from bench.run_files import BEST, CHECKPOINT, RESULT, SPEC, TOKENIZER, run_folder_name


def default_run_dir(resolved: ResolvedRun) -> Path:
    """``runs/<model>-<preset>-<tokenizer>-<dataset>-s<seed>-<run id>``: another setting, another folder."""
    spec = resolved.spec
    parts = [spec.model, spec.preset, spec.tokenizer.replace(":", ""), spec.dataset, f"s{spec.seed}"]
    return Path("runs") / run_folder_name(parts, resolved.run_id())


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def plan_run(spec: RunSpec) -> ResolvedRun:
    """Validate a spec (as ``train`` does: the API's plan is a dry run of it), measure its data, resolve once."""
    spec = validate_spec(spec)
    data_dir = resolve_data_dir(spec.data_dir)
    resolved = resolve(spec, load_data_facts(spec.dataset, spec.scheme, data_dir))
    out = require_folder(spec.out_dir, "run folder") if spec.out_dir else default_run_dir(resolved)
    claim_run_folder(out, resolved.run_id())
    check_curves_folder(resolved.train.log_to, out)
    return resolved.with_spec(out_dir=str(out), data_dir=str(data_dir))


def train(spec: RunSpec, show_progress: bool = True) -> RunResult:
    """Train (or resume, or return the finished result of) the run a spec describes, in this process or, under
    ``torchrun``, in all of them. A run that fails before its first checkpoint leaves no folder behind."""
    started = time.perf_counter()
    flag_argument(show_progress, "show_progress")
    spec = validate_spec(spec)  # by every process before they connect: a bad setting fails each alike, at once
    ranks = Ranks.from_env()
    ranks.start()
    with ranks.main_first():  # the main process trains tokenizers and fills caches, the others read them
        resolved = plan_run(spec)
    out = Path(resolved.spec.out_dir)
    created = not out.exists()
    try:
        return execute(resolved, show_progress=show_progress, started=started)
    except BaseException:
        if ranks.is_main and created and out.is_dir() and not (out / CHECKPOINT).exists():
            shutil.rmtree(out, ignore_errors=True)
        raise


def execute(resolved: ResolvedRun, console: TextIO | None = None, show_progress: bool = True,
            locked: bool = False, started: float | None = None) -> RunResult:
    """Train, evaluate and record one resolved run; ``console`` receives its messages (default stderr);
    ``started``: when the work began (``time.perf_counter``), if before this call (the run's planning).

    Nothing is written into a folder that holds another run, and one process at a time trains a run: the
    run's lock is taken here unless the caller holds it (``locked``)."""
    wall_start = time.perf_counter() if started is None else started
    if resolved.train.threads:
        use_threads(resolved.train.threads)
    Ranks.from_env().start()
    spec, out = resolved.spec, Path(resolved.spec.out_dir)
    previous = finished_result(out, resolved.run_id())
    if previous is not None:
        if previous.training is not None and previous.training.started_from is not None:
            _check_same_start(previous.training.started_from, initial_weights(resolved)[1], out)
        return previous
    initial, start = initial_weights(resolved)  # refused before the corpus is opened: a refusal writes nothing
    corpus = prepare_corpus(spec.dataset, spec.scheme, spec.data_dir, expected=resolved.data)
    claim_run_folder(out, resolved.run_id(), in_matrix=True)  # a matrix's run lives in its results folder
    trainer = Trainer(resolved, corpus, out, console, show_progress, started=wall_start)
    main = trainer.ranks.is_main
    with nullcontext() if locked or not main else RunLock(out):
        if main:
            remove_temporary_files(out)
        if not trainer.resume():
            trainer.start_fresh(initial)
            trainer.progress.started_from = start
        else:
            _check_same_start(trainer.progress.started_from, start, out)
            if main:
                print(f"resuming {out} from step {trainer.progress.step}", file=trainer.console, flush=True)
        if main:
            write_json_atomic(out / SPEC, resolved.to_json())
            write_bytes_atomic(out / TOKENIZER, trainer.tokenizer.to_bytes())
            if show_progress and (unjudged := too_few_validations(resolved)) is not None:  # not under --quiet
                print(f"note: {unjudged}", file=trainer.console, flush=True)
        trainer.run()
        trainer.ranks.barrier()  # best.pt is written by the main process
        result = _evaluate(trainer, wall_start)
        if main:
            write_json_atomic(out / RESULT, result.to_json())
    return result


def _evaluate(trainer: Trainer, wall_start: float) -> RunResult:
    """Score the best weights (the last ones without a validation) on the final splits."""
    out, resolved = trainer.out, trainer.resolved
    evaluated = "final"
    if (out / BEST).is_file():
        checkpoint.load_weights(trainer.model, checkpoint.load(out / BEST)["model"], out / BEST)
        evaluated = f"best (step {trainer.progress.best_step})"
    scored = weights_digest(trainer.model.state_dict())  # the weights scored, by content: what bench export checks
    scorer = trainer.scorer(final=True)
    metrics = evaluate_splits(scorer, trainer.corpus, resolved.train.final_splits,
                              out if resolved.train.dump_token_losses else None)
    trainer.check_not_diverged({split: m.total_nll_nats / max(m.n_tokens, 1) for split, m in metrics.items()})
    return build_result(trainer, metrics, scorer.layout, evaluated, trainer.wall_seconds(wall_start), scored)


def initial_weights(resolved: ResolvedRun) -> tuple[dict | None, dict | None]:
    """The weights ``init_from`` names, checked to be of this run's model family and tokenizer (before anything is
    written): under another tokenizer of the same size every embedding row would belong to another token; and
    their identity by content (the run id they come from, a digest of the weights), which the run id, made from
    the path's last names, cannot give."""
    if not resolved.train.init_from:
        return None, None
    payload = checkpoint.load(resolved.train.init_from)
    theirs = payload.get("resolved", {})  # the run the weights come from
    family = theirs.get("spec", {}).get("model")
    if family != resolved.spec.model:
        raise BenchError(f"init_from {resolved.train.init_from} holds a {family} model but this run trains a "
                         f"{resolved.spec.model}; start from a run of the same model")
    their_hash = theirs.get("data", {}).get("tokenizer_hash")
    if their_hash and resolved.data.tokenizer_hash and their_hash != resolved.data.tokenizer_hash:
        scheme = theirs.get("data", {}).get("scheme")
        raise BenchError(f"init_from {resolved.train.init_from} was trained with tokenizer {scheme} (hash "
                         f"{their_hash[:12]}) but this run uses {resolved.data.scheme} (hash "
                         f"{resolved.data.tokenizer_hash[:12]}): its embeddings belong to other tokens; start from a "
                         f"run of the same tokenizer")
    return payload["model"], {"run_id": payload.get("run_id"), "weights_sha256": weights_digest(payload["model"])}


def weights_digest(state_dict: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _check_same_start(recorded: dict | None, start: dict | None, out: Path) -> None:
    """A run folder's earlier work (a result, a checkpoint) counts only if it started from these very weights."""
    if recorded is not None and start is not None and recorded != start:
        raise BenchError(f"{out} holds a run started from other weights (run {recorded.get('run_id')}, weights "
                         f"{str(recorded.get('weights_sha256'))[:12]}) than init_from gives now (run "
                         f"{start.get('run_id')}, weights {str(start.get('weights_sha256'))[:12]}); choose another "
                         f"--out folder")


def remove_temporary_files(out: Path) -> None:
    """Leftovers of atomic writes that were interrupted (``.<name>.<random>.tmp``, up to a checkpoint's size)."""
    for path in out.glob(".*.tmp"):
        path.unlink(missing_ok=True)


def build_result(trainer: Trainer, metrics: dict[str, SplitMetrics], layout: EvalLayout, evaluated: str,
                 wall: float, weights_sha256: str) -> RunResult:
    from bench.provenance import comparability, git_commit, library_versions, machine

    resolved, corpus, p = trainer.resolved, trainer.corpus, trainer.progress
    splits = corpus.encoded.splits
    comparable, notes = comparability(trainer.tokenizer.spec.name, corpus.lossless,
                                      {s: d.status for s, d in splits.items()})
    chars = p.chars
    model = trainer.model
    return RunResult(
        status=DONE, run_id=resolved.run_id(), spec=resolved.spec,
        resolved={k: v for k, v in resolved.to_json().items() if k in ("model", "train")},
        model=ModelSummary(resolved.spec.model, model.num_params(), model.non_embedding_params(),
                           model.train_flops_per_token(resolved.train.bptt)),
        tokenizer=TokenizerSummary(trainer.tokenizer.spec.name, trainer.tokenizer.hash, trainer.tokenizer.vocab_size,
                                   trainer.chars_per_token, corpus.lossless),
        data=DataSummary(resolved.spec.dataset, all(s.verified for s in splits.values()),
                         {s: SplitProvenance(**d.provenance()) for s, d in splits.items()}),
        training=TrainingSummary(
            steps=p.step, epochs=p.epoch + p.pos / (trainer.rows.shape[1] - 1), tokens=p.tokens, chars=chars,
            seconds=p.seconds, chars_per_second=chars / max(p.seconds, 1e-9),
            tokens_per_second=p.tokens / max(p.seconds, 1e-9), best_step=p.best_step,
            best_valid_bits_per_char_during_training=p.best_valid_bpc, flops=p.tokens * trainer.flops_per_token,
            startup_seconds=trainer.startup_seconds, threads=p.threads,
            compile_seconds=trainer.step.seconds if resolved.train.compile else None,
            precision={"setting": resolved.train.precision, "rnn_setting": resolved.train.rnn_precision,
                       "ran": trainer.precision.name, "observed": p.observed_dtypes,
                       "loss_scale": trainer.scaler.get_scale() if trainer.scaler is not None else None,
                       "skipped_steps": p.skipped_steps},
            warnings=list(p.warnings), started_from=p.started_from),
        evaluation=EvaluationSummary(evaluated, layout.to_json(), "whole split, first token predicted from <bos>",
                                     weights_sha256=weights_sha256),
        metrics=metrics, comparable=comparable, comparability_notes=notes,
        provenance=Provenance(git_commit(), library_versions(), describe(trainer.device), machine(),
                              trainer.progress.started_at, _now(), wall),
    )
