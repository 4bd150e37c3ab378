"""What a training run is: plain, JSON-serialisable specs and their resolution.

A :class:`RunSpec` names the model, a preset, overrides (``--set KEY=VALUE``),
the tokenization scheme, the corpus and the seed. Resolving it against the
preset gives the model config (one dataclass per model family) and a
:class:`TrainConfig`. Every field of either can be overridden; an unknown key
or a bad value is a :class:`BenchError` that lists what is allowed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Optional

from bench.errors import BenchError


@dataclass
class TrainConfig:
    # --- data layout ---------------------------------------------------------------------------
    batch_size: int = 16  # parallel streams the train split is laid out in
    bptt: int = 64  # training segment length, tokens (the Transformer's context)
    context_chars: Optional[int] = None  # if set: bptt = round(context_chars / characters per token)
    seq_jitter: bool = False  # the reference's random segment length (bptt, sometimes halved, plus noise)
    # --- optimisation --------------------------------------------------------------------------
    optimizer: Literal["lamb", "adamw"] = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    min_trust: float = 0.25  # LAMB only: floor of the trust ratio
    warmup_steps: int = 0  # linear warmup from 0
    schedule: Literal["constant", "linear", "cosine"] = "constant"  # after warmup
    min_lr_ratio: float = 0.0  # where linear and cosine decay end, as a fraction of lr
    clip: float = 0.25  # gradient norm clipping (0: off)
    # --- budget: training stops at the first limit reached ----------------------------------------
    max_steps: Optional[int] = None
    max_epochs: Optional[float] = None
    max_train_chars: Optional[int] = None  # characters of training text seen
    max_tokens: Optional[int] = None  # tokens of training text seen
    max_minutes: Optional[float] = None
    # --- evaluation and bookkeeping ------------------------------------------------------------------
    eval_every: int = 100  # steps between validations (0: only at the end)
    eval_max_tokens: Optional[int] = 50_000  # validation during training scores this many tokens (None: all)
    eval_streams: int = 16  # evaluation lays a split out in this many parallel streams
    eval_chunk: Optional[int] = None  # tokens per evaluation forward pass (default bptt); Transformer: stride
    checkpoint_every: int = 100
    log_every: int = 10
    dump_token_losses: bool = False  # save each evaluated token's NLL (token_nll.<split>.npy in the run folder)
    init_from: Optional[str] = None  # start from these weights (a checkpoint or run folder), new optimizer
    final_eval_splits: str = "valid,test"  # splits scored in full at the end
    # --- runtime -------------------------------------------------------------------------------------
    device: str = "auto"  # auto, cpu, cuda, cuda:N, mps
    precision: Literal["auto", "float32", "bfloat16"] = "auto"  # auto: bf16 autocast on CUDA
    compile: bool = False  # torch.compile the non-recurrent parts

    def __post_init__(self) -> None:
        positive = ("batch_size", "bptt", "eval_streams", "checkpoint_every", "log_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("max_steps", "max_epochs", "max_train_chars", "max_tokens", "max_minutes",
                     "context_chars", "eval_chunk", "eval_max_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive (or none)")
        if self.lr <= 0 or self.warmup_steps < 0 or self.eval_every < 0 or self.clip < 0:
            raise ValueError("lr must be positive; warmup_steps, eval_every and clip non-negative")
        if not 0 <= self.min_lr_ratio <= 1 or not 0 <= self.min_trust < 1:
            raise ValueError("min_lr_ratio must be in [0, 1] and min_trust in [0, 1)")
        splits = self.final_splits
        if not splits or any(s not in ("valid", "test") for s in splits):
            raise ValueError("final_eval_splits must list valid and/or test, e.g. valid,test")

    @property
    def final_splits(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.final_eval_splits.split(",") if s.strip())

    def has_budget(self) -> bool:
        return any(getattr(self, k) is not None for k in
                   ("max_steps", "max_epochs", "max_train_chars", "max_tokens", "max_minutes"))


@dataclass
class RunSpec:
    """One training run, as plain data."""

    model: str = "sha-rnn"
    preset: str = "tiny"
    tokenizer: str = "byte"
    dataset: str = "wikitext-2"
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)
    data_dir: Optional[str] = None
    out_dir: Optional[str] = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunSpec":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class Resolved:
    """A spec with its preset and overrides applied."""

    spec: RunSpec
    model_config: Any  # SHARNNConfig | LSTMConfig | TransformerConfig
    train: TrainConfig
    data: dict = field(default_factory=dict)  # tokenizer hash and split sha256s, once the data are known

    def to_json(self) -> dict:
        return {"spec": self.spec.to_json(), "model": asdict(self.model_config), "train": asdict(self.train),
                "data": self.data}

    def run_id(self) -> str:
        """A hash of everything that determines the run's result: the resolved spec and the data's
        identity (tokenizer hash, split checksums), not where the run is written."""
        content = self.to_json()
        content["spec"] = {k: v for k, v in content["spec"].items() if k not in ("out_dir", "data_dir")}
        content["spec"]["overrides"] = {k: v for k, v in content["spec"]["overrides"].items()
                                        if k not in ("device", "init_from")}
        train = content["train"]
        train.pop("device")  # where a run executes does not make it another run
        if train["init_from"]:  # the previous run's folder name carries its run id; its location does not matter
            train["init_from"] = Path(train["init_from"]).name
        blob = json.dumps(content, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# ------------------------------------------------------------------------------ parsing --set values


def _type_of(cls, name: str):
    hints = typing.get_type_hints(cls)
    return hints[name]


def parse_value(kind, text: Any, key: str):
    """Turn a ``--set`` string (or a TOML value) into a field's type."""
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if isinstance(text, str) and text.strip().lower() in ("none", "null", ""):
            return None
        if text is None:
            return None
        inner = [a for a in args if a is not type(None)][0]
        return parse_value(inner, text, key)
    if origin is Literal:
        value = str(text).strip()
        if value not in args:
            raise BenchError(f"bad value {text!r} for {key}; allowed: {', '.join(map(str, args))}")
        return value
    try:
        if kind is bool:
            if isinstance(text, bool):
                return text
            value = str(text).strip().lower()
            if value in ("1", "true", "yes", "on"):
                return True
            if value in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(text, bool):
                raise ValueError
            if isinstance(text, float):
                if not text.is_integer():
                    raise ValueError
                return int(text)
            value = str(text).strip().replace("_", "")
            return int(float(value)) if ("e" in value.lower() and float(value).is_integer()) else int(value)
        if kind is float:
            if isinstance(text, bool):
                raise ValueError
            return float(text)
        if kind is str:
            return str(text)
    except ValueError:
        raise BenchError(f"bad value {text!r} for {key}: expected {getattr(kind, '__name__', kind)}") from None
    raise BenchError(f"cannot set {key} from the command line")


