"""The result of a run: one schema, written as ``result.json`` and flattened into ``runs.csv``.

Every reader (the matrix, the report and its analyses, ``bench eval``) goes through
these dataclasses. Layout of ``result.json`` (schema version 3)::

    schema_version, kind ("trained", or "pretrained": a model trained elsewhere, scored by bench eval-hf),
    status ("done"), run_id
    spec          a trained run's RunSpec as asked for (bench.engine.spec); null for a pretrained model
    resolved      {model: the model config, train: the TrainConfig} after resolution; {} for a pretrained model
    pretrained    a pretrained model's folder, weights and scored split (PretrainedSource); null for a trained run
    model         name, params_total, params_non_embedding, train_flops_per_token
    tokenizer     scheme, hash, vocab_size, chars_per_token_train, lossless per split
    data          corpus, verified, splits: per split file, size, sha256, status, verified
    training      steps, epochs, tokens, chars (those the tokens seen begin), seconds, throughput, best step
                  and its valid bits/char, FLOPs, CPU threads, precision {setting, ran, observed dtypes per module
                  family, loss scale, skipped steps}, warnings
    evaluation    weights ("best (step N)" or "final") and the sha256 of their tensors, layout {streams, chunk,
                  window, precision}, what was scored
    metrics       per split: every field of bench.metrics.normalize, eval seconds and chars/s, lossless; read
                  back, the metrics are computed from the total NLL and counts (a metric declared since the file
                  was written is there too) and any the file holds must agree with them
    comparable, comparability_notes
    provenance    git commit and dirty flag, library versions, device, machine, start, finish, wall seconds

Version 2 files (no ``kind``: a pretrained model's result a trained run's with preset "pretrained" and no
training) are read as version 3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional

from bench.engine.spec import RunSpec
from bench.provenance import NOT_RECORDED
from bench.errors import BenchError
from bench.metrics import normalize_counts
from bench.run_files import RESULT

SCHEMA_VERSION = 3
READABLE_VERSIONS = (2, SCHEMA_VERSION)  # 2: no kind, a pretrained model written as a trained run
TRAINED = "trained"
PRETRAINED = "pretrained"


class NewerSchema(ValueError):
    """A result written by a later version of the toolkit."""


# The status of every result: a result is written when a run has finished (where a run of a study stands, the
# statuses before and besides this one, is the study's: bench.study.matrix.run_status.RunStatus).
DONE = "done"


@dataclass
class ModelSummary:
    name: str
    params_total: int
    params_non_embedding: int
    train_flops_per_token: Optional[float]  # None for a model trained elsewhere


@dataclass
class TokenizerSummary:
    scheme: str
    hash: str
    vocab_size: int
    chars_per_token_train: Optional[float]  # None for a model trained elsewhere
    lossless: dict[str, bool]  # per evaluated split: decoding gives the text back


@dataclass
class SplitProvenance:
    corpus: str
    split: str
    file: str
    size: int
    sha256: str
    status: str  # official | unverified | user
    verified: bool


@dataclass
class DataSummary:
    corpus: str
    verified: bool
    splits: dict[str, SplitProvenance]


@dataclass
class TrainingSummary:
    steps: int
    epochs: float
    tokens: int
    chars: float
    seconds: float
    chars_per_second: float
    tokens_per_second: float
    best_step: Optional[int]
    best_valid_bits_per_char_during_training: Optional[float]
    flops: Optional[float] = None  # training FLOPs: the model's per token, forward and backward, times tokens
    startup_seconds: Optional[float] = None  # from the command's start to its first training step (this attempt)
    compile_seconds: Optional[float] = None  # with compile: torch.compile's compiling inside this attempt's steps
    threads: Optional[int] = None  # CPU threads (every attempt uses the first one's)
    # what ran: the setting, the policy's choice (bench.engine.hardware.precision), the dtypes observed at each module
    # family's inputs, weights and outputs in the first step, the loss scaler's final scale and skipped updates
    precision: Optional[dict[str, Any]] = None
    warnings: list[str] = field(default_factory=list)  # e.g. a parameter family whose gradients stayed zero
    started_from: Optional[dict[str, Any]] = None  # init_from's weights by content: their run id, weights_sha256


@dataclass
class EvaluationSummary:
    weights: str
    layout: dict[str, Any]  # streams, chunk, window, precision (bench.engine.score.evaluation.EvalLayout)
    scored: str
    other_conventions: Optional[dict[str, Any]] = None  # the same model scored as another harness scores it
    # sha256 of the scored weights' tensors (bench.engine.run.weights_digest), what bench export certifies; None:
    # a model trained elsewhere, or a result written before it was recorded
    weights_sha256: Optional[str] = None


COUNTS = ("n_bytes", "n_chars", "n_words", "n_lines")  # the text's, beside the total NLL and the tokens


@dataclass
class SplitMetrics:
    """One scored split: its total NLL and the text's counts, and every metric of bench.metrics.METRICS computed
    from them (attributes by key, not fields: a result written before a metric was declared has it all the same)."""

    total_nll_nats: float
    n_tokens: int
    n_bytes: int
    n_chars: int
    n_words: int
    n_lines: int
    eval_seconds: float
    eval_chars_per_second: float
    lossless: bool

    def __post_init__(self) -> None:
        given = {f.name for f in fields(self)}
        self.__dict__.update({k: v for k, v in self.numbers().items() if k not in given})

    @classmethod
    def score(cls, total_nll_nats: float, n_tokens: int, counts: dict[str, int], seconds: float,
              lossless: bool) -> "SplitMetrics":
        """The metrics of a split scored in ``seconds`` with this total NLL; ``counts`` are the text's."""
        return cls(total_nll_nats, n_tokens, **counts, eval_seconds=seconds,
                   eval_chars_per_second=counts["n_chars"] / max(seconds, 1e-9), lossless=lossless)

    def numbers(self) -> dict:
        """The total NLL, the counts and every metric (bench.metrics.normalize_counts)."""
        return normalize_counts(self.total_nll_nats, self.n_tokens, **{name: getattr(self, name) for name in COUNTS})

    def to_json(self) -> dict:
        """The numbers, then how the split was scored."""
        return {**self.numbers(), "eval_seconds": self.eval_seconds,
                "eval_chars_per_second": self.eval_chars_per_second, "lossless": self.lossless}

    def disagreement(self, written: dict) -> str | None:
        """What of the numbers ``written`` for this split its own total NLL and counts do not give (a file edited
        or damaged), or None. A metric the file lacks is not a disagreement: it is computed from the counts."""
        if not math.isfinite(self.total_nll_nats) or self.total_nll_nats < 0:
            return f"total_nll_nats is {self.total_nll_nats}, not a finite non-negative number"
        if min(self.n_tokens, self.n_bytes, self.n_chars) <= 0:  # a scored split has text
            return f"it counts {self.n_tokens} tokens, {self.n_bytes} bytes and {self.n_chars} characters"
        for name, want in self.numbers().items():
            if name not in written:
                continue
            have = _build(float, written[name])
            if not (math.isnan(want) and math.isnan(have) or math.isclose(have, want, rel_tol=1e-9)):
                return f"{name} is {have} where its total NLL and counts give {want}"
        return None


