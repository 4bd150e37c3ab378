"""``bench export RUN OUT --format hf``: a finished run as a transformers folder.

``OUT`` holds ``config.json`` (with ``auto_map`` to ``modeling_bench.py`` and the family's own code beside it),
``model.safetensors``, ``generation_config.json``, the tokenizer (``tokenizer.json`` where the ``tokenizers``
library expresses the scheme exactly, else ``tokenization_bench.py`` running the scheme's own code), the run's
tokenizer file ``bench_tokenizer.json``, its provenance ``bench_run.json`` (what ``bench eval`` of the folder
checks its data against), ``score_text.py`` (a split scored as the card's figures were, with transformers alone)
and ``README.md``, the model card. Only the weights the run's result scored are exported: the sha256 of their
tensors, recorded in ``result.json`` when they were scored, must be that of ``best.pt``'s; it is recorded in
``config.json`` too, where ``score_text.py`` checks the weights it loaded against it. The folder is written beside
``OUT`` under a short temporary name (bench.export.scratch) and renamed into place whole: an interrupted export
leaves nothing that the next one does not remove.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

from bench.arguments import path_argument, text_argument
from bench.engine import checkpoint
from bench.engine.result import DONE, TRAINED, RunResult
from bench.engine.run import weights_digest
from bench.engine.score.inference import Loaded, load_model
from bench.engine.exported import BENCH_TOKENIZER, EXPORT_FORMAT, PREFIX, PROVENANCE, WEIGHTS
from bench.errors import BenchError
from bench.export.model_card import model_card
from bench.export.scratch import in_scratch, scratch_folder, without_marker
from bench.export.vendor import FIRST_PARTY, check_copied_along, declares_metrics, flat_name, vendor
from bench.fileio import give_plain_modes, json_text, sha256_file
from bench.metrics import Metric, comparable_metrics
from bench.models import MODELS
from bench.ownership import owner_of, refuse_others_folder
from bench.provenance import git_commit
from bench.run_files import BEST, RESULT
from tokenizers_study import Tokenizer

FORMATS = ("hf",)
TEMPLATES = Path(__file__).parent / "templates"
MODELING, TOKENIZATION, SCORER = "modeling_bench.py", "tokenization_bench.py", "score_text.py"
FAMILY_FILE, PLUGINS_FILE = "bench_family.py", "bench_plugins.py"
REGISTRY, METRICS_MODULE = "tokenizers_study.registry", "bench.metrics"
RESERVED = (MODELING, TOKENIZATION, SCORER, FAMILY_FILE, PLUGINS_FILE)  # no carried module may take these names


def export_run(run: str | Path, out: str | Path, format: str = "hf") -> Path:
    """Write the finished run in ``run`` to the new folder ``out``; returns ``out``."""
    run, out = path_argument(run, "RUN"), path_argument(out, "OUT")
    if text_argument(format, "--format") not in FORMATS:
        raise BenchError(f"--format {format!r} is not a format of bench export; give one of {', '.join(FORMATS)}")
    result, loaded = finished_run(run)
    claim_export_folder(out)
    try:
        with scratch_folder(out.parent) as scratch:
            write_folder(scratch, run, result, loaded)
            without_marker(scratch)
            give_plain_modes(scratch)
            scratch.rename(out)  # refused if OUT appeared meanwhile: nothing is written over
    except OSError as exc:  # a full disk, say: named by the user's path, not the scratch folder's
        if exc.filename is None or in_scratch(Path(exc.filename), out.parent):
            raise OSError(exc.errno, exc.strerror, str(out)) from None
        raise
    return out


def finished_run(run: Path) -> tuple[RunResult, Loaded]:
    """The run's result and the weights it scored, each checked against the other."""
    owner = owner_of(run) if run.is_dir() else None
    if owner is None or owner.kind != "run":
        raise BenchError(f"{run} is not a run folder (one that bench train or run-matrix wrote); give a finished "
                         f"run's folder")
    if not (run / RESULT).is_file():
        raise BenchError(f"{run} has not finished (no {RESULT}): finish the run first (bench train or run-matrix "
                         f"with the same settings resumes it), then export it")
    result = RunResult.read(run / RESULT)
    if result.status != DONE or result.kind != TRAINED:
        raise BenchError(f"{run / RESULT} is not a finished training run's result (kind {result.kind}); export a "
                         f"run trained here (a model scored with eval-hf is already someone else's folder)")
    if result.evaluation.weights.startswith("best") and not (run / BEST).is_file():
        raise BenchError(f"{run} has no {BEST}, the weights its {RESULT} scored ({result.evaluation.weights}); "
                         f"nothing is exported: restore {BEST}, or train the run again")
    loaded = load_model(run, "cpu")
    weights = checkpoint.locate(run).name
    if loaded.payload.get("run_id") != result.run_id:
        raise BenchError(f"{run}: its weights {weights} are of run {loaded.payload.get('run_id')} "
                         f"but its {RESULT} of run {result.run_id}; nothing is exported: train the run again")
    scored, here = result.evaluation.weights_sha256, weights_digest(loaded.payload["model"])
    if scored is None:  # a re-score here could not tell small edits from another machine's rounding: refused
        raise BenchError(f"{run / RESULT} does not record the sha256 of the weights it scored (it was written before "
                         f"results did), so {weights} cannot be certified as those weights; nothing is exported: move "
                         f"{RESULT} aside and run the run again with the same settings (its training is done: it only "
                         f"scores {weights} again and records them)")
    if scored != here:
        raise BenchError(f"{run / weights} (tensors sha256 {here[:12]}...) is not the weights its {RESULT} scored "
                         f"(sha256 {scored[:12]}...): it was edited or replaced since; nothing is exported: restore "
                         f"the run's own {weights}, or score these weights anew (move {RESULT} aside and run the run "
                         f"again with the same settings)")
    return result, loaded