def allowed_keys(model: str) -> tuple[list[str], list[str]]:
    from bench.models import config_class

    model_keys = [f.name for f in fields(config_class(model)) if f.name != "vocab_size"]
    train_keys = [f.name for f in fields(TrainConfig)]
    return model_keys, train_keys


def parse_overrides(model: str, pairs: dict[str, Any]) -> dict[str, Any]:
    """Check keys against the model's and the training config's fields and convert values."""
    from bench.models import config_class

    model_keys, train_keys = allowed_keys(model)
    out = {}
    for key, raw in pairs.items():
        if key in model_keys:
            out[key] = parse_value(_type_of(config_class(model), key), raw, key)
        elif key in train_keys:
            out[key] = parse_value(_type_of(TrainConfig, key), raw, key)
        else:
            raise BenchError(
                f"unknown setting {key!r} for {model}; model settings: {', '.join(model_keys)}; "
                f"training settings: {', '.join(train_keys)}"
            )
    return out


def check_spec(spec: RunSpec) -> RunSpec:
    """Validate names and overrides early (before any data is touched); returns a normalised copy."""
    from bench.presets import get_preset
    from tokenizers_study import parse_scheme

    get_preset(spec.model, spec.preset)
    parse_scheme(spec.tokenizer)
    overrides = parse_overrides(spec.model, spec.overrides)
    resolve(dataclasses.replace(spec, overrides=overrides), vocab_size=257, chars_per_token=1.0)
    return dataclasses.replace(spec, tokenizer=parse_scheme(spec.tokenizer).name, overrides=overrides)


def resolve(spec: RunSpec, vocab_size: int, chars_per_token: float, data: dict | None = None) -> Resolved:
    """Apply preset and overrides; derive what depends on the tokenizer (vocabulary, context in tokens)."""
    from bench.models import make_config
    from bench.presets import get_preset

    preset = get_preset(spec.model, spec.preset)
    overrides = parse_overrides(spec.model, spec.overrides)
    model_keys, _ = allowed_keys(spec.model)
    model_values = {**preset["model"], **{k: v for k, v in overrides.items() if k in model_keys}}
    train_values = {**preset["train"], **{k: v for k, v in overrides.items() if k not in model_keys}}
    try:
        train = TrainConfig(**train_values)
    except ValueError as exc:
        raise BenchError(f"bad training setting: {exc}") from None
    if train.context_chars is not None:
        train = dataclasses.replace(train, bptt=max(2, round(train.context_chars / chars_per_token)))
    if not train.has_budget():
        raise BenchError("no training budget: set one of max_steps, max_epochs, max_train_chars, max_tokens, "
                         "max_minutes (e.g. --set max_steps=1000)")
    if spec.model == "transformer" and "context" not in overrides:
        model_values["context"] = train.bptt  # the Transformer's window is the training segment
    model_values["vocab_size"] = vocab_size
    model_config = make_config(spec.model, model_values)
    if spec.model == "transformer" and train.bptt > model_config.context:
        raise BenchError(f"bptt ({train.bptt}) is longer than the Transformer's context ({model_config.context})")
    return Resolved(spec, model_config, train, dict(data or {}))