@dataclass
class Provenance:
    git: dict[str, Any]  # commit, dirty
    libraries: dict[str, str]
    device: dict[str, Any]  # type, name, torch, ...
    machine: dict[str, str]
    started_at: str
    finished_at: str
    wall_seconds: float


@dataclass
class PretrainedSource:
    """What a model trained elsewhere has in place of a training spec: its folder and weights, and the split it
    scored (the windows are the evaluation's layout)."""

    model_dir: str
    model_type: str
    weights_sha256: str
    dataset: str
    split: str
    data_dir: Optional[str]
    out_dir: Optional[str]


@dataclass
class RunResult:
    status: str  # DONE
    run_id: str
    spec: Optional[RunSpec]  # None for a pretrained model: its ``pretrained`` instead
    resolved: dict[str, dict]  # model, train; empty for a pretrained model
    model: ModelSummary
    tokenizer: TokenizerSummary
    data: DataSummary
    training: Optional[TrainingSummary]  # None for a model trained elsewhere (bench eval-hf)
    evaluation: EvaluationSummary
    metrics: dict[str, SplitMetrics]
    comparable: bool
    comparability_notes: list[str]
    provenance: Provenance
    kind: str = TRAINED  # or PRETRAINED
    pretrained: Optional[PretrainedSource] = None  # a pretrained model's, in place of spec and training
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict:
        data = {"schema_version": self.schema_version, "kind": self.kind}
        data.update({f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in data})
        return data

    @classmethod
    def from_json(cls, data: dict) -> "RunResult":
        version = data.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise NewerSchema(f"schema_version {version}, newer than this toolkit's {SCHEMA_VERSION}")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            readable = " or ".join(map(str, READABLE_VERSIONS))
            raise ValueError(f"schema_version {version!r}, not {readable}: written by another version of the toolkit, "
                             f"or edited")
        data = {**data, "schema_version": SCHEMA_VERSION}
        result = _build(cls, data if "kind" in data else _version_2_kind(data))
        if (result.kind, result.spec is None, result.pretrained is None) not in ((TRAINED, False, True),
                                                                                 (PRETRAINED, True, False)):
            raise ValueError(f"kind {result.kind!r} needs a spec (trained) or pretrained (pretrained), not both")
        return result

    def moved_to(self, run_dir: Path) -> "RunResult":
        """The result where it was found, not where it was written (a folder moved or copied since)."""
        if self.pretrained is not None:
            return dataclasses.replace(self, pretrained=dataclasses.replace(self.pretrained, out_dir=str(run_dir)))
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, out_dir=str(run_dir)))

    @classmethod
    def read(cls, path: str | Path) -> "RunResult":
        """A result.json; a file that cannot be read as one is a one-line error naming it."""
        try:
            data = json.loads(Path(path).read_text())
            result = cls.from_json(data)
            for split, metrics in result.metrics.items():  # the numbers every table and figure is drawn from
                if problem := metrics.disagreement(data["metrics"][split]):
                    raise ValueError(f"{split} {problem}: the file was edited or damaged")
            return result
        except NewerSchema as exc:  # nothing is wrong with the file: this toolkit is too old for it
            raise BenchError(f"{path} was written by a newer version of the toolkit ({exc}); read it with that "
                             f"version (update this checkout)") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{path} is not a readable result ({type(exc).__name__}: {exc}); delete it and "
                             f"run the run again") from None

    def flat(self) -> dict[str, Any]:
        """The result as one runs.csv row (after the matrix's own columns); a model trained elsewhere leaves the
        training columns empty."""
        layout, prov, bptt = self.evaluation.layout, self.provenance, self.resolved.get("train", {}).get("bptt")
        cpt = self.tokenizer.chars_per_token_train
        row: dict[str, Any] = {
            "verified": self.data.verified, "comparable": self.comparable,
            "comparability_notes": " | ".join(self.comparability_notes),
            "params_total": self.model.params_total, "params_non_embedding": self.model.params_non_embedding,
            "train_flops_per_token": self.model.train_flops_per_token, "tokenizer_hash": self.tokenizer.hash,
            "vocab_size": self.tokenizer.vocab_size, "chars_per_token": cpt, "bptt": bptt,
            "context_chars": bptt * cpt if bptt and cpt else None,
        }
        if self.training is not None:
            t = self.training
            row.update(steps=t.steps, train_tokens=t.tokens, train_chars=t.chars, train_flops=t.flops, epochs=t.epochs,
                       train_seconds=t.seconds, train_chars_per_second=t.chars_per_second, best_step=t.best_step,
                       train_precision=(t.precision or {}).get("ran"),
                       skipped_steps=(t.precision or {}).get("skipped_steps"), training_warnings=len(t.warnings))
        row.update(eval_streams=layout.get("streams"), eval_chunk=layout.get("chunk"), eval_window=layout.get("window"),
                   eval_precision=layout.get("precision", "float32"))
        for split, metrics in self.metrics.items():
            row.update({f"{split}_{k}": v for k, v in metrics.to_json().items() if k != "eval_seconds"})
        row.update(git_commit=prov.git["commit"], git_dirty=prov.git["dirty"], device=prov.device["type"],
                   device_name=prov.device.get("name", ""), torch=prov.device.get("torch", ""),
                   threads=prov.device.get("threads", NOT_RECORDED),
                   cpu_model=prov.machine.get("cpu_model", NOT_RECORDED),
                   cpu_extensions=prov.machine.get("cpu_extensions", NOT_RECORDED),
                   torch_cpu_capability=prov.machine.get("torch_cpu_capability", NOT_RECORDED),
                   started_at=prov.started_at, finished_at=prov.finished_at, wall_seconds=prov.wall_seconds)
        for split, info in self.data.splits.items():
            row[f"data_sha256_{split}"] = info.sha256
            row[f"data_status_{split}"] = info.status
        return row