def claim_export_folder(out: Path) -> None:
    """A new folder, outside every run, matrix and report folder, the run's own included."""
    if out.is_symlink():
        raise BenchError(f"OUT {out} is a link; give a new folder's own path")
    if out.exists():
        raise BenchError(f"OUT {out} exists; bench export writes a new folder only: give a path that does not exist")
    if not out.parent.is_dir():
        raise BenchError(f"OUT {out}: folder {out.parent} does not exist; create it or choose another path")
    refuse_others_folder(out.parent, f"OUT {out} in")  # a run's (the exported one's too), a matrix's, a report's


def write_folder(folder: Path, run: Path, result: RunResult, loaded: Loaded) -> None:
    from safetensors.torch import save

    weights = {PREFIX + name: tensor.contiguous() for name, tensor in loaded.payload["model"].items()}
    # written by Python, not by safetensors' own writer: a failed write (a full disk) is an OSError, one line
    (folder / WEIGHTS).write_bytes(save(weights, metadata={"format": "pt"}))
    write_model_code(folder, loaded, result)
    tokenizer_files = write_tokenizer(folder, loaded.tokenizer, loaded.payload["tokenizer"])
    (folder / "generation_config.json").write_text(json_text(
        {"bos_token_id": loaded.tokenizer.bos_id, "do_sample": False, "use_cache": False}))
    provenance = {
        "format": EXPORT_FORMAT, "run_id": result.run_id, "resolved": loaded.payload["resolved"],
        "data": loaded.payload.get("data", {}), "result": result.to_json(),
        "weights": {"file": WEIGHTS, "from": checkpoint.locate(run).name, "sha256": sha256_file(folder / WEIGHTS),
                    "tensors_sha256": result.evaluation.weights_sha256},
        "exported": {"from": str(run.resolve()), "toolkit": git_commit(),
                     "at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
    }
    (folder / PROVENANCE).write_text(json_text(provenance))
    (folder / "README.md").write_text(model_card(result, provenance, tokenizer_files, carried_metrics()))


def write_model_code(folder: Path, loaded: Loaded, result: RunResult) -> None:
    family = MODELS[loaded.spec.model]
    module, config_module = family.__module__, family.config_class.__module__
    metric_modules = sorted({metric.formula.__module__ for metric in carried_metrics()} - {METRICS_MODULE})
    written = vendor([module, config_module, METRICS_MODULE, *metric_modules], folder, RESERVED)
    (folder / FAMILY_FILE).write_text("\n".join([
        f'"""This folder\'s model family: {loaded.spec.model}, and the metrics score_text.py computes (written by '
        f'bench export)."""', "",
        f"from .{flat_name(module)} import {family.__name__} as FAMILY  # noqa: F401",
        f"from .{flat_name(config_module)} import {family.config_class.__name__} as FAMILY_CONFIG  # noqa: F401",
        f"from .{flat_name(METRICS_MODULE)} import METRICS  # noqa: F401",
        *[f"from .{flat_name(plugin)} import __name__ as metric_plugin_{k}  # noqa: F401  (it registers a metric)"
          for k, plugin in enumerate(metric_modules)], ""]))
    shutil.copyfile(TEMPLATES / MODELING, folder / MODELING)
    shutil.copyfile(TEMPLATES / SCORER, folder / SCORER)
    check_copied_along(folder, MODELING, written + [FAMILY_FILE])
    config = {
        "architectures": ["BenchForCausalLM"], "model_type": "bench",
        "auto_map": {"AutoConfig": "modeling_bench.BenchConfig", "AutoModelForCausalLM": "modeling_bench.BenchForCausalLM"},
        "family": loaded.spec.model, "family_config": loaded.payload["resolved"]["model"],
        # score_text.py's defaults: the layout the card's figures were scored in, and the weights they scored
        "eval_chunk": result.evaluation.layout["chunk"], "eval_streams": result.evaluation.layout["streams"],
        "weights_sha256": result.evaluation.weights_sha256, "window": family.window_of(loaded.model.config),
        "vocab_size": loaded.tokenizer.vocab_size, "bos_token_id": loaded.tokenizer.bos_id,
        "tie_word_embeddings": False, "dtype": "float32",
    }
    if config["window"] is not None:  # where transformers' tools (and bench eval-hf) read a model's context
        config["max_position_embeddings"] = config["window"]
    (folder / "config.json").write_text(json_text(config))


def carried_metrics() -> list[Metric]:
    """The comparable metrics the folder carries (the card shows them, score_text.py prints them): the toolkit's,
    and a plug-in's where its formula's module is written against the toolkit (a metric declared in a notebook or
    with a formula from elsewhere stays out of the folder)."""
    return [metric for metric in comparable_metrics()
            if metric.formula.__module__ == METRICS_MODULE or declares_metrics(metric.formula.__module__)]


def plugin_modules(tokenizer: Tokenizer) -> list[str]:
    """The module of the run's scheme where it is a plug-in, for the folder to carry: [] for the toolkit's own."""
    module = type(tokenizer).__module__
    return [] if module.split(".")[0] in FIRST_PARTY else [module]


def write_plugins_file(folder: Path, tokenizer: Tokenizer) -> str:
    """bench_plugins.py: the folder's copy of the run's plug-in scheme registered, as its package's entry point or
    its own import registers it in the toolkit, before tokenization_bench.py reads the run's tokenizer file."""
    lines = [f'"""This folder\'s plug-in tokenization, registered before the tokenizer is read (written by bench '
             f'export)."""', ""]
    if modules := plugin_modules(tokenizer):
        scheme, family = type(tokenizer), tokenizer.spec.family
        lines += [f"from .{flat_name(REGISTRY)} import FAMILIES",
                  f"from .{flat_name(modules[0])} import {scheme.__name__}", "",
                  f"FAMILIES.adopt({family!r}, {scheme.__name__})", f"PLUGINS = ({family!r},)"]
    else:
        lines += ["PLUGINS = ()  # the run's scheme is the toolkit's own"]
    (folder / PLUGINS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return PLUGINS_FILE


def write_tokenizer(folder: Path, tokenizer: Tokenizer, bench_file: str) -> str:
    """The tokenizer in ``folder``: ``bench_file`` (the scheme's own file, as the run saved it), and for
    transformers either the library's ``tokenizer.json`` or the scheme's code with ``tokenization_bench.py``;
    returns which of the two transformers loads."""
    (folder / BENCH_TOKENIZER).write_text(bench_file, encoding="ascii")
    settings = {"bos_token": "<bos>", "split_special_tokens": True, "clean_up_tokenization_spaces": False,
                "model_max_length": 10**30, "add_bos_token": True}
    hf_json = tokenizer.hf_tokenizer_json()
    if hf_json is not None:
        from tokenizers import Tokenizer as HFTokenizer

        (folder / "tokenizer.json").write_text(hf_json, encoding="utf-8")
        # the start token by its own name where the file has one (a pretrained file's "<|endoftext|>")
        settings["bos_token"] = HFTokenizer.from_str(hf_json).id_to_token(tokenizer.bos_id) or "<bos>"
        settings["tokenizer_class"] = "PreTrainedTokenizerFast"
        loaded_from = "tokenizer.json"
    else:
        written = vendor([REGISTRY, *plugin_modules(tokenizer)], folder, RESERVED)
        written.append(write_plugins_file(folder, tokenizer))
        shutil.copyfile(TEMPLATES / TOKENIZATION, folder / TOKENIZATION)
        check_copied_along(folder, TOKENIZATION, written)
        settings |= {"tokenizer_class": "BenchTokenizer", "auto_map": {"AutoTokenizer": [
            f"{TOKENIZATION.removesuffix('.py')}.BenchTokenizer", None]}}
        loaded_from = TOKENIZATION
    (folder / "tokenizer_config.json").write_text(json_text(settings))
    return loaded_from
