"""What a run is, as plain data: :class:`RunSpec` (what the user asked for) and :class:`TrainConfig`.

A :class:`RunSpec` names the model, a preset, overrides (``--set KEY=VALUE``), the
tokenization scheme, the corpus and the seed. :func:`validate_spec` checks the names
and converts every override to its field's type, before any data is touched; an
unknown key or a bad value is a :class:`BenchError` that lists what is allowed.
Turning a spec into the configuration a run executes is :mod:`bench.engine.resolve`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Optional

from bench.data.corpora import HELD_OUT
from bench.errors import BenchError
from bench.settings import (AT_LEAST_1, BELOW_1, FRACTION, NOT_NEGATIVE, POSITIVE, check_settings, field_types,
                            literal_choices, refusal, section, unwrap_optional)
from tokenizers_study.base import SchemeSpec


layout = section("data layout")
optimisation = section("optimisation")
budget = section("budget")  # training stops at the first limit reached (bench.engine.budget)
bookkeeping = section("evaluation and bookkeeping")
runtime = section("runtime")


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = layout(16, "parallel streams the train split is laid out in", AT_LEAST_1)
    bptt: int = layout(64, "training segment length, tokens (the Transformer's context)", AT_LEAST_1)
    context_chars: Optional[int] = layout(None, "if set: bptt = round(context_chars / characters per token)",
                                          POSITIVE)
    seq_jitter: bool = layout(False, "the reference's random segment length (bptt, sometimes halved, plus noise)")

    optimizer: Literal["lamb", "adamw"] = optimisation("adamw", "LAMB (the SHA-RNN paper's) or AdamW")
    lr: float = optimisation(1e-3, "peak learning rate", POSITIVE)
    weight_decay: float = optimisation(0.0, "decoupled weight decay", NOT_NEGATIVE)
    beta1: float = optimisation(0.9, "first-moment decay of Adam and LAMB", BELOW_1)
    beta2: float = optimisation(0.999, "second-moment decay of Adam and LAMB", BELOW_1)
    eps: float = optimisation(1e-6, "added to the second-moment root", NOT_NEGATIVE)
    min_trust: float = optimisation(0.25, "LAMB only: floor of the trust ratio", BELOW_1)
    warmup_steps: int = optimisation(0, "linear warmup from 0", NOT_NEGATIVE)
    schedule: Literal["constant", "linear", "cosine"] = optimisation("constant",
                                                                     "learning-rate decay after warmup")
    min_lr_ratio: float = optimisation(0.0, "where linear and cosine decay end, as a fraction of lr", FRACTION)
    clip: float = optimisation(0.25, "gradient norm clipping (0: off)", NOT_NEGATIVE)

    max_steps: Optional[int] = budget(None, "optimizer steps", POSITIVE)
    max_epochs: Optional[float] = budget(None, "passes over the train split (fractions allowed)", POSITIVE)
    max_train_chars: Optional[int] = budget(None, "characters of training text seen", POSITIVE)
    max_tokens: Optional[int] = budget(None, "tokens of training text seen", POSITIVE)
    max_minutes: Optional[float] = budget(None, "wall-clock minutes of training (not reproducible: a guard)",
                                          POSITIVE)
    max_train_flops: Optional[float] = budget(None, "training FLOPs (the model's per token, times tokens seen)",
                                              POSITIVE)

    eval_every: int = bookkeeping(100, "steps between validations (0: only at the end)", NOT_NEGATIVE)
    eval_max_chars: Optional[int] = bookkeeping(
        None, "validation during training scores the first N characters (whole lines)", POSITIVE)
    eval_max_tokens: Optional[int] = bookkeeping(
        None, "or the first N tokens (not the same text under each tokenization)", POSITIVE)
    eval_streams: int = bookkeeping(16, "evaluation lays a split out in this many parallel streams, each from <bos>",
                                    AT_LEAST_1)
    final_eval_streams: Optional[int] = bookkeeping(
        None, "for the final numbers (1: one stream, never restarted; none: the same)", POSITIVE)
    eval_chunk: Optional[int] = bookkeeping(
        None, "tokens per evaluation forward pass (default bptt); Transformer: stride", POSITIVE)
    checkpoint_every: int = bookkeeping(100, "steps between checkpoints (resume starts from the last)", AT_LEAST_1)
    log_every: int = bookkeeping(10, "steps between training-loss lines in log.jsonl", AT_LEAST_1)
    log_to: Literal["none", "tensorboard"] = bookkeeping(
        "none", "also write the curves of log.jsonl as TensorBoard event files in the run folder (bench.engine.curves)")
    dump_token_losses: bool = bookkeeping(
        False, "save each evaluated token's NLL (token_nll.<split>.npy in the run folder)")
    init_from: Optional[str] = bookkeeping(
        None, "start from these weights (a checkpoint or run folder), new optimizer")
    final_eval_splits: str = bookkeeping("valid,test", "splits scored in full at the end")
    stop_if_not_learning: bool = bookkeeping(
        True, "stop as not-learning a run whose last validations have stalled short of 2% below its unigram "
              "floor (bench.engine.learning)")
    not_learning_after: float = bookkeeping(0.25, "the share of the budget before which that is never judged (nor "
                                                  "before warmup ends)", FRACTION)

    device: str = runtime("auto", "where to run: auto, cpu, cuda, cuda:N, mps")
    threads: Optional[int] = runtime(
        None, "CPU threads (none: $OMP_NUM_THREADS, else the cores shared among the runs at a time)", POSITIVE)
    precision: Literal["auto", "float32", "bfloat16", "float16"] = runtime(
        "auto", "float16: with loss scaling; auto: float32 on a CPU, on CUDA float16 for models with LSTMs, else "
                "bfloat16 (bench.engine.hardware.precision)")
    rnn_precision: Literal["auto", "float32", "autocast"] = runtime(
        "auto", "recurrent layers (LSTM, GRU, RNN) under bf16/fp16: auto (the policy: never float16 unscaled), "
                "float32, or autocast (as PyTorch decides: float16 on cuDNN even under bf16, unscaled); "
                "lstm_precision, its former name, is read as it")
    compile: bool = runtime(False, "torch.compile the parts each model names (LanguageModel.compile_parts)")
    lamb_impl: Literal["auto", "foreach", "loop"] = runtime(
        "auto", "LAMB only: foreach (torch._foreach_* over all tensors, no host synchronisation), loop (one parameter "
                "at a time) or auto (foreach on CUDA, else loop); the same update to rounding, not in the run id")
    cuda_graphs: bool = runtime(
        False, "replay each training step from one CUDA graph once its shapes repeat (bench.engine.hardware.cuda_graphs): CUDA "
               "only, fixed shapes (seq_jitter=false), not float16's loss scaler; not in the run id")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.eval_max_chars is not None and self.eval_max_tokens is not None:
            raise ValueError("eval_max_chars and eval_max_tokens are both set; validation takes one of them")
        splits = self.final_splits
        if not splits or any(s not in HELD_OUT for s in splits):
            raise ValueError("final_eval_splits must list valid and/or test, e.g. valid,test")

    @property
    def final_splits(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.final_eval_splits.split(",") if s.strip())


@dataclass(frozen=True)
class RunSpec:
    """One training run as the user asked for it."""

    model: str = "sha-rnn"
    preset: str = "tiny"
    tokenizer: str = "byte"
    dataset: str = "wikitext-2"
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)
    data_dir: Optional[str] = None
    out_dir: Optional[str] = None

    @property
    def scheme(self) -> SchemeSpec:
        """The tokenizer's name parsed into its spec, once per spec: what the data layer is handed."""
        if "_scheme" not in self.__dict__:
            from tokenizers_study import parse_scheme

            object.__setattr__(self, "_scheme", parse_scheme(self.tokenizer))
        return self.__dict__["_scheme"]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunSpec":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


