"""The training engine: ``train(spec) -> result``.

One function trains any model of the study on any tokenization of any corpus:

1. encode the corpus (cached) and resolve the spec (preset, overrides,
   vocabulary size, context in tokens);
2. lay the train split out as ``batch_size`` parallel streams, each starting
   with ``<bos>``, and walk along them in segments of ``bptt`` tokens, carrying
   the recurrent state (LSTM states, SHA-RNN memory) from one segment to the
   next with the graph cut between them (truncated BPTT);
3. validate periodically, keep the best weights, checkpoint atomically, and
   resume exactly from the last checkpoint when the same run is started again;
4. evaluate the best weights on the whole valid and test splits and write
   ``result.json`` with every normalized metric and the run's provenance.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench import checkpoint
from bench.cache import EncodedCorpus, encode_corpus
from bench.datastore import resolve_data_dir
from bench.device import autocast, autocast_dtype, configure, describe, flatten_lstms, pick_device
from bench.errors import BenchError
from bench.evaluate import EvalLayout, evaluate_ids, run_layout
from bench.fileio import write_json_atomic
from bench.metrics import normalize_counts, text_counts
from bench.models import build_model
from bench.models.common import LanguageModel, State, detach_state, state_to
from bench.optim import build_optimizer, lr_factor
from bench.spec import Resolved, RunSpec, TrainConfig, check_spec, resolve

RESULT = "result.json"
CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
LOG = "log.jsonl"


class TrainingInterrupted(BenchError):
    """Training stopped on a signal after saving a checkpoint; running the same spec again resumes."""

    exit_code = 130


class TrainingDiverged(BenchError):
    """The training loss became NaN or infinite."""


def default_run_dir(spec: RunSpec) -> Path:
    name = f"{spec.model}-{spec.preset}-{spec.tokenizer.replace(':', '')}-{spec.dataset}-s{spec.seed}"
    return Path("runs") / name


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------- data


@dataclass
class Prepared:
    """A corpus under one tokenization with everything the engine derives from it."""

    encoded: EncodedCorpus
    counts: dict[str, dict[str, int]]  # text counts per split (bytes, chars, words, lines)
    chars_per_token: float  # on the train split: converts character budgets and contexts to tokens
    lossless: dict[str, bool]  # whether the tokenizer gives each split back exactly


def data_identity(encoded: EncodedCorpus) -> dict:
    """What the data of a run are: the tokenizer's hash and each split file's sha256."""
    return {"tokenizer": encoded.tokenizer.hash, **{s: d.sha256 for s, d in encoded.splits.items()}}


def prepare(spec: RunSpec, data_dir: Path, splits=("train", "valid", "test")) -> Prepared:
    encoded = encode_corpus(spec.dataset, spec.tokenizer, data_dir, splits=splits)
    counts, lossless = {}, {}
    for split in splits:
        text = encoded.splits[split].read_text()
        counts[split] = text_counts(text)
        if split != "train":
            lossless[split] = encoded.tokenizer.loss_report(text, np.asarray(encoded.ids[split])).lossless
    train_tokens = len(encoded.ids["train"])
    if train_tokens < 2:
        raise BenchError(f"{spec.dataset} train split is too short to train on ({train_tokens} tokens)")
    return Prepared(encoded, counts, counts["train"]["n_chars"] / train_tokens, lossless)


def train_rows(ids: np.ndarray, batch_size: int, bos_id: int, device: torch.device) -> torch.Tensor:
    """The train split as ``batch_size`` contiguous streams, each preceded by ``<bos>``: [B, L + 1]."""
    length = len(ids) // batch_size
    if length < 2:
        raise BenchError(f"train split ({len(ids)} tokens) is too short for batch_size {batch_size}")
    rows = np.empty((batch_size, length + 1), dtype=np.int32)
    rows[:, 0] = bos_id
    rows[:, 1:] = np.asarray(ids[: batch_size * length], dtype=np.int32).reshape(batch_size, length)
    return torch.from_numpy(rows).to(device)


def next_segment_length(config: TrainConfig, rng: np.random.Generator) -> int:
    """``bptt``, or with ``seq_jitter`` the reference's draw: bptt (halved 5% of the time) plus N(0, 5) noise,
    at least 5 and at most bptt."""
    if not config.seq_jitter:
        return config.bptt
    bptt = config.bptt if rng.random() < 0.95 else config.bptt / 2.0
    return int(min(max(5, int(rng.normal(bptt, 5))), config.bptt))


def mean_step_tokens(config: TrainConfig) -> float:
    """Tokens per optimizer step on average (with ``seq_jitter`` 5% of the segments are half as long)."""
    return config.batch_size * config.bptt * (0.975 if config.seq_jitter else 1.0)


def budget_tokens(config: TrainConfig, chars_per_token: float, train_tokens: int) -> float | None:
    """Training tokens the budget allows: the first limit reached (None for a time budget alone)."""
    limits = []
    if config.max_tokens:
        limits.append(config.max_tokens)
    if config.max_train_chars:
        limits.append(config.max_train_chars / chars_per_token)
    if config.max_steps:
        limits.append(config.max_steps * mean_step_tokens(config))
    if config.max_epochs:
        limits.append(config.max_epochs * train_tokens)
    return min(limits) if limits else None


# ------------------------------------------------------------------------------------------- engine


def build_training_model(resolved: Resolved, device: torch.device) -> LanguageModel:
    """The run's model on its device, LSTM weights flattened for cuDNN; with ``compile``, the parts
    without recurrence compiled (``nn.Module.compile`` keeps the state_dict names)."""
    model = build_model(resolved.spec.model, resolved.model_config).to(device)
    flatten_lstms(model)
    if resolved.train.compile:
        for module in model.modules():
            if type(module).__name__ in ("Boom", "SingleHeadAttention", "TransformerBlock"):
                module.compile()
    return model


def forward_loss(model: LanguageModel, x: torch.Tensor, y: torch.Tensor, state: State | None,
                 device: torch.device, amp: torch.dtype | None) -> tuple[torch.Tensor, State]:
    """Mean cross-entropy (nats per token) of predicting ``y`` from ``x``, and the state after ``x``."""
    with autocast(device, amp):
        hidden, new_state = model(x, state)
        logits = model.logits(hidden)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
    return loss, new_state


def apply_gradients(model: LanguageModel, optimizer: torch.optim.Optimizer, loss: torch.Tensor,
                    clip: float) -> None:
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)



@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    pos: int = 0  # column of the next segment in the train rows
    tokens: int = 0  # training tokens seen (targets)
    seconds: float = 0.0  # training time, evaluation excluded
    best_valid_bpc: float | None = None
    best_step: int | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class _SignalGuard:
    """Turns the first SIGINT/SIGTERM into a flag checked between steps; a second one stops at once."""

    def __init__(self):
        self.stop = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.stop = signal.Signals(signum).name
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Trainer:
    def __init__(self, resolved: Resolved, prepared: Prepared, out: Path, show_progress: bool = True):
        self.resolved = resolved
        self.cfg = resolved.train
        self.prepared = prepared
        self.out = out
        self.show_progress = show_progress
        self.tokenizer = prepared.encoded.tokenizer
        self.device = pick_device(self.cfg.device)
        configure(self.device)
        self.amp = autocast_dtype(self.device, self.cfg.precision)
        seed = resolved.spec.seed
        torch.manual_seed(seed)
        random.seed(seed)
        self.jitter = np.random.default_rng(seed)
        self.model = build_training_model(resolved, self.device)
        self.optimizer = build_optimizer(self.model.parameters(), self.cfg)
        self.rows = train_rows(prepared.encoded.ids["train"], self.cfg.batch_size, self.tokenizer.bos_id,
                               self.device)
        self.progress = Progress()
        self.state = None
        self.log_file = out / LOG

    # ---- setup ----------------------------------------------------------------------------

    def eval_layout(self) -> EvalLayout:
        return run_layout(self.model, self.cfg.eval_streams, self.cfg.bptt, self.cfg.eval_chunk)

    def budget_progress(self) -> float:
        c, p = self.cfg, self.progress
        row_len = self.rows.shape[1] - 1
        chars = p.tokens * self.prepared.chars_per_token
        parts = []
        if c.max_steps:
            parts.append(p.step / c.max_steps)
        if c.max_epochs:
            parts.append((p.epoch + p.pos / row_len) / c.max_epochs)
        if c.max_train_chars:
            parts.append(chars / c.max_train_chars)
        if c.max_tokens:
            parts.append(p.tokens / c.max_tokens)
        if c.max_minutes:
            parts.append(p.seconds / 60.0 / c.max_minutes)
        return max(parts)

    def estimated_total_steps(self) -> int | None:
        train_tokens = (self.rows.shape[1] - 1) * self.cfg.batch_size
        tokens = budget_tokens(self.cfg, self.prepared.chars_per_token, train_tokens)
        return None if tokens is None else math.ceil(tokens / mean_step_tokens(self.cfg) - 1e-9)

    # ---- checkpoints ------------------------------------------------------------------------

    def _payload(self, kind: str) -> dict:
        return {
            "kind": kind,
            "resolved": self.resolved.to_json(),
            "run_id": self.resolved.run_id(),
            "tokenizer": self.tokenizer.to_bytes().decode("ascii"),
            # what the weights were trained on, so that a later `bench eval` can say so
            "data": {s: d.provenance() for s, d in self.prepared.encoded.splits.items()},
            "model": self.model.state_dict(),
        }

    def save_checkpoint(self) -> None:
        payload = self._payload("training")
        payload.update(
            optimizer=self.optimizer.state_dict(),
            progress=self.progress.to_json(),
            rng=checkpoint.rng_state(self.jitter),
            carried_state=state_to(self.state, "cpu"),
        )
        checkpoint.save(self.out / CHECKPOINT, payload)

    def resume(self) -> bool:
        path = self.out / CHECKPOINT
        if not path.is_file():
            return False
        payload = checkpoint.load(path)
        if payload.get("run_id") != self.resolved.run_id():
            raise BenchError(f"{self.out} holds a checkpoint of a different run; choose another --out folder "
                             f"or delete {path}")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.progress = Progress(**payload["progress"])
        checkpoint.restore_rng(payload["rng"], self.jitter)
        self.state = state_to(payload["carried_state"], self.device)
        self._truncate_log(self.progress.step)
        return True

    def _truncate_log(self, step: int) -> None:
        """Drop log lines written after the checkpoint we resume from (they will be written again)."""
        if not self.log_file.exists():
            return
        kept = [line for line in self.log_file.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        self.log_file.write_text("".join(line + "\n" for line in kept))

    def log(self, record: dict) -> None:
        with open(self.log_file, "a") as f:
            f.write(json.dumps(record) + "\n")

    # ---- steps ----------------------------------------------------------------------------

    def train_step(self) -> float:
        cfg, p = self.cfg, self.progress
        row_len = self.rows.shape[1] - 1
        seq_len = next_segment_length(cfg, self.jitter)
        if p.pos >= row_len:  # a new epoch: start the streams again with a fresh state
            p.epoch += 1
            p.pos = 0
            self.state = None
        seq_len = min(seq_len, row_len - p.pos)
        x = self.rows[:, p.pos:p.pos + seq_len].long()
        y = self.rows[:, p.pos + 1:p.pos + 1 + seq_len].long()
        lr = cfg.lr * lr_factor(p.step + 1, self.budget_progress(), cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        state = self.state if self.model.carries_state_in_training else None
        loss, new_state = forward_loss(self.model, x, y, state, self.device, self.amp)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise TrainingDiverged(f"training loss became {loss_value} at step {p.step + 1}; "
                                   f"try a lower lr or stronger clipping (--set lr=..., --set clip=...)")
        apply_gradients(self.model, self.optimizer, loss, cfg.clip)
        self.state = detach_state(new_state) if self.model.carries_state_in_training else None
        p.pos += seq_len
        p.step += 1
        p.tokens += x.numel()
        self._last_lr = lr
        return loss_value

    def validate(self) -> dict:
        """Validation on (a prefix of) the valid split, in bits per character and per byte."""
        ids = self.prepared.encoded.ids["valid"]
        limit = self.cfg.eval_max_tokens
        result = evaluate_ids(self.model, ids, self.tokenizer.bos_id, self.eval_layout(), self.device, self.amp,
                              max_tokens=limit)
        if limit is None or limit >= len(ids):
            counts = self.prepared.counts["valid"]
        elif self.prepared.lossless.get("valid"):
            counts = text_counts(self.tokenizer.decode(np.asarray(ids[:limit])))
        else:  # a lossy tokenizer cannot give the prefix back: scale the split's counts
            share = limit / len(ids)
            counts = {k: round(v * share) for k, v in self.prepared.counts["valid"].items()}
        metrics = normalize_counts(result.total_nll_nats, result.n_tokens, **counts)
        return {"valid_bits_per_char": metrics["bits_per_char"], "valid_bits_per_byte": metrics["bits_per_byte"],
                "valid_loss": result.mean_nll, "valid_tokens": result.n_tokens}

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        from tqdm import tqdm

        cfg, p = self.cfg, self.progress
        total = self.estimated_total_steps()
        bytes_per_token = self.prepared.counts["train"]["n_bytes"] / len(self.prepared.encoded.ids["train"])
        interactive = self.show_progress and sys.stderr.isatty()
        bar = tqdm(total=total, initial=p.step, disable=not interactive, unit="step", dynamic_ncols=True,
                   file=sys.stderr, desc=f"{self.resolved.spec.model}/{self.resolved.spec.tokenizer}")
        valid_text = "-"
        window_loss, window_steps = 0.0, 0
        with _SignalGuard() as guard:
            while self.budget_progress() < 1.0:
                start = time.perf_counter()
                loss = self.train_step()
                p.seconds += time.perf_counter() - start
                window_loss += loss
                window_steps += 1
                chars_per_s = p.tokens * self.prepared.chars_per_token / max(p.seconds, 1e-9)
                train_bpb = loss / math.log(2) / bytes_per_token
                if p.step % cfg.log_every == 0:
                    mean = window_loss / window_steps
                    self.log({"step": p.step, "epoch": p.epoch, "tokens": p.tokens,
                              "train_chars": p.tokens * self.prepared.chars_per_token, "lr": self._last_lr,
                              "train_loss": mean, "train_bits_per_byte": mean / math.log(2) / bytes_per_token,
                              "chars_per_second": chars_per_s, "seconds": p.seconds})
                    window_loss, window_steps = 0.0, 0
                if cfg.eval_every and p.step % cfg.eval_every == 0:
                    valid_text = self._validate_and_keep_best()
                    if self.show_progress and not interactive:  # a log file gets one line per validation
                        print(f"step {p.step}/{total or '?'}  {chars_per_s:,.0f} char/s  train {train_bpb:.3f} bpb  "
                              f"valid {valid_text}", file=sys.stderr)
                if p.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
                bar.update(1)
                bar.set_postfix_str(f"{chars_per_s:,.0f} char/s  train {train_bpb:.3f} bpb  valid {valid_text}")
                if guard.stop:
                    self.save_checkpoint()
                    bar.close()
                    raise TrainingInterrupted(
                        f"{guard.stop} at step {p.step}: checkpoint saved in {self.out}; "
                        f"run the same command again to resume")
        bar.close()
        if cfg.eval_every == 0 or p.step % cfg.eval_every != 0:
            self._validate_and_keep_best()
        self.save_checkpoint()

    def _validate_and_keep_best(self) -> str:
        p = self.progress
        metrics = self.validate()
        bpc = metrics["valid_bits_per_char"]
        self.log({"step": p.step, "train_chars": p.tokens * self.prepared.chars_per_token, **metrics})
        if p.best_valid_bpc is None or bpc < p.best_valid_bpc:
            p.best_valid_bpc, p.best_step = bpc, p.step
            checkpoint.save(self.out / BEST, {**self._payload("model"), "step": p.step, "valid": metrics})
        return f"{bpc:.3f} bpc"


# ------------------------------------------------------------------------------------------- results


def evaluate_splits(model: LanguageModel, prepared: Prepared, layout: EvalLayout, device, amp, splits,
                    dump_dir: Path | None = None) -> dict:
    """Every normalized metric of each split, from the total NLL over the whole split."""
    tokenizer = prepared.encoded.tokenizer
    out = {}
    for split in splits:
        ids = prepared.encoded.ids[split]
        result = evaluate_ids(model, ids, tokenizer.bos_id, layout, device, amp, keep_token_nll=dump_dir is not None)
        metrics = normalize_counts(result.total_nll_nats, result.n_tokens, **prepared.counts[split])
        metrics["eval_seconds"] = result.seconds
        metrics["eval_chars_per_second"] = prepared.counts[split]["n_chars"] / max(result.seconds, 1e-9)
        metrics["lossless"] = prepared.lossless[split]
        out[split] = metrics
        if dump_dir is not None:
            np.save(dump_dir / f"token_nll.{split}.npy", result.token_nll)
    return out


def build_result(trainer: Trainer, started: str, wall: float, metrics: dict, layout: EvalLayout,
                 evaluated: str) -> dict:
    from bench.provenance import comparability, git_commit, library_versions, machine

    prepared, p, resolved = trainer.prepared, trainer.progress, trainer.resolved
    splits = prepared.encoded.splits
    verified = all(s.verified for s in splits.values())
    lossy = [s for s, ok in prepared.lossless.items() if not ok]
    comparable, notes = comparability(prepared.encoded.tokenizer.spec.name, lossy,
                                      {s: d.status for s, d in splits.items()})
    chars = p.tokens * prepared.chars_per_token
    model = trainer.model
    flops = model.flops_per_token(trainer.cfg.bptt)
    return {
        "status": "completed",
        "run_id": resolved.run_id(),
        "spec": resolved.spec.to_json(),
        "resolved": {"model": resolved.to_json()["model"], "train": resolved.to_json()["train"]},
        "model": {"name": resolved.spec.model, "params_total": model.num_params(),
                  "params_non_embedding": model.non_embedding_params(),
                  "train_flops_per_token": 3 * flops},
        "tokenizer": {"scheme": trainer.tokenizer.spec.name, "hash": trainer.tokenizer.hash,
                      "vocab_size": trainer.tokenizer.vocab_size,
                      "chars_per_token_train": prepared.chars_per_token, "lossless": prepared.lossless},
        "data": {"corpus": resolved.spec.dataset, "verified": verified,
                 "splits": {s: d.provenance() for s, d in splits.items()}},
        "training": {"steps": p.step, "epochs": p.epoch + p.pos / (trainer.rows.shape[1] - 1),
                     "tokens": p.tokens, "chars": chars, "seconds": p.seconds,
                     "chars_per_second": chars / max(p.seconds, 1e-9),
                     "tokens_per_second": p.tokens / max(p.seconds, 1e-9),
                     "best_step": p.best_step, "best_valid_bits_per_char_during_training": p.best_valid_bpc},
        "evaluation": {"weights": evaluated, "layout": layout.to_json(), "scored": "whole split, first token "
                       "predicted from <bos>"},
        "metrics": metrics,
        "comparable": comparable,
        "comparability_notes": notes,
        "provenance": {"git": git_commit(), "libraries": library_versions(), "device": describe(trainer.device),
                       "machine": machine(), "started_at": started, "finished_at": _now(), "wall_seconds": wall},
    }


def train(spec: RunSpec, show_progress: bool = True) -> dict:
    """Train (or resume, or return the finished result of) one run; returns the result dict."""
    started, wall_start = _now(), time.perf_counter()
    spec = check_spec(spec)
    data_dir = resolve_data_dir(spec.data_dir)
    out = Path(spec.out_dir) if spec.out_dir else default_run_dir(spec)
    spec = dataclasses.replace(spec, out_dir=str(out), data_dir=str(data_dir))
    prepared = prepare(spec, data_dir)
    resolved = resolve(spec, prepared.encoded.tokenizer.vocab_size, prepared.chars_per_token,
                       data=data_identity(prepared.encoded))
    result_path = out / RESULT
    if result_path.is_file():
        previous = json.loads(result_path.read_text())
        if previous.get("run_id") == resolved.run_id() and previous.get("status") == "completed":
            return previous
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "spec.json", resolved.to_json())
    trainer = Trainer(resolved, prepared, out, show_progress)
    trainer.tokenizer.save(out / "tokenizer.json")
    if trainer.resume():
        print(f"resuming {out} from step {trainer.progress.step}", file=sys.stderr)
    elif trainer.cfg.init_from:
        trainer.model.load_state_dict(checkpoint.load(trainer.cfg.init_from)["model"])
    trainer.run()
    evaluated = "final"
    if (out / BEST).is_file():
        trainer.model.load_state_dict(checkpoint.load(out / BEST)["model"])
        evaluated = f"best (step {trainer.progress.best_step})"
    layout = trainer.eval_layout()
    dump = out if trainer.cfg.dump_token_losses else None
    metrics = evaluate_splits(trainer.model, prepared, layout, trainer.device, trainer.amp,
                              trainer.cfg.final_splits, dump)
    result = build_result(trainer, started, time.perf_counter() - wall_start, metrics, layout, evaluated)
    write_json_atomic(result_path, result)
    return result
