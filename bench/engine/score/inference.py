"""Using a trained model: load a checkpoint, evaluate it on a split, sample text from it."""

from __future__ import annotations

import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bench.arguments import count_argument, flag_argument, optional_path, path_argument, text_argument
from bench.data.cache import encoded_split
from bench.data.corpora import check_split
from bench.data.paths import resolve_data_dir
from bench.data.store import open_split
from bench.engine import checkpoint
from bench.engine.hardware.device import configure, describe, device_here, flatten_rnns, pick_device
from bench.engine.score.evaluation import Scorer, check_streams, run_layout
from bench.engine.fields import readable_type
from bench.engine.hardware.precision import Precision, plan_precision
from bench.models.recurrent import has_rnn
from bench.engine.result import CheckpointEvaluation, SplitProvenance
from bench.engine.spec import RunSpec, TrainConfig, current_names
from bench.errors import USER_ERRORS, BenchError
from bench.fileio import atomic_path
from bench.ownership import claim_output_file, owner_of
from bench.models import MODELS, build_model, config_class, make_config
from bench.models.common import LanguageModel
from bench.provenance import comparability
from bench.settings import field_types, literal_choices, unwrap_optional
from tokenizers_study import Tokenizer, tokenizer_from_bytes
from tokenizers_study.registry import read_scheme
from tokenizers_study.text import text_counts


@dataclass
class Loaded:
    model: LanguageModel
    tokenizer: Tokenizer
    spec: RunSpec
    train: TrainConfig
    device: torch.device
    precision: Precision
    payload: dict


def load_model(path: str | Path, device: str = "auto") -> Loaded:
    """A checkpoint's model on a device; only the spec, model and train parts of its resolved
    configuration are read, so checkpoints of every version load."""
    payload = checkpoint.load(path)
    spec, train, model, tokenizer = _recorded_run(payload, checkpoint.locate(path))
    checkpoint.load_weights(model, payload["model"], path)
    # auto: where the run trained when this machine has it, else the best here (a GPU run read on a laptop)
    dev = pick_device(device) if device != "auto" else device_here(train.device) or pick_device("auto")
    configure(dev)
    model.to(dev).eval()
    flatten_rnns(model)
    precision = plan_precision(train.precision, train.rnn_precision, dev, has_rnn(model))
    return Loaded(model, tokenizer, spec, train, dev, precision, payload)