# ------------------------------------------------------------------------------ parsing --set values


def parse_value(kind, text: Any, key: str):
    """Turn a ``--set`` string (or a TOML value) into a field's type."""
    if isinstance(text, (list, dict)):
        raise BenchError(f"bad value {text!r} for {key}: expected one value (a list of values belongs under "
                         "[axes] or [[include]])")
    inner, optional = unwrap_optional(kind)
    if optional:
        if text is None or (isinstance(text, str) and text.strip().lower() in ("none", "null", "")):
            return None
        return parse_value(inner, text, key)
    if choices := literal_choices(kind):
        value = str(text).strip()
        if value not in choices:
            raise BenchError(f"bad value {text!r} for {key}; allowed: {', '.join(map(str, choices))}")
        return value
    parsers = {bool: _parse_bool, int: _parse_int, float: _parse_float, str: str}
    if kind not in parsers:
        raise BenchError(f"cannot set {key} from the command line")
    try:
        return parsers[kind](text)
    except ValueError:
        raise BenchError(f"bad value {text!r} for {key}: expected {getattr(kind, '__name__', kind)}") from None


def _parse_bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _parse_int(text: Any) -> int:
    if isinstance(text, bool):
        raise ValueError(text)
    if isinstance(text, float):
        if not text.is_integer():
            raise ValueError(text)
        return int(text)
    value = str(text).strip().replace("_", "")
    return int(float(value)) if ("e" in value.lower() and float(value).is_integer()) else int(value)


