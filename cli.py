"""The ``bench`` command line (also ``python cli.py``).

Each command imports what it needs when it runs, so ``bench --help`` stays fast.
Errors the user can fix are printed as one line (``error: ...``) with a
non-zero exit status; see :func:`main`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from bench.errors import BenchError

app = typer.Typer(
    help="Compare language models fairly across tokenizations: corpora, tokenization schemes, "
    "training, evaluation and normalized metrics (bits per byte/char, word perplexity).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Corpora: fetch from the official source or a mirror, verify, list.",
                       no_args_is_help=True)
tokenize_app = typer.Typer(help="Tokenization schemes: train them and measure how they cut a corpus.",
                           no_args_is_help=True)
models_app = typer.Typer(help="Model families and their presets: sizes, parameters, FLOPs.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(tokenize_app, name="tokenize")
app.add_typer(models_app, name="models")

DATA_DIR_HELP = "Data folder (default: $BENCH_DATA_DIR or ./data)."
DataDirOption = typer.Option(None, "--data-dir", help=DATA_DIR_HELP, show_default=False)


def _echo_err(message: str) -> None:
    print(message, file=sys.stderr)


def _parse_pairs(values: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise BenchError(f"{option} {value!r}: write it as KEY=VALUE, e.g. {option} train=path/to/file")
        pairs[key.strip()] = rest.strip()
    return pairs


def _split_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


# --------------------------------------------------------------------------- data


@data_app.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="Corpus name: enwik8, wikitext-2, wikitext-2-raw, wikitext-103, "
                               "wikitext-103-raw."),
    mirror: Optional[Path] = typer.Option(None, "--mirror", help="Folder holding the official archives or "
                                          "their extracted files (default: $BENCH_DATA_MIRROR). Without one, "
                                          "the official archive is downloaded.", show_default=False),
    data_dir: Optional[Path] = DataDirOption,
    splits: str = typer.Option("train,valid,test", "--splits", help="Comma-separated splits to fetch."),
    file: List[str] = typer.Option([], "--file", help="SPLIT=PATH: take this split from PATH (for enwik8: the "
                                   "whole enwik8 file, which is then cut). Repeatable."),
    allow_unverified: bool = typer.Option(False, "--allow-unverified", help="Accept files that do not match the "
                                          "official size and checksum; everything computed from them is "
                                          "labelled verified: false."),
) -> None:
    """Fetch a corpus into the data folder, checking every file against its official size and checksum."""
    from bench.datastore import fetch

    records = fetch(name, data_dir=data_dir, mirror=mirror, allow_unverified=allow_unverified,
                    files=_parse_pairs(file, "--file"), splits=_split_list(splits))
    for split, record in records.items():
        state = "verified" if record.verified else "NOT VERIFIED"
        print(f"{name} {split}: {record.file} {record.size:,} bytes, sha256 {record.sha256[:16]}..., {state} "
              f"({record.verified_by or record.problem}); from {record.source}")


@data_app.command("list")
def data_list(
    data_dir: Optional[Path] = DataDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
) -> None:
    """Show every corpus, which splits are present, their sizes and whether each is verified."""
    from dataclasses import asdict

    from bench.datastore import list_corpora
    from bench.tables import text_table

    rows = [asdict(r) for r in list_corpora(data_dir)]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(text_table(rows, ["corpus", "split", "present", "file", "size", "status", "verified"]))


@data_app.command("verify")
def data_verify(
    name: Optional[str] = typer.Argument(None, help="Corpus to check (default: every corpus present)."),
    data_dir: Optional[Path] = DataDirOption,
) -> None:
    """Re-hash every fetched file and compare it with what was verified at fetch time and the official checksums."""
    from dataclasses import asdict

    from bench.datastore import verify
    from bench.tables import text_table

    rows = verify(name, data_dir)
    if not rows:
        print("no corpora fetched yet; run: bench data fetch NAME --mirror DIR")
        return
    print(text_table([asdict(r) for r in rows], ["corpus", "split", "file", "status", "intact", "message"]))
    bad = [r for r in rows if not r.intact]
    if bad:
        raise BenchError(f"{len(bad)} file(s) failed verification (see the table above)")


@data_app.command("add")
def data_add(
    name: Optional[str] = typer.Argument(None, help="Name for your corpus (not a registry name)."),
    train: Optional[Path] = typer.Option(None, "--train", help="Train split text file."),
    valid: Optional[Path] = typer.Option(None, "--valid", help="Validation split text file."),
    test: Optional[Path] = typer.Option(None, "--test", help="Test split text file."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with [corpora.NAME] tables "
                                          "(train, valid, test paths, relative to the file)."),
    data_dir: Optional[Path] = DataDirOption,
) -> None:
    """Add your own corpus from text files; it is identified by the files' sha256 (there is no official copy)."""
    from bench.datastore import add_user_corpus
    from bench.userconfig import corpora_from_toml

    corpora: dict[str, dict] = {}
    if config is not None:
        corpora.update(corpora_from_toml(config))
    if name is not None:
        corpora[name] = {k: v for k, v in (("train", train), ("valid", valid), ("test", test)) if v is not None}
    if not corpora:
        raise BenchError("give a corpus NAME with --train/--valid/--test, or --config FILE.toml")
    for corpus, paths in corpora.items():
        records = add_user_corpus(corpus, paths, data_dir)
        for split, record in records.items():
            print(f"{corpus} {split}: {record.size:,} bytes, sha256 {record.sha256}")


