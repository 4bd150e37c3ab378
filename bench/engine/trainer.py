"""The training loop of one resolved run: truncated BPTT, validation, checkpoints, exact resume.

The train split is walked in segments along ``batch_size`` parallel streams,
carrying the recurrent state (LSTM states, SHA-RNN memory) from one segment to the
next with the graph cut between them. The loop validates periodically, keeps the
best weights as ``best.pt``, checkpoints atomically to ``checkpoint.pt``, and
resumes exactly from the last checkpoint when the same run is started again.
Stopping is decided by the run's :class:`~bench.engine.budget.Budget`.
"""

from __future__ import annotations

import datetime as _dt
import math
import random
import sys
import time
from pathlib import Path
from typing import TextIO

import numpy as np
import torch

from bench.engine import checkpoint
from bench.engine.budget import Usage, mean_step_tokens
from bench.engine.hardware.device import configure, pick_device
from bench.engine.hardware.distributed import Ranks
from bench.engine.score.evaluation import Scorer, run_layout
from bench.engine.corpus import PreparedCorpus, next_segment_length, train_rows
from bench.engine.learning import TrainingNotLearning, ZeroGradients, not_learning_message, stalled_at_floor
from bench.engine.optim import build_optimizer, lr_factor
from bench.engine.hardware.precision import DtypeWatch, plan_precision
from bench.models.recurrent import has_rnn
from bench.engine.progress import Progress, SignalGuard
from bench.engine.resume import resume_training, save_training
from bench.engine.run_log import RunLog
from bench.engine.resolve import ResolvedRun
from bench.engine.step import TrainingStep, build_training_model, make_step
from bench.engine.validation import Validation
from bench.engine.window import TrainingDiverged, TrainingWindow
from bench.errors import BenchError
from bench.models.common import detach_state
from bench.run_files import BEST

DIVERGED_FACTOR = 2.0  # a loss this many times the uniform model's marks a diverged run


class TrainingInterrupted(BenchError):
    """Training stopped on a signal after saving a checkpoint; running the same spec again resumes."""

    exit_code = 130

    def __init__(self, message: str, signal_name: str | None = None):
        super().__init__(message)
        self.signal_name = signal_name