def _recorded_run(payload: dict, path: Path) -> tuple[RunSpec, TrainConfig, LanguageModel, Tokenizer]:
    """What a checkpoint records of its run, each part parsed and checked: an edited or damaged field is refused in
    one line that names it, never a traceback of whichever reader meets it first."""
    resolved, part = payload["resolved"], "spec"
    if plug_in := _unregistered_family(resolved["spec"]):
        raise BenchError(f"{path} names {plug_in}, which is not registered here: if a plug-in declares it, install "
                         f"its package or name it with --plugin; if not, the checkpoint was edited: restore it")
    try:
        spec = RunSpec.from_json(_typed(RunSpec, resolved["spec"]))
        family = config_class(spec.model)
        part = "train config"
        train = TrainConfig(**_typed(TrainConfig, current_names(resolved["train"])))
        part = "model config"
        model = build_model(spec.model, make_config(spec.model, _typed(family, resolved["model"])))
        part = "tokenizer"
        tokenizer = tokenizer_from_bytes(payload["tokenizer"].encode("ascii"))
        if tokenizer.vocab_size != resolved["model"].get("vocab_size"):  # each row of the weights is one token's
            raise ValueError(f"{tokenizer.spec.name} has {tokenizer.vocab_size} tokens, the model "
                             f"{resolved['model'].get('vocab_size')}")
        for split, record in payload.get("data", {}).items():
            part = f"data of {split}"
            _typed(SplitProvenance, record)
    except (*USER_ERRORS, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise checkpoint.unreadable(path, part, f"{problem} is missing" if type(exc) is KeyError else problem) from None
    return spec, train, model, tokenizer


def _unregistered_family(spec: dict) -> str | None:
    """The model or tokenization a checkpoint's run names whose family this process has not registered (a plug-in
    not imported), in words; None where both are registered. Such a checkpoint is intact: not "damaged"."""
    model, scheme = spec.get("model"), spec.get("tokenizer")
    if isinstance(model, str) and model not in MODELS:
        return f"model {model!r}"
    if isinstance(scheme, str) and read_scheme(scheme)[1] is None:
        return f"tokenization {scheme!r}"
    return None


def _typed(cls: type, values: dict) -> dict:
    """``values``, each of the type its field of ``cls`` declares (names ``cls`` lacks are left to it): a settings
    dataclass checks ranges and choices, not types, and would take "yes" as a bool or "16" as a width."""
    for name, value in values.items():
        if name not in field_types(cls):
            continue
        kind, optional = unwrap_optional(field_types(cls)[name])
        kind = str if literal_choices(kind) else typing.get_origin(kind) or kind
        expected = (int, float) if kind is float else kind
        if not (value is None and optional) and (not isinstance(value, expected)
                                                  or (isinstance(value, bool) and kind is not bool)):
            raise TypeError(f"{name} is {value!r}, not {readable_type(field_types(cls)[name])}")
    return values


def evaluate_checkpoint(path: str | Path, split: str = "test", data_dir: str | Path | None = None,
                        streams: int | None = None, chunk: int | None = None, device: str = "auto",
                        dump: str | Path | None = None, progress: bool = False) -> CheckpointEvaluation:
    """Every metric of a split from its total NLL (``bench eval``); ``dump``: each token's NLL to this new .npy
    file, never over a file this did not write (the run's own weights, result and spec included)."""
    path = path_argument(path, "the checkpoint")
    check_split(split)
    data_dir, dump = optional_path(data_dir, "data_dir"), optional_path(dump, "dump")
    streams, chunk = count_argument(streams, "--streams"), count_argument(chunk, "--chunk")
    text_argument(device, "device")
    flag_argument(progress, "progress")
    if dump is not None:
        claim_dump_file(path, dump)
    loaded = load_model(path, device)
    data_dir = resolve_data_dir(data_dir or loaded.spec.data_dir)
    split_data = _recorded_split(loaded, split, data_dir)
    ids = encoded_split(loaded.tokenizer, split_data)
    text = split_data.read_text()
    if streams is not None:
        check_streams(streams, len(ids), split)
    layout = run_layout(loaded.model, streams or loaded.train.final_eval_streams or loaded.train.eval_streams,
                        loaded.train.bptt, chunk or loaded.train.eval_chunk, loaded.precision)
    scorer = Scorer(loaded.model, loaded.tokenizer.bos_id, layout, loaded.device, loaded.precision,
                    progress=sys.stderr if progress else None)
    lossless = loaded.tokenizer.loss_report(text, np.asarray(ids)).lossless
    metrics, result = scorer.split_metrics(ids, text_counts(text), lossless, split, keep_token_nll=dump is not None)
    if dump is not None:
        with atomic_path(dump) as scratch, open(scratch, "wb") as handle:  # the name as given, whatever it ends in
            np.save(handle, result.token_nll)
    # The weights and the tokenizer come from the train split: unverified training data makes the
    # result unverified even when the evaluated split is the official file.
    trained_on = loaded.payload.get("data", {}).get("train")
    verified = split_data.verified and bool(trained_on and trained_on.get("verified"))
    comparable, notes = comparability(loaded.tokenizer.spec.name, {split: lossless},
                                      {split: split_data.status, "train": trained_on and trained_on.get("status")})
    return CheckpointEvaluation(
        checkpoint=str(path), split=split, corpus=loaded.spec.dataset, tokenizer=loaded.tokenizer.spec.name,
        model=loaded.spec.model, layout=result.layout.to_json(), metrics=metrics, verified=verified,
        comparable=comparable,
        comparability_notes=notes, data=SplitProvenance(**split_data.provenance()), trained_on=trained_on,
        device=describe(loaded.device))


def claim_dump_file(path: Path, dump: Path) -> None:
    """The per-token losses' file: a new file, in the evaluated run's own folder or in nobody's."""
    claim_output_file(dump, "--dump-token-losses", own_folder=own_run_folder(path))


def own_run_folder(path: Path) -> Path | None:
    """The folder of the evaluated run, where eval may add its files (None: no run's): never a folder whose files
    record another run than the checkpoint's, whose report would read what eval adds as that run's."""
    run_folder = path if path.is_dir() else path.parent
    owner = owner_of(run_folder)
    if owner is None or owner.identity is None:  # a folder of loose checkpoints, its run not recorded
        return None if owner is None else run_folder
    theirs = checkpoint.load(path).get("run_id")
    if owner.identity != theirs:
        raise BenchError(f"{run_folder} records run {owner.identity} but its checkpoint {checkpoint.locate(path)} is "
                         f"of run {theirs}; nothing is written there: evaluate the run in its own folder, or write "
                         f"elsewhere")
    return run_folder


def _recorded_split(loaded: Loaded, split: str, data_dir: Path):
    """The split as the run recorded it: a file of the same corpus name with other contents (another data folder,
    a re-added user corpus) is refused, so that no number for another text is printed under this run's name."""
    split_data = open_split(loaded.spec.dataset, split, data_dir)
    recorded = (loaded.payload.get("data") or {}).get(split) or {}
    if recorded.get("sha256") and recorded["sha256"] != split_data.sha256:
        raise BenchError(f"{loaded.spec.dataset} {split} in {data_dir} (sha256 {split_data.sha256[:12]}...) is not the "
                         f"file this run recorded (sha256 {recorded['sha256'][:12]}...); give --data-dir of the "
                         f"run's own data")
    return split_data


@torch.no_grad()
def sample(path: str | Path, prompt: str, max_tokens: int = 200, temperature: float = 1.0, top_k: int = 0,
           seed: int = 0, device: str = "auto") -> tuple[str, str]:
    """Continue ``prompt``; returns (the prompt as the model saw it, continuation) as texts: decoded together, so
    that a space a word scheme leaves implicit between them is not lost, and a prompt word outside a closed
    vocabulary shows as the <unk> the model was given."""
    loaded = load_model(path, device)
    model, tok = loaded.model, loaded.tokenizer
    generator = torch.Generator(device="cpu").manual_seed(seed)
    segment = loaded.train.bptt  # no forward pass longer than training's (a long prompt goes in segments)
    prompt_ids = [int(i) for i in tok.encode(prompt)]
    pending, state, out = [tok.bos_id] + prompt_ids, None, []
    while len(out) < max_tokens:
        for start in range(0, len(pending), segment):
            with loaded.precision.active(loaded.device):
                hidden, state = model(torch.tensor([pending[start:start + segment]], device=loaded.device), state)
        with loaded.precision.active(loaded.device):
            logits = model.logits(hidden[:, -1]).float().cpu() / temperature
        logits[..., tok.bos_id] = float("-inf")  # <bos> starts documents, it is never a continuation (nor top-k's)
        if top_k:
            kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1, None]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        pending = [int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator))]
        out.append(pending[0])
    seen = tok.decode(np.array(prompt_ids, dtype=np.int64)) if prompt_ids else ""
    whole = tok.decode(np.array(prompt_ids + out, dtype=np.int64))
    return seen, whole[len(seen):] if whole.startswith(seen) else tok.decode(np.array(out, dtype=np.int64))