# --------------------------------------------------------------------------- tokenize


@tokenize_app.command("stats")
def tokenize_stats(
    dataset: str = typer.Option(..., "--dataset", help="Corpus name (fetched into the data folder)."),
    schemes: str = typer.Option("byte,char,bpe:4096,sp-unigram:4096,word:33278,word-open:33278", "--schemes",
                                help="Comma-separated schemes: byte, char, bpe:N, sp-bpe:N, sp-unigram:N, "
                                "word:N, word-open:N."),
    splits: str = typer.Option("train,valid,test", "--splits", help="Comma-separated splits to measure."),
    data_dir: Optional[Path] = DataDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of records instead of a table."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write a Markdown report to this file."),
) -> None:
    """Train (or load) each scheme on the train split and report how it cuts every split."""
    from tokenizers_study import parse_scheme
    from tokenizers_study.corpus_stats import run_stats, stats_markdown, stats_table

    scheme_list = [parse_scheme(s).name for s in _split_list(schemes)]  # validate all names first
    if not scheme_list:
        raise BenchError("--schemes is empty; give e.g. --schemes byte,bpe:4096")
    result = run_stats(dataset, scheme_list, _split_list(splits), data_dir)
    if out is not None:
        from bench.fileio import write_text_atomic

        write_text_atomic(out, stats_markdown(result))
        _echo_err(f"wrote {out}")
    if as_json:
        print(json.dumps([r.to_json() for r in result.records], indent=2))
    else:
        print(stats_table(result))


# --------------------------------------------------------------------------- models, training, evaluation

MODEL_HELP = "Model: sha-rnn, lstm or transformer."
PRESET_HELP = "Preset: tiny (seconds on CPU), small (minutes on CPU) or paper (GPU)."
SET_HELP = ("KEY=VALUE: override any model or training field of the preset (e.g. --set attention=all, "
            "--set max_steps=500, --set lr=1e-3). Repeatable.")


def _metrics_table(metrics: dict) -> str:
    from bench.tables import text_table

    rows = [{"split": split, **values} for split, values in metrics.items()]
    columns = ["split", "bits_per_byte", "bits_per_char", "word_perplexity", "word_perplexity_eos",
               "token_perplexity", "n_tokens", "n_bytes", "lossless"]
    return text_table(rows, columns)


