"""``bench train``, ``eval``, ``sample`` and ``eval-hf``: one run, one checkpoint, one model."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import (MODEL_HELP, PRESET_HELP, SET_HELP, TOKENIZER_HELP, data_dir_option, echo_err,
                                   parse_pairs, print_comparability, print_metrics, plugin_option)
from bench.data.corpora import check_split
from bench.errors import BenchError
from bench.fileio import json_text, require_folder
from tokenizers_study import lattice_forms


MOST_SAMPLED = 100_000  # tokens one `bench sample` generates: hours of forward passes on a CPU beyond
MOST_DRAWS = 4096  # segmentations sampled per line by --marginal: beyond, the cost buys almost no precision


def train_command(
    model: str = typer.Option("sha-rnn", "--model", help=MODEL_HELP),
    preset: str = typer.Option("tiny", "--preset", help=PRESET_HELP),
    tokenizer: str = typer.Option("byte", "--tokenizer", help=TOKENIZER_HELP),
    dataset: str = typer.Option("wikitext-2", "--dataset", help="Corpus (fetched with `bench data fetch`)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default: runs/<model>-<preset>-"
                                       "<tokenizer>-<dataset>-s<seed>-<run id>, so another setting is another "
                                       "folder). Running again resumes or reuses it."),
    data_dir: Optional[Path] = data_dir_option(),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of a summary."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Train a model on a tokenized corpus, evaluate it on valid and test, and write result.json."""
    from bench.engine.hardware.device import use_threads
    from bench.engine.hardware.distributed import Ranks
    from bench.engine.run import train
    from bench.run_files import RESULT
    from bench.engine.spec import RunSpec

    spec = RunSpec(model=model, preset=preset, tokenizer=tokenizer, dataset=dataset, seed=seed,
                   overrides=parse_pairs(settings, "--set"), data_dir=str(data_dir) if data_dir else None,
                   out_dir=str(out) if out else None)
    use_threads(None)  # the cores; a `threads` setting of the run, or its first attempt's count, wins
    result = train(spec, show_progress=not quiet)
    if not Ranks.from_env().is_main:  # under torchrun, one process reports
        return
    if as_json:
        print(json_text(result.to_json()))
        return
    training = result.training
    print(f"{result.model.name} ({result.model.params_total:,} parameters) on {result.data.corpus} / "
          f"{result.tokenizer.scheme}: {training.steps} steps, {training.chars:,.0f} training characters, "
          f"{training.chars_per_second:,.0f} char/s on {result.provenance.device['type']}"
          + (f"; first step {training.startup_seconds:.1f} s after the start" if training.startup_seconds else "")
          + (f"; compiling took {training.compile_seconds:.1f} s of the training time"
             if training.compile_seconds is not None else ""))
    print_metrics(result.data.corpus, {split: m.to_json() for split, m in result.metrics.items()})
    print_comparability(result.comparable, result.comparability_notes)
    print(f"result: {Path(result.spec.out_dir) / RESULT}")