class Trainer:
    def __init__(self, resolved: ResolvedRun, corpus: PreparedCorpus, out: Path, console: TextIO | None = None,
                 show_progress: bool = True, ranks: Ranks | None = None, started: float | None = None):
        self.resolved = resolved
        self.started = time.perf_counter() if started is None else started  # when the command's work began
        self.startup_seconds: float | None = None  # from then to the first training step of this attempt
        self.recipe = resolved.train  # the training configuration: layout, optimisation, budget, bookkeeping
        self.budget = resolved.budget
        self.corpus = corpus
        self.out = out
        self.console = console or sys.stderr
        self.ranks = ranks or Ranks.from_env()
        self.show_progress = show_progress and self.ranks.is_main
        self.tokenizer = corpus.tokenizer
        if self.recipe.batch_size % self.ranks.world:
            raise BenchError(f"batch_size {self.recipe.batch_size} does not divide among {self.ranks.world} processes; "
                             f"use a multiple of {self.ranks.world}")
        self.device = pick_device(self.recipe.device, self.ranks.local_rank if self.ranks.distributed else None)
        configure(self.device)
        seed = resolved.spec.seed
        torch.manual_seed(seed)
        random.seed(seed)
        self.jitter = np.random.default_rng(seed)  # the same segment lengths in every process
        self.model = build_training_model(resolved, self.device)
        self.precision = plan_precision(self.recipe.precision, self.recipe.rnn_precision, self.device,
                                        has_rnn(self.model))
        self.scaler = self.precision.grad_scaler(self.device)
        self.zero_gradients = ZeroGradients(self.model, self.device)
        self.optimizer = build_optimizer(self.model.parameters(), self.recipe)
        self.step = make_step(self._step_module(), self.model, self.optimizer, self.recipe.clip,
                              self.recipe.cuda_graphs, self.device, self.scaler, self.zero_gradients)
        mine = self.ranks.share(self.recipe.batch_size)  # this process's streams
        rows = train_rows(corpus.encoded.ids["train"], self.recipe.batch_size, self.tokenizer.bos_id)[mine]
        self.rows = torch.from_numpy(rows).to(self.device)
        # the characters the tokens of every process's streams begin: each counts the batch's, with no exchange
        self.row_chars = train_rows(corpus.train_chars, self.recipe.batch_size, 0)
        self.flops_per_token = self.model.train_flops_per_token(self.recipe.bptt)
        self.validation = Validation(corpus, self.recipe)
        self.progress = Progress()
        self.window = TrainingWindow(self.ranks)  # the steps' losses, on the device until read
        self.state = None
        self.run_log = RunLog(out, self.recipe.log_to, self.ranks.is_main)
        self._last_lr = 0.0
        self._attempt_start = time.perf_counter()
        self.wall_before = 0.0  # wall seconds of earlier attempts, from the checkpoint resumed

    def _step_module(self) -> torch.nn.Module:
        step = TrainingStep(self.model, self.device, self.precision)
        if not self.ranks.distributed:
            return step
        from torch.nn.parallel import DistributedDataParallel

        torch.manual_seed(self.resolved.spec.seed + (self.ranks.rank << 32))  # each process its own dropout masks
        return DistributedDataParallel(step, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    # ---- budget and layout ------------------------------------------------------------------

    @property
    def chars_per_token(self) -> float:
        return self.resolved.data.chars_per_token

    def scorer(self, final: bool = False) -> Scorer:
        """Validation's scorer, or with ``final`` that of the final numbers (``final_eval_streams`` if set, and
        progress shown)."""
        recipe = self.recipe
        streams = recipe.final_eval_streams if final and recipe.final_eval_streams else recipe.eval_streams
        layout = run_layout(self.model, streams, recipe.bptt, recipe.eval_chunk, self.precision)
        progress = self.console if final and self.show_progress else None
        return Scorer(self.model, self.tokenizer.bos_id, layout, self.device, self.precision, self.ranks, progress)

    def usage(self) -> Usage:
        p = self.progress
        return Usage(steps=p.step, epochs=p.epoch + p.pos / (self.rows.shape[1] - 1), chars=p.chars,
                     tokens=p.tokens, minutes=p.seconds / 60.0, flops=p.tokens * self.flops_per_token)

    def estimated_total_steps(self) -> int | None:
        epoch = (self.rows.shape[1] - 1) * self.recipe.batch_size  # every process's rows are equally long
        return self.budget.planned_steps(self.chars_per_token, epoch, mean_step_tokens(self.recipe),
                                         self.flops_per_token)

    # ---- checkpoints ------------------------------------------------------------------------

    def payload(self, kind: str) -> dict:
        return {
            "kind": kind,
            "resolved": self.resolved.to_json(),
            "run_id": self.resolved.run_id(),
            "tokenizer": self.tokenizer.to_bytes().decode("ascii"),
            # what the weights were trained on, so that a later `bench eval` can say so
            "data": {s: d.provenance() for s, d in self.corpus.encoded.splits.items()},
            "model": self.model.state_dict(),
        }

    def wall_seconds(self, since: float | None = None) -> float:
        """Wall time of every attempt: earlier ones up to their last checkpoint, this one until now."""
        return self.wall_before + time.perf_counter() - (self._attempt_start if since is None else since)

    def save_checkpoint(self) -> None:
        """Every process takes part; the main one writes checkpoint.pt (bench.engine.resume)."""
        save_training(self)

    def resume(self) -> bool:
        """Resume from checkpoint.pt, if there is one (bench.engine.resume)."""
        return resume_training(self)

    def start_fresh(self, initial_weights: dict | None) -> None:
        """A first attempt (or one killed before its first checkpoint): no log of an earlier attempt is kept."""
        self.progress.started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.progress.threads = torch.get_num_threads()
        self.run_log.keep_until(-1)
        if initial_weights is not None:
            checkpoint.load_weights(self.model, initial_weights, self.recipe.init_from)

    def log(self, record: dict) -> None:
        self.run_log.write(record)

    # ---- steps ----------------------------------------------------------------------------

    def train_step(self) -> None:
        cfg, p = self.recipe, self.progress
        row_len = self.rows.shape[1] - 1
        seq_len = next_segment_length(cfg, self.jitter)
        if p.pos >= row_len:  # a new epoch: start the streams again with a fresh state
            p.epoch += 1
            p.pos = 0
            self.state = None
        seq_len = min(seq_len, row_len - p.pos)
        x = self.rows[:, p.pos:p.pos + seq_len].long()
        y = self.rows[:, p.pos + 1:p.pos + 1 + seq_len].long()
        lr = cfg.lr * lr_factor(p.step + 1, self.budget.fraction_used(self.usage()), cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        state = self.state if self.model.carries_state_in_training else None
        watch = DtypeWatch(self.model) if p.observed_dtypes is None else None  # what the first step ran in
        loss, new_state, skipped = self.step(x, y, state)
        if watch is not None:
            p.observed_dtypes = watch.close()
        chars = int(self.row_chars[:, p.pos + 1:p.pos + 1 + seq_len].sum())
        self.state = detach_state(new_state) if self.model.carries_state_in_training else None
        p.pos += seq_len
        p.step += 1
        p.tokens += x.numel() * self.ranks.world
        p.chars += chars
        self._last_lr = lr
        self.window.add(p.step, loss, skipped)  # nothing is read from the device in a step

    def read_steps(self) -> None:
        """The losses and skipped updates of the steps not yet read (every process takes part); raises
        TrainingDiverged at a loss that is not finite."""
        self.progress.skipped_steps += self.window.read()

    def _stop_requested(self, signal_name: str | None) -> str | None:
        """A signal to any process stops every process at the same step."""
        if not self.ranks.distributed:
            return signal_name
        # a host tensor (gloo): exchanged between the processes without waiting for the device
        stops = self.ranks.sum(torch.tensor([0.0 if signal_name is None else 1.0])).item()
        return (signal_name or "a signal to another process") if stops else None

    def validate(self) -> dict:
        """Validation in every comparable metric (bench.metrics), and the unigram floor of the same text."""
        return self.validation.metrics(self.scorer())

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        from tqdm import tqdm

        cfg, p = self.recipe, self.progress
        total = self.estimated_total_steps()
        bytes_per_token = self.corpus.counts["train"]["n_bytes"] / len(self.corpus.encoded.ids["train"])
        interactive = self.show_progress and self.console.isatty()
        bar = tqdm(total=total, initial=p.step, disable=not interactive, unit="step", dynamic_ncols=True,
                   file=self.console, desc=f"{self.resolved.spec.model}/{self.resolved.spec.tokenizer}")
        valid_text, train_text = "-", "-"
        with SignalGuard() as guard:
            while self.budget.fraction_used(self.usage()) < 1.0:
                start = time.perf_counter()
                if self.startup_seconds is None:
                    self.startup_seconds = start - self.started
                self.train_step()
                logs, validates = p.step % cfg.log_every == 0, cfg.eval_every and p.step % cfg.eval_every == 0
                if logs or validates or p.step % cfg.checkpoint_every == 0:
                    self.read_steps()  # waits for the device to finish the steps queued: training time
                p.seconds += time.perf_counter() - start
                chars_per_s = p.chars / max(p.seconds, 1e-9)
                if logs:
                    train_bpb = self._log_training(self.window.mean(), bytes_per_token, chars_per_s)
                    train_text = f"{train_bpb:.3f} bpb"
                    self._warn_of_zero_gradients()
                if validates:
                    valid_text = self._validate_and_keep_best()
                    if self.show_progress and not interactive:  # a log file gets one line per validation
                        print(f"step {p.step}/{total or '?'}  {chars_per_s:,.0f} char/s  train {train_text}  "
                              f"valid {valid_text}", file=self.console, flush=True)
                if p.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
                bar.update(1)
                bar.set_postfix_str(f"{chars_per_s:,.0f} char/s  train {train_text}  valid {valid_text}")
                stop = self._stop_requested(guard.stop)
                if stop:
                    self.save_checkpoint()
                    bar.close()
                    raise TrainingInterrupted(f"{stop} at step {p.step}: checkpoint saved in {self.out}; "
                                              f"run the same command again to resume", signal_name=stop)
        bar.close()
        if p.validated_step != p.step:  # the last step is validated once, also when a resume finds it done
            self._validate_and_keep_best()
        self.save_checkpoint()

    def _log_training(self, mean_loss: float, bytes_per_token: float, chars_per_s: float) -> float:
        """Logs the mean loss of the steps since the last log line; returns it in bits per byte."""
        p = self.progress
        bits_per_byte = mean_loss / math.log(2) / bytes_per_token
        record = {"step": p.step, "epoch": p.epoch, "tokens": p.tokens, "train_chars": p.chars,
                  "train_flops": p.tokens * self.flops_per_token, "lr": self._last_lr, "train_loss": mean_loss,
                  "train_bits_per_byte": bits_per_byte, "chars_per_second": chars_per_s, "seconds": p.seconds}
        if self.scaler is not None:
            record.update(loss_scale=self.scaler.get_scale(), skipped_steps=p.skipped_steps)
        self.log(record)
        return bits_per_byte

    def _warn_of_zero_gradients(self) -> None:
        for line in self.zero_gradients.new_warnings(self.progress.step):
            self.progress.warnings.append(line)
            self.log({"step": self.progress.step, "warning": line})
            if self.ranks.is_main:
                print(f"warning: {line}", file=self.console, flush=True)

    def check_not_diverged(self, mean_nll: dict[str, float]) -> None:
        """A loss (nats per token) beyond twice the uniform model's, log V, is a diverged model, not a result."""
        limit = DIVERGED_FACTOR * math.log(self.tokenizer.vocab_size)
        for split, loss in mean_nll.items():
            if not loss <= limit:
                raise TrainingDiverged(f"the {split} loss is {loss:.4g} nats per token at step {self.progress.step}, "
                                       f"beyond {DIVERGED_FACTOR:g}x the uniform model's {limit / DIVERGED_FACTOR:.4g}:"
                                       f" the model diverged; try a lower lr or stronger clipping")

    def check_learning(self, metrics: dict) -> None:
        """Stop a run whose validations have stalled at its unigram floor (bench.engine.learning)."""
        p, floor = self.progress, metrics["valid_floor_bits_per_char"]
        p.validations.append((p.step, metrics["valid_bits_per_char"]))
        used = self.budget.fraction_used(self.usage())
        if (self.recipe.stop_if_not_learning and used >= self.recipe.not_learning_after
                and stalled_at_floor(p.validations, floor, self.recipe.warmup_steps)):
            raise TrainingNotLearning(not_learning_message(p.validations, floor, used))

    def _validate_and_keep_best(self) -> str:
        p = self.progress
        self.read_steps()  # a training loss that diverged is named before validation finds it
        metrics = self.validate()
        self.check_not_diverged({"validation": metrics["valid_loss"]})
        bpc = metrics["valid_bits_per_char"]
        self.log({"step": p.step, "train_chars": p.chars, "train_flops": p.tokens * self.flops_per_token, **metrics})
        self.check_learning(metrics)
        p.validated_step = p.step
        if p.best_valid_bpc is None or bpc < p.best_valid_bpc:
            p.best_valid_bpc, p.best_step = bpc, p.step
            if self.ranks.is_main:
                checkpoint.save(self.out / BEST, {**self.payload("model"), "step": p.step, "valid": metrics})
        return f"{bpc:.3f} bpc"