@app.command("train")
def train_command(
    model: str = typer.Option("sha-rnn", "--model", help=MODEL_HELP),
    preset: str = typer.Option("tiny", "--preset", help=PRESET_HELP),
    tokenizer: str = typer.Option("byte", "--tokenizer", help="Tokenization scheme, e.g. byte, bpe:4096, "
                                  "word-open:33278."),
    dataset: str = typer.Option("wikitext-2", "--dataset", help="Corpus (fetched with `bench data fetch`)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default: runs/<model>-<preset>-"
                                       "<tokenizer>-<dataset>-s<seed>). Running again resumes or reuses it."),
    data_dir: Optional[Path] = DataDirOption,
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of a summary."),
) -> None:
    """Train a model on a tokenized corpus, evaluate it on valid and test, and write result.json."""
    from bench.spec import RunSpec
    from bench.train import RESULT, train

    spec = RunSpec(model=model, preset=preset, tokenizer=tokenizer, dataset=dataset, seed=seed,
                   overrides=_parse_pairs(settings, "--set"), data_dir=str(data_dir) if data_dir else None,
                   out_dir=str(out) if out else None)
    result = train(spec, show_progress=not quiet)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    training = result["training"]
    print(f"{result['model']['name']} ({result['model']['params_total']:,} parameters) on "
          f"{result['data']['corpus']} / {result['tokenizer']['scheme']}: {training['steps']} steps, "
          f"{training['chars']:,.0f} training characters, {training['chars_per_second']:,.0f} char/s on "
          f"{result['provenance']['device']['type']}")
    print(_metrics_table(result["metrics"]))
    _print_comparability(result)
    print(f"result: {Path(result['spec']['out_dir']) / RESULT}")


def _print_comparability(result: dict) -> None:
    for note in result["comparability_notes"]:
        print(f"{'NOTE' if result['comparable'] else 'NOT COMPARABLE'}: {note}")


@app.command("eval")
def eval_command(
    checkpoint_path: Path = typer.Argument(..., metavar="CHECKPOINT", help="A .pt checkpoint or a run folder."),
    split: str = typer.Option("test", "--split", help="train, valid or test."),
    data_dir: Optional[Path] = DataDirOption,
    streams: Optional[int] = typer.Option(None, "--streams", help="Parallel evaluation streams (default: the "
                                          "run's eval_streams)."),
    chunk: Optional[int] = typer.Option(None, "--chunk", help="Tokens per forward pass; the Transformer's stride."),
    dump_token_losses: Optional[Path] = typer.Option(None, "--dump-token-losses", help="Save each token's NLL "
                                                     "(nats) to this .npy file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Evaluate a checkpoint on a whole split: every normalized metric from the total NLL."""
    from bench.inference import evaluate_checkpoint

    report = evaluate_checkpoint(checkpoint_path, split, data_dir, streams, chunk, dump=dump_token_losses)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['model']} / {report['tokenizer']} on {report['corpus']} {split}; layout {report['layout']}; "
          f"data verified: {report['verified']}")
    print(_metrics_table({split: {**report["metrics"], "lossless": report["lossless"]}}))
    _print_comparability(report)