def eval_command(
    checkpoint_path: Path = typer.Argument(..., metavar="CHECKPOINT", help="A .pt checkpoint or a run folder."),
    split: str = typer.Option("test", "--split", help="train, valid or test."),
    data_dir: Optional[Path] = data_dir_option(),
    streams: Optional[int] = typer.Option(None, "--streams", min=1, help="Parallel evaluation streams (default: the "
                                          "run's eval_streams)."),
    chunk: Optional[int] = typer.Option(None, "--chunk", min=1, help="Tokens per forward pass; the Transformer's stride."),
    dump_token_losses: Optional[Path] = typer.Option(None, "--dump-token-losses", help="Save each token's NLL "
                                                     "(nats) to this .npy file."),
    marginal: Optional[int] = typer.Option(None, "--marginal", min=1, help="K: also estimate the likelihood summed over "
                                           "all segmentations, with K sampled segmentations per line "
                                           f"({lattice_forms(installed=False)}; bytes have one segmentation only)."),
    marginal_lines: Optional[int] = typer.Option(None, "--marginal-lines", min=1, help="Lines drawn at random for "
                                                 "--marginal (default: every line)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: $OMP_NUM_THREADS, else "
                                          "the cores).", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Evaluate a checkpoint on a whole split: every normalized metric from the total NLL."""
    from bench.engine.hardware.device import check_threads, use_threads
    from bench.engine.score.inference import evaluate_checkpoint, own_run_folder

    check_threads(threads)
    check_split(split)
    own = own_run_folder(checkpoint_path) if marginal else None  # reading alone needs no owner: a damaged spec.json
    if marginal_lines is not None and marginal is None:
        raise BenchError("--marginal-lines chooses the lines of --marginal K; give --marginal too")
    if marginal == 1:  # one draw per line has no spread: its Monte Carlo error would read as exactly 0
        raise BenchError("--marginal needs at least 2 draws per line to estimate its error; give --marginal 2 or more")
    if marginal is not None and marginal > MOST_DRAWS:
        raise BenchError(f"--marginal {marginal:,} draws per line is beyond {MOST_DRAWS:,} (each draw is a forward "
                         f"pass over the line; the Monte Carlo error falls only as 1/sqrt(K)); lower it")
    if marginal:
        from bench.engine.score.inference import load_model
        from tokenizers_study.segmentations import piece_table

        piece_table(load_model(checkpoint_path, "cpu").tokenizer)  # a scheme without a lattice: refused first
        if own is not None:
            _claim_marginal_file(own / f"marginal.{split}.json", _marginal_settings(checkpoint_path, marginal,
                                                                                   marginal_lines))
    use_threads(threads)
    report = evaluate_checkpoint(checkpoint_path, split, data_dir, streams, chunk, dump=dump_token_losses,
                                 progress=True)
    marginal_report = _marginal(checkpoint_path, split, data_dir, marginal, marginal_lines, own) if marginal else None
    if as_json:
        print(json_text({**report.to_json(), **({"marginal": marginal_report.to_json()} if marginal_report
                                                 else {})}))
        return
    print(f"{report.model} / {report.tokenizer} on {report.corpus} {split}; layout {report.layout}; "
          f"data verified: {report.verified}")
    print_metrics(report.corpus, {split: report.metrics.to_json()})
    print_comparability(report.comparable, report.comparability_notes)
    if marginal_report is not None:
        m = marginal_report
        print(f"marginal over segmentations ({m.lines:,} lines, {m.draws_per_line} draws each): "
              f"{m.marginal_bits_per_byte:.5f} ± {m.marginal_se:.5f} bits/byte against "
              f"{m.canonical_bits_per_byte:.5f} for the canonical segmentation ({100 * m.relative_gap:.3f}% lower; "
              f"in expectation an underestimate of the gap)")


def _marginal_settings(checkpoint_path: Path, draws: int, lines: int | None) -> dict:
    """What makes one marginal estimate another: the checkpoint file, the draws per line and the lines asked."""
    name = "best.pt" if checkpoint_path.is_dir() else checkpoint_path.name
    return {"checkpoint": name, "draws_per_line": draws, "lines_requested": lines}


def _claim_marginal_file(path: Path, settings: dict) -> None:
    """marginal.<split>.json is replaced only by an estimate with the same settings (the report reads it)."""
    if not path.exists():
        return
    try:
        recorded = json.loads(path.read_text()).get("settings")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded != settings:
        raise BenchError(f"{path} holds another estimate ({recorded or 'settings not recorded'}); it is kept: move it "
                         f"away to make this one ({settings})")


def _marginal(checkpoint_path: Path, split: str, data_dir, draws: int, lines: int | None, run_folder: Path | None):
    """The marginal estimate, also saved in the run's folder as marginal.<split>.json for the report (never beside
    a loose checkpoint in a folder that is no run's)."""
    from bench.engine.score.inference import evaluate_marginal
    from bench.fileio import write_json_atomic

    report = evaluate_marginal(checkpoint_path, split, data_dir, draws, lines)
    if run_folder is None:
        echo_err(f"the estimate is not saved: {checkpoint_path.parent} is not a run's folder (the report reads "
                 f"marginal.{split}.json from run folders)")
        return report
    path = run_folder / f"marginal.{split}.json"
    write_json_atomic(path, {**report.to_json(), "settings": _marginal_settings(checkpoint_path, draws, lines)})
    echo_err(f"wrote {path}")
    return report


MIN_TEMPERATURE = 1e-4


def sample_command(
    checkpoint_path: Path = typer.Argument(..., metavar="CHECKPOINT", help="A .pt checkpoint or a run folder."),
    prompt: str = typer.Option("", "--prompt", help="Text to continue."),
    tokens: int = typer.Option(200, "--tokens", min=1, help="Tokens to generate."),
    temperature: float = typer.Option(1.0, "--temperature", help="Softmax temperature."),
    top_k: int = typer.Option(0, "--top-k", min=0, help="Sample among the k most likely tokens (0: all)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Generate text from a trained model."""
    from bench.engine.score.inference import printable, sample
    from bench.engine.spec import check_seed

    if tokens > MOST_SAMPLED:
        raise BenchError(f"--tokens {tokens:,} is beyond {MOST_SAMPLED:,} (one forward pass per token, all kept in "
                         f"memory); sample at most that many, or several times with other --seed values")
    if not (math.isfinite(temperature) and temperature > 0):
        raise BenchError(f"--temperature must be a positive number, not {temperature}")
    if temperature < MIN_TEMPERATURE:  # logits / temperature overflow to inf: nothing left to sample from
        raise BenchError(f"--temperature {temperature:g} is too small to sample with; use at least "
                         f"{MIN_TEMPERATURE:g}, or --top-k 1 for greedy decoding")
    check_seed(seed, "--seed")
    prompt_text, continuation = sample(checkpoint_path, prompt, tokens, temperature, top_k, seed)
    print(printable(prompt_text + continuation))


def eval_hf_command(
    model_dir: Path = typer.Argument(..., metavar="MODEL", help="A local folder with a HuggingFace causal LM and "
                                     "its tokenizer (save_pretrained); the hub is never reached."),
    dataset: str = typer.Option("wikitext-2", "--dataset", help="Corpus (fetched with `bench data fetch`)."),
    split: str = typer.Option("test", "--split", help="train, valid or test."),
    stride: Optional[int] = typer.Option(None, "--stride", help="Tokens between windows (default: half the "
                                         "window); every token is predicted once."),
    window: Optional[int] = typer.Option(None, "--window", help="Window length (default: the model's context)."),
    streams: int = typer.Option(8, "--streams", help="Pieces of the split scored side by side (a batch), each "
                                "from the start token."),
    precision: str = typer.Option("auto", "--precision", help="auto (bf16 autocast on a GPU, float32 on the "
                                  "CPU), float32 or bfloat16; the output projection is always float32."),
    conventions: str = typer.Option("bench", "--conventions", help="bench, or lm-eval: also score it as "
                                    "lm-evaluation-harness's wikitext task does (needs lm_eval)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for result.json (default: runs/hf-<model>-"
                                       "<dataset>-<split>-<run id>)."),
    data_dir: Optional[Path] = data_dir_option(),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run the Python code in MODEL (a "
                                           "folder of bench export, a model of custom code); only for folders you "
                                           "trust."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json."),
) -> None:
    """Score a pretrained HuggingFace causal LM on a whole split: the same metrics and result.json as a trained run."""
    from dataclasses import replace

    from bench.engine.score.hf_eval import HFEvalSettings, default_out_dir, evaluate_pretrained, identify

    if conventions not in ("bench", "lm-eval"):
        raise BenchError(f"--conventions must be bench or lm-eval, not {conventions!r}")
    if conventions == "lm-eval" and not dataset.startswith("wikitext"):
        raise BenchError(f"--conventions lm-eval scores lm-evaluation-harness's wikitext task, and {dataset!r} is not "
                         f"WikiText; use a wikitext corpus or leave the option out")
    check_split(split)
    settings = HFEvalSettings(model_dir=str(model_dir), dataset=dataset, split=split, stride=stride, window=window,
                              streams=streams, lm_eval_conventions=conventions == "lm-eval", precision=precision,
                              data_dir=str(data_dir) if data_dir else None, trust_remote_code=trust_remote_code)
    identity = identify(settings)
    folder = require_folder(out or default_out_dir(settings, identity.run_id), "--out")
    result = evaluate_pretrained(replace(settings, out_dir=str(folder)), identity)
    if as_json:
        print(json_text(result.to_json()))
        return
    print(f"{result.model.name} ({result.model.params_total:,} parameters) on {dataset} {split}; "
          f"windows {result.evaluation.layout}")
    print_metrics(dataset, {split: m.to_json() for split, m in result.metrics.items()})
    print_comparability(result.comparable, result.comparability_notes)
    if result.evaluation.other_conventions:
        other = result.evaluation.other_conventions
        print(f"as lm-evaluation-harness scores wikitext ({other['documents']} documents apart, detokenized): "
              f"word perplexity {other['word_perplexity']:,.2f}, byte perplexity {other['byte_perplexity']:.4f}, "
              f"bits per byte {other['bits_per_byte']:.4f}")
    print(f"result: {folder / 'result.json'}")


def export_command(
    run: Path = typer.Argument(..., metavar="RUN", help="A finished run's folder (its result.json and best.pt)."),
    out: Path = typer.Argument(..., metavar="OUT", help="A new folder, outside every run, matrix and report folder."),
    format: str = typer.Option("hf", "--format", help="hf: a transformers folder (safetensors weights, tokenizer, "
                               "model card; loaded with trust_remote_code)."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Share a finished run as the field does: a Hugging Face folder that transformers loads where bench is not
    installed, with its tokenizer, a model card and the run's provenance (bench eval and init_from read it back)."""
    from bench.export.hf_folder import export_run

    folder = export_run(run, out, format)
    print(f"exported {run} to {folder}: config.json, model.safetensors, the tokenizer, README.md (the model card)")
    print(f"score it with transformers alone: python {folder / 'score_text.py'} {folder} TEXT_FILE (in the card's "
          f"layout, after checking the weights; README.md gives the command of each of its figures)")