def _parse_float(text: Any) -> float:
    if isinstance(text, bool):
        raise ValueError(text)
    return float(text)


def allowed_keys(model: str) -> tuple[list[str], list[str]]:
    """The model's settings and the training settings a spec may override: one namespace (``--set KEY=VALUE``, a
    matrix's settings tables), so a family whose setting is also a training setting is refused wherever it is used
    (the model layer, below this one, cannot see the training settings when a family registers)."""
    from bench.models import config_class

    model_keys = [f.name for f in fields(config_class(model)) if f.name != "vocab_size"]
    train_keys = [f.name for f in fields(TrainConfig)]
    if shared := sorted(set(model_keys) & set(train_keys)):
        raise BenchError(f"model {model!r}: its setting(s) {', '.join(shared)} are also training settings, and "
                         f"--set {shared[0]}=... would set both; rename them in {config_class(model).__name__}")
    return model_keys, train_keys


# Settings renamed since runs were first recorded, former name -> name: the former is read as the name wherever
# settings are read (--set, a matrix config, a recorded spec or resolved run), and a run's id is computed under the
# former name, so that every run recorded before keeps its id.
RENAMED = {"lstm_precision": "rnn_precision"}


def current_names(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (settings by name) with former names read as today's; both at once is refused."""
    out = dict(values)
    for former, name in RENAMED.items():
        if former in out:
            if name in out:
                raise BenchError(f"{former} is the former name of {name}; set {name} only")
            out[name] = out.pop(former)
    return out


def recorded_names(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` under the names runs were first recorded with: what a run id hashes."""
    former = {name: old for old, name in RENAMED.items()}
    return {former.get(key, key): value for key, value in values.items()}


def parse_overrides(model: str, pairs: dict[str, Any]) -> dict[str, Any]:
    """Check keys against the model's and the training config's fields and convert values."""
    from bench.models import config_class

    pairs = current_names(pairs)
    model_keys, train_keys = allowed_keys(model)
    declared = {f.name: (f, cls) for cls in (TrainConfig, config_class(model)) for f in fields(cls)}
    out = {}
    for key, raw in pairs.items():
        if key not in model_keys and key not in train_keys:
            raise BenchError(
                f"unknown setting {key!r} for {model}; model settings: {', '.join(model_keys)}; "
                f"training settings: {', '.join(train_keys)}"
            )
        f, cls = declared[key]
        out[key] = parse_value(field_types(cls)[key], raw, key)
        if problem := refusal(cls, f, out[key]):
            raise BenchError(problem)
    return out


def check_seed(seed: Any, what: str) -> None:
    """A seed of torch's and numpy's generators: an integer from 0 to 2**32 - 1."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise BenchError(f"{what} must be an integer from 0 to 2**32 - 1, not {seed!r}")


def validate_spec(spec: RunSpec) -> RunSpec:
    """Check names and overrides before any data is touched; returns the spec with the scheme's
    canonical name and typed overrides. Everything that needs the data is checked by ``resolve``."""
    from bench.arguments import instance_argument, optional_path, text_argument
    from bench.engine.presets import get_preset
    from tokenizers_study import parse_scheme

    instance_argument(spec, RunSpec, "a run", "RunSpec(model='lstm', tokenizer='byte', dataset='wikitext-2')")
    for name in ("model", "preset", "tokenizer", "dataset"):
        text_argument(getattr(spec, name), f"RunSpec.{name}")
    instance_argument(spec.overrides, dict, "RunSpec.overrides", "{'lr': 0.001}")
    for name in ("data_dir", "out_dir"):
        optional_path(getattr(spec, name), f"RunSpec.{name}")
    get_preset(spec.model, spec.preset)
    check_seed(spec.seed, "seed")
    scheme = parse_scheme(spec.tokenizer)
    checked = dataclasses.replace(spec, tokenizer=scheme.name, overrides=parse_overrides(spec.model, spec.overrides))
    object.__setattr__(checked, "_scheme", scheme)  # parsed here once: RunSpec.scheme hands it on
    return checked