@models_app.command("describe")
def models_describe(
    model: str = typer.Argument(..., help=MODEL_HELP),
    preset: str = typer.Option("paper", "--preset", help=PRESET_HELP),
    vocab_size: int = typer.Option(256, "--vocab-size", help="Vocabulary size (the tokenizer's)."),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Parameters (total and non-embedding) and estimated training FLOPs per token of a model."""
    from bench.describe import describe_model

    info = describe_model(model, preset, vocab_size, _parse_pairs(settings, "--set"))
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for key, value in info.items():
        print(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")


@app.command("sample")
def sample_command(
    checkpoint_path: Path = typer.Argument(..., metavar="CHECKPOINT", help="A .pt checkpoint or a run folder."),
    prompt: str = typer.Option("", "--prompt", help="Text to continue."),
    tokens: int = typer.Option(200, "--tokens", help="Tokens to generate."),
    temperature: float = typer.Option(1.0, "--temperature", help="Softmax temperature."),
    top_k: int = typer.Option(0, "--top-k", help="Sample among the k most likely tokens (0: all)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
) -> None:
    """Generate text from a trained model."""
    from bench.inference import printable, sample

    if tokens < 1 or temperature <= 0:
        raise BenchError("--tokens must be at least 1 and --temperature positive")
    prompt_text, continuation = sample(checkpoint_path, prompt, tokens, temperature, top_k, seed)
    print(printable(prompt_text + continuation))


@app.command("speed")
def speed_command(
    model: str = typer.Option("sha-rnn", "--model", help=MODEL_HELP),
    preset: str = typer.Option("tiny", "--preset", help=PRESET_HELP),
    vocab_size: int = typer.Option(256, "--vocab-size", help="Vocabulary size (256: bytes)."),
    steps: int = typer.Option(20, "--steps", help="Timed steps (after 3 untimed warm-up steps)."),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Measure training and evaluation throughput (tokens/s) of a model on this machine, on random tokens."""
    from bench.speed import measure_speed

    if steps < 1:
        raise BenchError("--steps must be at least 1")
    info = measure_speed(model, preset, vocab_size, _parse_pairs(settings, "--set"), steps)
    if as_json:
        print(json.dumps(info, indent=2))
        return
    device = info["device"]
    print(f"{model}/{preset}: {info['params_total']:,} parameters, batch {info['batch_size']} x {info['bptt']}, "
          f"{info['precision']}, on {device['type']} ({device.get('name', '')})")
    print(f"train: {info['train_tokens_per_second']:,.0f} tokens/s ({info['train_tflops']:.2f} TFLOP/s)  "
          f"eval: {info['eval_tokens_per_second']:,.0f} tokens/s")


# --------------------------------------------------------------------------- matrices and reports


@app.command("run-matrix")
def run_matrix_command(
    config: Path = typer.Argument(..., help="Matrix config (TOML), e.g. configs/quick.toml."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (one row per run) and stop."),
    jobs: int = typer.Option(1, "--jobs", help="Runs at a time (processes; one GPU each where there are several)."),
    results: Optional[Path] = typer.Option(None, "--results", help="Results folder (default: results/<matrix "
                                           "name>)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed or diverged runs again."),
    data_dir: Optional[Path] = DataDirOption,
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Run every model x tokenizer x dataset x seed of a config; finished runs are skipped, interrupted ones
    resume, failures are recorded. Writes runs.csv beside the per-run folders."""
    from bench.matrix import run_matrix
    from bench.tables import text_table

    outcome = run_matrix(config, results, jobs, dry_run, retry_failed, data_dir, show_progress=not quiet)
    rows = [run.row() for chain in outcome.chains for run in chain]
    if dry_run:
        axes = [k for k in rows[0] if k not in ("phase", "run", "status", "params_total", "bptt", "train_tokens",
                                               "train_chars", "train_flops", "problem")] if rows else []
        columns = axes + ["phase", "status", "params_total", "bptt", "train_tokens", "train_chars", "train_flops",
                          "run", "problem"]
        print(text_table(rows, columns))
        total = sum(r["train_flops"] or 0 for r in rows)
        print(f"{len(rows)} runs; estimated training compute {total:.3e} FLOPs; results in {outcome.results_dir}")
        return
    print(f"{outcome.config.name}: " + ", ".join(f"{n} {s}" for s, n in sorted(outcome.counts.items())))
    print(f"runs table: {outcome.csv_path}")
    failed = sum(n for s, n in outcome.counts.items() if s not in ("done",))
    if failed:
        raise BenchError(f"{failed} run(s) did not finish (see status and error in {outcome.csv_path})")


@app.command("report")
def report_command(
    results: Path = typer.Argument(..., metavar="RESULTS_DIR", help="A matrix's results folder (with runs.csv)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: reports/<matrix name>)."),
) -> None:
    """Write report.md, a self-contained report.html and every figure (PNG and SVG) from a matrix's results."""
    from bench.report import build_report

    path = build_report(results, out)
    print(f"report: {path} (and {path.with_suffix('.html')})")


# --------------------------------------------------------------------------- entry point


def _click_exceptions():
    """Click's exception classes: recent Typer versions vendor their own copy of click."""
    try:
        from typer._click import exceptions
    except ImportError:  # Typer that uses the click package
        from click import exceptions
    return exceptions


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors become one line on stderr and a non-zero exit, never a traceback."""
    errors = _click_exceptions()
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="bench", standalone_mode=False)
    except errors.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help())
        return 0
    except errors.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "bench"
        _echo_err(f"error: {exc.format_message()} (see: {where} --help)")
        return 2
    except errors.ClickException as exc:
        _echo_err(f"error: {exc.format_message()}")
        return exc.exit_code or 1
    except BenchError as exc:
        _echo_err(f"error: {exc}")
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        _echo_err("interrupted")
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
