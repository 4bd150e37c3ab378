"""``bench eval-hf MODEL``: a HuggingFace causal language model scored like a trained run.

The model and its tokenizer come from a local folder (``AutoModelForCausalLM``, ``AutoTokenizer``; no hub).
The split is one text, tokenized without special tokens (a special-token string in the text stays text),
and scored by the study's own evaluation (bench.engine.score.evaluation, the model behind the study's interface:
bench.models.pretrained): cut into ``streams`` pieces read side by side, the first token of each predicted from
the model's beginning-of-text token, the rest in chunks of ``stride`` tokens inside a sliding window of
``window`` positions, so each token is predicted once, with at least ``window - stride`` tokens before it (fewer
at the start of a piece). The total NLL gives every metric, in a ``result.json`` of the same schema as a trained
run, of kind ``pretrained`` (its model folder and scored split in place of a training spec, and no training
part), so the report shows the model beside the study's.

With ``lm_eval_conventions``, the model is also scored as lm-evaluation-harness scores its ``wikitext``
task (documents apart, its detokenizer, disjoint windows, words counted on the original documents), with
the harness's own functions: its numbers then sit beside the project's in the result.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench.data.store import SplitData
from bench.engine.score.evaluation import EvalLayout, Scorer, check_streams
from bench.engine.hardware.precision import plan_precision
from bench.models.recurrent import follow_rnn_rule, has_rnn
from bench.engine.result import RunResult, SplitMetrics
from bench.errors import BenchError
from bench.fileio import sha256_bytes, sha256_file, write_json_atomic
from bench.models.pretrained import PretrainedLM
from bench.run_files import RESULT, run_folder_name

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "config.json")
CONTEXT_FIELDS = ("n_positions", "max_position_embeddings", "n_ctx")  # where a config.json states the context
VOCABULARY_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json",
                    "vocab.txt", "bench_tokenizer.json")  # the last: a bench export's scheme, run by its own code
TOKENIZER_FILES = VOCABULARY_FILES + ("merges.txt", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class HFEvalSettings:
    model_dir: str
    dataset: str
    split: str = "test"
    stride: int | None = None  # default: half the window
    window: int | None = None  # default: the model's context
    streams: int = 8  # pieces of the split scored side by side, each from the start token
    lm_eval_conventions: bool = False
    precision: str = "auto"  # auto: bf16 autocast on CUDA, float32 elsewhere
    data_dir: str | None = None
    out_dir: str | None = None
    # run the Python files of the model folder (transformers' trust_remote_code): a model exported by bench export;
    # they are then part of the model's identity
    trust_remote_code: bool = False


@dataclass(frozen=True)
class PretrainedIdentity:
    """What an evaluation's numbers depend on, hashed once: the weights, the tokenizer, the text, the settings."""

    weights_sha256: str
    tokenizer_sha256: str
    split: SplitData
    run_id: str


def identify(settings: HFEvalSettings) -> PretrainedIdentity:
    """Check the settings, hash the model's files and open the split (a default window or stride follows from
    the model's files)."""
    from bench.data.paths import resolve_data_dir
    from bench.data.store import open_split

    folder = check_model_folder(settings.model_dir, trust_remote_code=settings.trust_remote_code)
    for option, value, least in (("--window", settings.window, 2), ("--stride", settings.stride, 1),
                                 ("--streams", settings.streams, 1)):
        if value is not None and value < least:  # a window holds the token predicted from and one scored token
            raise BenchError(f"{option} must be at least {least}, not {value}")
    if settings.precision not in ("auto", "float32", "bfloat16"):
        raise BenchError(f"--precision must be auto, float32 or bfloat16, not {settings.precision!r}")
    split = open_split(settings.dataset, settings.split, resolve_data_dir(settings.data_dir))
    code = tuple(sorted(path.name for path in folder.glob("*.py"))) if settings.trust_remote_code else ()
    weights, tokens = file_digest(folder, WEIGHT_FILES + code), file_digest(folder, TOKENIZER_FILES)
    identity = (f"{weights}|{tokens}|{split.sha256}|{settings.split}|{settings.window}|{settings.stride}|"
                f"{settings.streams}|{settings.lm_eval_conventions}|{settings.precision}")
    return PretrainedIdentity(weights, tokens, split, sha256_bytes(identity.encode())[:16])


