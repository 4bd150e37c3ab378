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
app.add_typer(data_app, name="data")
app.add_typer(tokenize_app, name="tokenize")

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
        return 1
    except (KeyboardInterrupt, typer.Abort):
        _echo_err("interrupted")
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
