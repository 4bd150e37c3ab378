"""A run resolved once: :func:`resolve` turns a spec and its data's facts into a :class:`ResolvedRun`.

The run configuration is frozen and round-trips through JSON. ``bench train``
resolves once, the matrix planner once per cell, and whoever executes the run (the
CLI, a matrix worker, a cluster job) receives the configuration and checks its run
id instead of resolving again. Settings that could only fail later (conflicting
contexts, an evaluation stride beyond a Transformer's window, a batch the train
split cannot fill, no budget) are one-line errors here, so ``--dry-run`` finds them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.data.facts import DataFacts
from bench.engine.budget import Budget, epoch_tokens, mean_step_tokens
from bench.engine.spec import RunSpec, TrainConfig, allowed_keys, current_names, recorded_names
from bench.errors import BenchError
from tokenizers_study import read_scheme


MOST_STEPS = 10_000_000  # more steps than any study of this toolkit needs: a budget beyond is a typo
# Settings (training or a model's) added after run ids were first published: in the run id only when set to another
# value than their default, so that a run planned before keeps its id.
ADDED_LATER = ("rnn_precision", "stop_if_not_learning", "not_learning_after", "layer_overlap")
# Where and how a run executes or shows its curves, not what it computes (the same numbers up to rounding): never in
# the run id.
EXECUTION = ("device", "threads", "lamb_impl", "cuda_graphs", "log_to")


@dataclass(frozen=True)
class ModelSize:
    """What the resolved model costs, from one build on the meta device: parameters, FLOPs per token (forward, and
    forward plus backward at the training segment) and the training budget in tokens (None where the data's facts
    cannot give it, e.g. a budget in epochs without the train split's size)."""

    params_total: int
    params_non_embedding: int
    flops_per_token_forward: float
    flops_per_token_train: float
    planned_tokens: float | None


@dataclass(frozen=True)
class ResolvedRun:
    spec: RunSpec
    model: Any  # the model family's config dataclass (bench.models)
    train: TrainConfig
    data: DataFacts

    @property
    def budget(self) -> Budget:
        return Budget.of(self.train)

    def size(self) -> ModelSize:
        """The model's size and planned tokens: measured at resolution, or once here for a configuration read back
        from JSON."""
        if "_size" not in self.__dict__:
            object.__setattr__(self, "_size", _model_size(_meta_model(self.spec.model, self.model), self.train,
                                                          self.data))
        return self.__dict__["_size"]

    def run_id(self) -> str:
        """A hash of everything that determines the run's result: the resolved spec and the data's identity
        (tokenizer hash, split checksums), not where the run is written, on which device, with how many threads or
        with which implementation of the same optimizer update (:data:`EXECUTION`).
        Computed once per configuration (it is frozen)."""
        if "_run_id" not in self.__dict__:
            object.__setattr__(self, "_run_id", self._hash())
        return self.__dict__["_run_id"]

    def _hash(self) -> str:
        spec = {k: v for k, v in self.spec.to_json().items() if k not in ("out_dir", "data_dir")}
        spec["overrides"] = recorded_names({k: v for k, v in current_names(spec["overrides"]).items()
                                            if k not in (*EXECUTION, "init_from")})
        scheme, family = read_scheme(spec["tokenizer"])
        if family is not None and family.pretrained:  # a pretrained tokenizer is its file, whose sha256 is in the
            spec["tokenizer"] = scheme.family  # data's identity: the path that names it is not
        train, model = asdict(self.train), asdict(self.model)
        for name in EXECUTION:
            train.pop(name)
        for values, config in ((train, self.train), (model, self.model)):
            for name in ADDED_LATER:
                if name in values and values[name] == type(config).__dataclass_fields__[name].default:
                    values.pop(name)
        if train["init_from"]:  # a run folder's name carries its run id, a checkpoint's its folder's: not the location
            start = Path(train["init_from"])
            train["init_from"] = "/".join(start.parts[-2:]) if start.suffix == ".pt" else start.name
        content = {"spec": spec, "model": model, "train": recorded_names(train), "data": self.data.identity()}
        blob = json.dumps(content, sort_keys=True).encode()  # JSON values only, as spec.json holds them
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_spec(self, **changes) -> "ResolvedRun":
        """The same run with spec fields that do not change its id (``out_dir``, ``data_dir``) set."""
        allowed = {"out_dir", "data_dir"}
        if set(changes) - allowed:
            raise ValueError(f"only {allowed} can change without resolving again")
        moved = dataclasses.replace(self, spec=dataclasses.replace(self.spec, **changes))
        object.__setattr__(moved, "_run_id", self.run_id())  # the same run: its id and size are not computed again
        if "_size" in self.__dict__:
            object.__setattr__(moved, "_size", self.__dict__["_size"])
        return moved

    def to_json(self) -> dict:
        return {"spec": self.spec.to_json(), "model": asdict(self.model), "train": asdict(self.train),
                "data": self.data.to_json(), "run_id": self.run_id()}

    @classmethod
    def from_json(cls, data: dict) -> "ResolvedRun":
        """Rebuild a configuration and check that it is the run it says it is."""
        from bench.models import make_config

        spec = RunSpec.from_json(data["spec"])
        config = cls(spec, make_config(spec.model, data["model"]), TrainConfig(**current_names(data["train"])),
                     DataFacts.from_json(data["data"]))
        if data.get("run_id") != config.run_id():
            raise BenchError(f"run configuration {data.get('run_id')} does not hash to its run id "
                             f"({config.run_id()}): it was edited or written by another version; plan it again")
        return config


def resolve(spec: RunSpec, facts: DataFacts) -> ResolvedRun:
    """Apply preset and overrides; derive what depends on the data (vocabulary, context in tokens). ``spec`` is
    validated (``validate_spec``: its overrides are typed already)."""
    from bench.engine.presets import get_preset
    from bench.models import MODELS, make_config

    preset = get_preset(spec.model, spec.preset)
    overrides = spec.overrides
    model_keys, _ = allowed_keys(spec.model)
    model_values = {**preset["model"], **{k: v for k, v in overrides.items() if k in model_keys}}
    train = _train_config(preset["train"], {k: v for k, v in overrides.items() if k not in model_keys}, facts)
    family = MODELS[spec.model]
    if family.window_setting is not None and family.window_setting not in overrides:
        model_values[family.window_setting] = train.bptt  # a windowed model sees its training segment
    model = make_config(spec.model, {**model_values, "vocab_size": facts.vocab_size})
    _check_layout(family.window_of(model), train, facts)
    _check_layer_overlap(getattr(model, "layer_overlap", 1), train)
    net = _meta_model(spec.model, model)
    _check_runtime(train, net)
    size = _model_size(net, train, facts)
    _check_budget_size(size, model, train)
    resolved = ResolvedRun(spec, model, train, facts)
    object.__setattr__(resolved, "_size", size)
    return resolved


def _meta_model(model_name: str, model_config):
    """The model built on the meta device: its FLOPs, parameters and modules, without memory."""
    import torch

    from bench.models import build_model

    with torch.device("meta"):
        return build_model(model_name, model_config)


def _train_config(preset: dict, overrides: dict, facts: DataFacts) -> TrainConfig:
    if "bptt" in overrides and overrides.get("context_chars") is not None:
        raise BenchError("both bptt (tokens) and context_chars (characters) are set; set only one of them")
    preset = current_names(preset)  # a family's preset may still use a setting's former name
    for name, other in (("eval_max_chars", "eval_max_tokens"), ("eval_max_tokens", "eval_max_chars")):
        if overrides.get(name) is not None and other not in overrides:
            preset[other] = None  # a span of validation set explicitly replaces the preset's
    try:
        train = TrainConfig(**{**preset, **overrides})
    except ValueError as exc:
        raise BenchError(f"bad training setting: {exc}") from None
    if train.context_chars is not None:
        if facts.chars_per_token is None:
            raise BenchError("context_chars is in characters, and characters per token need the data: give "
                             "--tokenizer and --dataset, or set bptt (tokens) instead")
        train = dataclasses.replace(train, bptt=max(2, round(train.context_chars / facts.chars_per_token)))
    if not Budget.of(train).is_set():
        raise BenchError("no training budget: set one of max_steps, max_epochs, max_train_chars, max_tokens, "
                         "max_minutes (e.g. --set max_steps=1000)")
    return train


def _model_size(net, train: TrainConfig, facts: DataFacts) -> ModelSize:
    """``net``: the model on the meta device."""
    flops_per_token = net.train_flops_per_token(train.bptt)
    epoch = epoch_tokens(facts.train_tokens, train.batch_size) if facts.train_tokens else None
    tokens = Budget.of(train).planned_tokens(facts.chars_per_token, epoch, mean_step_tokens(train), flops_per_token)
    return ModelSize(net.num_params(), net.non_embedding_params(), net.flops_per_token(train.bptt), flops_per_token,
                     tokens)


def _check_budget_size(size: ModelSize, model_config, train: TrainConfig) -> None:
    """A budget that allows less than one optimizer step, or more than :data:`MOST_STEPS` (a typo such as
    ``flops = 1e30``), is refused, as is a run beyond its device's memory."""
    from bench.engine.hardware.memory import check_memory

    step = mean_step_tokens(train)
    eval_tokens = max(train.eval_streams, train.final_eval_streams or 0) * (train.eval_chunk or train.bptt)
    check_memory(size.params_total, model_config.vocab_size, round(step), eval_tokens, train.device)
    tokens = size.planned_tokens
    if tokens is None:
        return
    if tokens < step:
        raise BenchError(f"the training budget allows {tokens:,.4g} tokens, less than one step ({step:,.0f} tokens: "
                         f"batch_size x bptt); raise it")
    if tokens / step > MOST_STEPS:
        raise BenchError(f"the training budget plans {tokens / step:,.3g} steps, beyond {MOST_STEPS:,} (the paper's "
                         f"SHA-RNN trains about 80,000); lower it")


def _check_runtime(train: TrainConfig, net) -> None:
    """Settings that cannot act as written: too many threads for this machine, a precision or CUDA graphs where
    they cannot run, a floor for a decay that never happens (``net``: the model on the meta device)."""
    from bench.engine.hardware.cuda_graphs import check_cuda_graphs
    from bench.engine.curves import check_log_to
    from bench.engine.hardware.device import check_threads
    from bench.engine.hardware.precision import check_precision
    from bench.models.recurrent import has_rnn

    check_threads(train.threads, "threads")
    check_precision(train.precision, train.rnn_precision, train.device)
    check_cuda_graphs(train, has_rnn(net))
    check_log_to(train.log_to)
    if train.schedule == "constant" and train.min_lr_ratio > 0:
        raise BenchError(f"min_lr_ratio ({train.min_lr_ratio}) is where a linear or cosine decay ends, but schedule is "
                         f"constant; set schedule=linear or cosine, or leave min_lr_ratio out")


def check_eval_chunk(chunk: int | None, window: int | None, setting: str) -> None:
    """An evaluation chunk is the stride of a windowed model's evaluation: at most its window."""
    if chunk is not None and window is not None and chunk > window:
        raise BenchError(f"{setting} ({chunk}) is longer than the model's window ({window}): it is the stride of the "
                         f"evaluation window; use at most {window}")


def _check_layer_overlap(overlap: int, train: TrainConfig) -> None:
    """A model whose blocks run overlapped (the SHA-RNN's ``layer_overlap``) cuts each segment into that many chunks
    of at least one position: beyond the positions of a training segment or an evaluation chunk, the chunks would
    silently be fewer, each a single position (and many times slower)."""
    for setting, positions in (("bptt", train.bptt), ("eval_chunk", train.eval_chunk)):
        if positions is not None and overlap > positions:
            raise BenchError(f"layer_overlap ({overlap}) is more chunks than the {positions} positions of a segment "
                             f"({setting} {positions}); set layer_overlap to at most {positions}, or raise {setting}")


def _check_layout(window: int | None, train: TrainConfig, facts: DataFacts) -> None:
    """What would otherwise fail once training or evaluation starts (``window``: a windowed model's)."""
    if window is not None:
        if train.bptt > window:
            raise BenchError(f"bptt ({train.bptt}) is longer than the model's window ({window}); set bptt to at most "
                             f"{window} or a longer context")
        check_eval_chunk(train.eval_chunk, window, "eval_chunk")
    if facts.train_tokens is not None and epoch_tokens(facts.train_tokens, train.batch_size) < 2 * train.batch_size:
        raise BenchError(f"train split ({facts.train_tokens} tokens) is too short for batch_size "
                         f"{train.batch_size}; lower batch_size")
    stream = facts.train_tokens // train.batch_size if facts.train_tokens is not None else None
    if stream is not None and train.bptt > stream - 1:  # a segment is at most a stream: the rest is never trained
        raise BenchError(f"bptt {train.bptt} is longer than each of the {train.batch_size} training streams "
                         f"({stream:,} tokens of {facts.corpus} train under {facts.scheme}); lower bptt to at most "
                         f"{stream - 1:,} (or batch_size)")