def printable(text: str) -> str:
    """Undecodable bytes (lone surrogates) shown as U+FFFD so the text can be printed."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def evaluate_marginal(path: str | Path, split: str, data_dir: str | Path | None, draws: int, lines: int | None,
                      seed: int = 0):
    """The marginal-likelihood estimate of a split (or of ``lines`` of its lines drawn at random) under a
    checkpoint: see bench.engine.score.marginal."""
    from bench.engine.score.marginal import proposal_log_weights, score_lines, summarize

    loaded = load_model(path, "auto")
    data_dir = resolve_data_dir(data_dir or loaded.spec.data_dir)
    text = _recorded_split(loaded, split, data_dir).read_text()
    train = encoded_split(loaded.tokenizer, open_split(loaded.spec.dataset, "train", data_dir))
    candidates = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.strip()]
    rng = np.random.default_rng(seed)
    chosen = set(candidates) if lines is None or lines >= len(candidates) else \
        set(rng.choice(candidates, size=lines, replace=False).tolist())
    estimates, n_bytes = score_lines(loaded.model, loaded.tokenizer, text, chosen, draws,
                                     proposal_log_weights(loaded.tokenizer, train), loaded.train.bptt,
                                     loaded.device, loaded.precision, rng)
    return summarize(split, estimates, n_bytes, draws)