def load_pretrained(model_dir: str | Path, device: torch.device, trust_remote_code: bool = False):
    """The model (evaluation mode, on ``device``) and tokenizer of a local folder; never the hub. With
    ``trust_remote_code``, the folder's own Python code runs (a model exported by bench export)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # its warnings are not this command's output; errors come back as one line

    folder = check_model_folder(model_dir, trust_remote_code=trust_remote_code)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as exc:  # e.g. a GPT-2 folder with only a sentencepiece file: "tiktoken is required"
        raise BenchError(f"the tokenizer in {folder} could not be loaded ({_first_line(exc)}); save the model's own "
                         f"tokenizer into the folder with tokenizer.save_pretrained") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32,
                                                     trust_remote_code=trust_remote_code)
    except Exception as exc:  # transformers and safetensors raise many kinds for a damaged folder
        raise BenchError(f"{folder} could not be loaded as a causal language model ({_first_line(exc)})") from None
    project_in_float32(model)
    return model.to(device).eval(), tokenizer


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def project_in_float32(model) -> None:
    """Under bf16 autocast the body runs in bf16 but the output projection in float32, as in the study's own
    evaluation: a vocabulary-sized log-softmax from bf16 logits would lose precision."""
    head = model.get_output_embeddings()
    if head is None:  # a model of its own code that projects in float32 itself (bench export's)
        return
    forward = head.forward

    def float32_forward(hidden):
        with torch.autocast(hidden.device.type, enabled=False):
            return forward(hidden.float())

    head.forward = float32_forward


def check_model_folder(model_dir: str | Path, what: str = "MODEL", trust_remote_code: bool = False,
                       trust_option: str = "--trust-remote-code") -> Path:
    """A folder of a model and its tokenizer, with a readable config.json. A folder with its own Python code (bench
    export writes such folders) is refused unless ``trust_remote_code`` (asked for by ``trust_option``), and a
    recurrent model exported by bench always (see :func:`refuse_recurrent_export`); both read off config.json, before
    any model is loaded."""
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise BenchError(f"{what} {folder} is not a model folder (no config.json); give a local folder saved with "
                         f"save_pretrained (the hub is never reached)")
    if not any((folder / name).is_file() for name in VOCABULARY_FILES):
        raise BenchError(f"{what} {folder} holds no tokenizer ({', '.join(VOCABULARY_FILES[:3])}, ...); save the "
                         f"model's tokenizer into it with save_pretrained")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (ValueError, OSError) as exc:  # else blamed on the tokenizer, which loads the config first
        raise BenchError(f"{folder / 'config.json'} is not valid JSON ({exc}); save the model again with "
                         f"save_pretrained") from None
    if not isinstance(config, dict):
        return folder  # transformers says what is wrong with it when it loads
    if "auto_map" in config and not trust_remote_code:
        raise BenchError(f"{folder} holds its model's own Python code (auto_map in config.json); give {trust_option} "
                         f"to run it, if you trust the folder (bench export writes such folders)")
    refuse_recurrent_export(config, folder)
    return folder


def start_token(model, tokenizer) -> int:
    for value in (tokenizer.bos_token_id, getattr(model.config, "bos_token_id", None), tokenizer.eos_token_id):
        if value is not None:
            return int(value)
    raise BenchError("the model's tokenizer has no beginning- or end-of-text token to predict the first token from")


def context_length(model, tokenizer) -> int | None:
    for name in CONTEXT_FIELDS:
        if getattr(model.config, name, None):
            return int(getattr(model.config, name))
    if tokenizer.model_max_length and tokenizer.model_max_length < 10**9:
        return int(tokenizer.model_max_length)
    return None


def windows(window: int | None, stride: int | None, limit: int | None, prefix: str = "--") -> tuple[int, int]:
    """The window (default: the model's context ``limit``) and stride (default: half the window), checked;
    ``prefix`` names them as options (``--window``) or as config keys (``window``)."""
    window = window if window is not None else limit
    if window is None:
        raise BenchError("the model states no context length; give --window")
    if window < 2:  # a window holds the token predicted from and at least one scored token
        raise BenchError(f"{prefix}window must be at least 2, not {window}")
    if limit and window > limit:
        raise BenchError(f"{prefix}window {window} is longer than the model's context ({limit}); give at most that")
    stride = stride if stride is not None else max(1, window // 2)
    if stride >= window:
        raise BenchError(f"{prefix}stride must be less than the window ({window}), not {stride}")
    return window, stride


def file_digest(folder: Path, names: tuple[str, ...]) -> str:
    """sha256 over the named files present in a folder (each name with its file's sha256)."""
    present = [f"{name}:{sha256_file(folder / name)}" for name in names if (folder / name).is_file()]
    return sha256_bytes("|".join(present).encode())


def lm_eval_numbers(model, tokenizer, text: str, window: int, device: torch.device) -> dict:
    """The split scored as lm-evaluation-harness's wikitext task scores it, with the harness's own functions:
    each document (article) apart, detokenized, in disjoint windows after its prefix token, in float32."""
    try:
        from lm_eval.tasks.wikitext.preprocess_wikitext import process_results, wikitext_detokenizer
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
    except ImportError:
        raise BenchError("--conventions lm-eval needs lm-evaluation-harness: pip install lm_eval") from None
    from bench.data.documents import document_pages

    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    totals, documents = {"ll": 0.0, "words": 0, "bytes": 0}, []
    for page in document_pages(text):
        ids = tokenizer.encode(wikitext_detokenizer({"page": page}))
        log_likelihood = 0.0
        for context, continuation in map(make_disjoint_window, get_rolling_token_windows(ids, prefix, window, 1)):
            sequence = torch.tensor([context + continuation], device=device)  # window + 1 tokens: the last is
            logits = model(sequence[:, :-1]).logits.float()[0, len(context) - 1:]  # only predicted
            log_likelihood -= F.cross_entropy(logits, sequence[0, len(context):], reduction="sum").item()
        result = process_results({"page": page}, [log_likelihood])
        totals["ll"] += log_likelihood
        totals["words"] += result["word_perplexity"][1]
        totals["bytes"] += result["bits_per_byte"][1]
        documents.append(log_likelihood)
    return {"harness": "lm-evaluation-harness wikitext", "documents": len(documents),
            "document_log_likelihoods": documents, "word_perplexity": math.exp(-totals["ll"] / totals["words"]),
            "byte_perplexity": math.exp(-totals["ll"] / totals["bytes"]),
            "bits_per_byte": -totals["ll"] / totals["bytes"] / math.log(2)}


def evaluate_pretrained(settings: HFEvalSettings, identity: PretrainedIdentity | None = None,
                        in_matrix: bool = False) -> RunResult:
    """Score a split with a local HuggingFace model and write its result.json (see the module's docstring);
    ``identity``: the settings' :func:`identify`, when the caller has it already; ``in_matrix``: the folder is
    in the results folder of the matrix that plans it."""
    from bench.engine.hardware.device import pick_device
    from bench.engine.result import finished_result
    from bench.ownership import claim_run_folder
    from tokenizers_study.text import text_counts

    identity = identity or identify(settings)
    out = Path(settings.out_dir) if settings.out_dir else None
    if out is not None:
        claim_run_folder(out, identity.run_id, in_matrix)
        if (previous := finished_result(out, identity.run_id)) is not None:
            return previous
    device = pick_device("auto")
    model, tokenizer = load_pretrained(settings.model_dir, device, settings.trust_remote_code)
    window, stride = windows(settings.window, settings.stride, context_length(model, tokenizer))
    text = identity.split.read_text()
    ids = tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    start = start_token(model, tokenizer)
    check_ids(ids, start, model, settings.split)
    check_streams(settings.streams, len(ids), settings.split)
    precision = plan_precision(settings.precision, "auto", device, has_rnn(follow_rnn_rule(model)))
    lm = PretrainedLM(model, window)
    scorer = Scorer(lm, start, EvalLayout(settings.streams, stride, window, precision.name), device, precision)
    lossless = tokenizer.decode(ids, clean_up_tokenization_spaces=False) == text
    metrics, scored = scorer.split_metrics(np.asarray(ids), text_counts(text), lossless, settings.split)
    if not math.isfinite(metrics.total_nll_nats):  # a bad value never becomes a result
        raise BenchError(f"{settings.model_dir} gives non-finite losses on {settings.split} (NaN or infinite "
                         f"weights?); no result is written")
    other = lm_eval_numbers(model, tokenizer, text, window, device) if settings.lm_eval_conventions else None
    result = _result(settings, identity, lm, tokenizer, metrics, scored.layout.to_json(), other)
    if out is not None:
        created = not out.exists()
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(out / RESULT, result.to_json())
        except BaseException:
            if created:  # a failed write (a full disk) leaves no empty folder behind
                shutil.rmtree(out, ignore_errors=True)
            raise
    return result


def refuse_recurrent_export(config: dict, model_dir: Path) -> None:
    """A recurrent model exported by bench carries its past in a state argument, which eval-hf's windows (any
    causal LM's interface) never pass: scored that way it would see only each window, not the text before it."""
    if config.get("model_type") == "bench" and config.get("window", 0) is None:
        raise BenchError(f"{model_dir} is a recurrent {config.get('family')} exported by bench: eval-hf scores windows "
                         f"without its state; score it with `bench eval {model_dir}` (or the folder's score_text.py)")


def check_ids(ids: list[int], start: int, model, split: str) -> None:
    """The tokens must exist and fit the model's embedding table."""
    if not ids:
        raise BenchError(f"the {split} split encodes to no tokens under the model's tokenizer: nothing to score")
    rows = model.get_input_embeddings().num_embeddings
    if max(max(ids), start) >= rows:
        raise BenchError(f"the tokenizer gives ids up to {max(max(ids), start)} but the model has {rows} embeddings: "
                         f"the folder's tokenizer is not the model's")


def default_out_dir(settings: HFEvalSettings, run_id: str) -> Path:
    """runs/hf-<model>-<dataset>-<split>-<run id>: another setting is another folder."""
    parts = ["hf", Path(settings.model_dir).name, settings.dataset, settings.split]
    return Path("runs") / run_folder_name(parts, run_id)


def _result(settings: HFEvalSettings, identity: PretrainedIdentity, lm: PretrainedLM, tokenizer,
            metrics: SplitMetrics, layout: dict, other: dict | None) -> RunResult:
    import datetime as _dt

    from bench.engine.hardware.device import describe
    from bench.engine.result import (DONE, PRETRAINED, DataSummary, EvaluationSummary, ModelSummary,
                                     PretrainedSource, Provenance, SplitProvenance, TokenizerSummary)
    from bench.provenance import comparability, git_commit, library_versions, machine

    folder, split, model = Path(settings.model_dir), identity.split, lm.inner
    comparable, notes = comparability(f"hf:{folder.name}", {settings.split: metrics.lossless},
                                      {settings.split: split.status})
    notes.append("pretrained elsewhere, on data this toolkit does not know: the scored text may have been seen")
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return RunResult(
        status=DONE, run_id=identity.run_id, spec=None, resolved={}, kind=PRETRAINED,
        pretrained=PretrainedSource(str(folder), model.config.model_type, identity.weights_sha256, settings.dataset,
                                    settings.split, settings.data_dir, settings.out_dir),
        model=ModelSummary(f"hf:{folder.name}", lm.num_params(), lm.non_embedding_params(), None),
        tokenizer=TokenizerSummary(f"hf:{folder.name}", identity.tokenizer_sha256, len(tokenizer), None,
                                   {settings.split: metrics.lossless}),
        data=DataSummary(settings.dataset, split.verified, {settings.split: SplitProvenance(**split.provenance())}),
        training=None,
        evaluation=EvaluationSummary("pretrained (never trained here)", layout,
                                     "whole split, first token of each stream predicted from the model's "
                                     "beginning-of-text token", other),
        metrics={settings.split: metrics},
        comparable=comparable, comparability_notes=notes,
        provenance=Provenance(git_commit(), library_versions(), describe(next(model.parameters()).device), machine(),
                              now, now, metrics.eval_seconds),
    )