def _version_2_kind(data: dict) -> dict:
    """A result of schema version 2 as version 3: a pretrained model's was written as a trained run's, with
    preset "pretrained", no training and its model folder and weights as the resolved model."""
    spec = data.get("spec")
    if not (isinstance(spec, dict) and spec.get("preset") == PRETRAINED and data.get("training") is None):
        return {**data, "kind": TRAINED}
    model = data["resolved"]["model"]
    source = {"model_dir": model["model_dir"], "model_type": model["model_type"],
              "weights_sha256": model["weights_sha256"], "dataset": spec["dataset"],
              "split": spec["overrides"]["split"], "data_dir": spec.get("data_dir"), "out_dir": spec.get("out_dir")}
    return {**data, "kind": PRETRAINED, "spec": None, "resolved": {}, "pretrained": source}


def _plain(value: Any) -> Any:
    """A dataclass tree as JSON data."""
    if isinstance(value, SplitMetrics):  # its metrics are attributes, not fields
        return value.to_json()
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


NON_FINITE = ("inf", "-inf", "nan")


def _build(kind: Any, value: Any) -> Any:
    """JSON data as the dataclass tree ``kind`` describes (fields missing from ``value`` keep defaults)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # Optional[X]: X, or None
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    if value is None:
        return None
    if is_dataclass(kind) or typing.get_origin(kind) is dict:
        if not isinstance(value, dict):  # an edited file: fail here, in one line, not later in an attribute lookup
            raise TypeError(f"expected an object for {getattr(kind, '__name__', kind)}, got {value!r:.40}")
        if typing.get_origin(kind) is dict:
            inner = typing.get_args(kind)[1]
            return {k: _build(inner, v) for k, v in value.items()}
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: _build(hints[f.name], value[f.name]) for f in fields(kind) if f.name in value})
    if kind is float and value in NON_FINITE:  # JSON has no inf or nan: written as these strings
        return float(value)
    allowed = {float: (int, float), int: (int,), bool: (bool,), str: (str,)}.get(kind)
    if allowed and (not isinstance(value, allowed) or (kind is not bool and isinstance(value, bool))):
        raise TypeError(f"expected {kind.__name__}, got {value!r:.40}")
    return value


@dataclass
class CheckpointEvaluation:
    """What ``bench eval`` reports: one split scored by a checkpoint's weights."""

    checkpoint: str
    split: str
    corpus: str
    tokenizer: str
    model: str
    layout: dict[str, Any]
    metrics: SplitMetrics
    verified: bool  # the scored split and the training data are the official files
    comparable: bool
    comparability_notes: list[str]
    data: SplitProvenance
    trained_on: Optional[dict[str, Any]]  # the train split's provenance, from the checkpoint
    device: dict[str, Any]

    def to_json(self) -> dict:
        data = _plain(self)
        data.update(lossless=self.metrics.lossless, eval_seconds=self.metrics.eval_seconds)
        return data


def finished_result(run_dir: Path, run_id: str) -> RunResult | None:
    """The run's result if the folder holds the finished result of this very run."""
    path = run_dir / RESULT
    if not path.is_file():
        return None
    result = RunResult.read(path)
    if result.run_id != run_id or result.status != DONE:
        return None
    return result.moved_to(run_dir)
