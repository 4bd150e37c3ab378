"""``bench data``: fetch, list, verify and add corpora."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import data_dir_option, parse_pairs, split_list
from bench.errors import BenchError

app = typer.Typer(help="Corpora: fetch from the official source or a mirror, verify, list.", no_args_is_help=True,
                  rich_markup_mode=None)


@app.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="Corpus name: enwik8, wikitext-2, wikitext-2-raw, wikitext-103, "
                               "wikitext-103-raw."),
    mirror: Optional[Path] = typer.Option(None, "--mirror", help="Folder holding the official archives or "
                                          "their extracted files (default: $BENCH_DATA_MIRROR). Without one, "
                                          "the official archive is downloaded.", show_default=False),
    data_dir: Optional[Path] = data_dir_option(),
    splits: str = typer.Option("train,valid,test", "--splits", help="Comma-separated splits to fetch."),
    file: List[str] = typer.Option([], "--file", help="SPLIT=PATH: take this split from PATH (for enwik8: the "
                                   "whole enwik8 file, which is then cut). Repeatable."),
    allow_unverified: bool = typer.Option(False, "--allow-unverified", help="Accept files that do not match the "
                                          "official size and checksum; everything computed from them is "
                                          "labelled verified: false."),
) -> None:
    """Fetch a corpus into the data folder, checking every file against its official size and checksum."""
    from bench.data.fetch import fetch

    records = fetch(name, data_dir=data_dir, mirror=mirror, allow_unverified=allow_unverified,
                    files=parse_pairs(file, "--file"), splits=split_list(splits))
    for split, record in records.items():
        state = "verified" if record.verified else "NOT VERIFIED"
        print(f"{name} {split}: {record.file} {record.size:,} bytes, sha256 {record.sha256[:16]}..., {state} "
              f"({record.verified_by or record.problem}); from {record.source}")


@app.command("list")
def data_list(
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
) -> None:
    """Show every corpus, which splits are present, their sizes and whether each is verified."""
    from dataclasses import asdict

    from bench.data.store import list_corpora
    from bench.text_tables import text_table

    rows = [asdict(r) for r in list_corpora(data_dir)]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(text_table(rows, ["corpus", "split", "present", "file", "size", "status", "verified"]))


@app.command("verify")
def data_verify(
    name: Optional[str] = typer.Argument(None, help="Corpus to check (default: every corpus present)."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Re-hash every fetched file and compare it with what was verified at fetch time and the official checksums."""
    from dataclasses import asdict

    from bench.data.store import verify
    from bench.text_tables import text_table

    rows = verify(name, data_dir)
    if not rows:
        print("no corpora fetched yet; run: bench data fetch NAME --mirror DIR")
        return
    print(text_table([asdict(r) for r in rows], ["corpus", "split", "file", "status", "intact", "message"]))
    bad = [r for r in rows if not r.intact]
    if bad:
        raise BenchError(f"{len(bad)} file(s) failed verification (see the table above)")


@app.command("add")
def data_add(
    name: Optional[str] = typer.Argument(None, help="Name for your corpus (not a registry name)."),
    train: Optional[Path] = typer.Option(None, "--train", help="Train split text file."),
    valid: Optional[Path] = typer.Option(None, "--valid", help="Validation split text file."),
    test: Optional[Path] = typer.Option(None, "--test", help="Test split text file."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with [corpora.NAME] tables "
                                          "(train, valid, test paths, relative to the file)."),
    replace: bool = typer.Option(False, "--replace", help="Put new files in the place of a corpus added before "
                                 "with other files (runs trained on the old files can then no longer be evaluated)."),
    allow_overlap: bool = typer.Option(False, "--allow-overlap", help="Accept a valid or test file found in train "
                                       "or sharing passages with it, changed or not (or valid and test sharing "
                                       "them), to study text a model has read; the overlap is recorded in the "
                                       "split's source."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Add your own corpus from text files; it is identified by the files' sha256 (there is no official copy)."""
    from bench.data.contamination import ACCEPTED
    from bench.data.user import add_user_corpora, corpora_from_toml

    corpora: dict[str, dict] = {}
    if name is None and any(v is not None for v in (train, valid, test)):
        raise BenchError("--train/--valid/--test belong to a corpus NAME: give NAME, or leave them out with --config")
    if config is not None:
        corpora.update(corpora_from_toml(config))
    if name is not None:
        corpora[name] = {k: v for k, v in (("train", train), ("valid", valid), ("test", test)) if v is not None}
    if not corpora:
        raise BenchError("give a corpus NAME with --train/--valid/--test, or --config FILE.toml")
    for corpus, records in add_user_corpora(corpora, data_dir, allow_overlap, replace).items():
        for split, record in records.items():
            overlap = f"; {record.source}" if ACCEPTED in record.source else ""
            print(f"{corpus} {split}: {record.size:,} bytes, sha256 {record.sha256}{overlap}")


@app.command("synthesize")
def data_synthesize(
    corpus: str = typer.Argument(..., help="The corpus to stand in for: enwik8 or wikitext-103."),
    size: Optional[int] = typer.Option(None, "--bytes", help="enwik8: bytes of the file (default 100,000,000; at "
                                       "least 10,000,001, as fetch cuts its last 10,000,000 into valid and test); "
                                       "wikitext-103: about the bytes of the train file (default 540,000,000)."),
    out: Path = typer.Option(..., "--out", help="Folder for the archive (enwik8.zip or wikitext-103-v1.zip): give "
                             "it to bench data fetch CORPUS --mirror DIR --allow-unverified."),
    source: List[Path] = typer.Option([], "--source", help="WikiText files to draw articles from. Repeatable. "
                                      "Default: the mirror's wikitext-2 files ($BENCH_DATA_MIRROR)."),
    seed: int = typer.Option(0, "--seed", help="The same seed gives the same bytes."),
) -> None:
    """Write a synthetic stand-in for a corpus this machine cannot fetch, in its format, for tests and scale
    benchmarks only: it fails the official checksum, so everything computed from it says verified: false."""
    from bench.data.corpora import ENWIK8_HOLDOUT
    from bench.data.paths import resolve_mirror
    from bench.data.synthetic import wikitext_source, write_enwik8_like
    from bench.data.synthetic_wikitext103 import write_wikitext103_like
    from bench.fileio import require_folder, sha256_file
    from bench.ownership import refuse_others_folder

    writers = {"enwik8": ("enwik8.zip", 100_000_000, write_enwik8_like, "enwik8-like text"),
               "wikitext-103": ("wikitext-103-v1.zip", 540_000_000, write_wikitext103_like,
                                "WikiText-103-like train text")}
    if corpus not in writers:
        raise BenchError(f"no synthetic stand-in for {corpus!r}; there is one for enwik8 and wikitext-103")
    archive, default_size, write, what = writers[corpus]
    size = default_size if size is None else size
    if not 1 <= size <= 10**10:
        raise BenchError(f"--bytes must be from 1 to 10,000,000,000, not {size:,}")
    if corpus == "enwik8" and size <= 2 * ENWIK8_HOLDOUT:  # fetch cuts it at fixed offsets: train would be empty
        raise BenchError(f"--bytes {size:,} is too small for enwik8's cut (test: the last {ENWIK8_HOLDOUT:,} bytes, "
                         f"valid: the {ENWIK8_HOLDOUT:,} before, train: the rest; 90/5/5 of the real 100,000,000): "
                         f"give --bytes of at least {2 * ENWIK8_HOLDOUT + 1:,}")
    if not source:
        mirror = resolve_mirror(None)
        source = sorted((mirror / "wikitext-2").glob("*.tokens")) if mirror else []
    folder = require_folder(out, "--out")
    refuse_others_folder(folder, "--out")
    if (folder / archive).exists():
        raise BenchError(f"{folder / archive} exists; choose another --out folder")
    path = write(wikitext_source(source), size, folder, seed)
    print(f"wrote {path}: {size:,} bytes of {what} (seed {seed}), archive sha256 {sha256_file(path)}")


def baselines_command(
    dataset: str = typer.Argument(..., help="A fetched corpus (bench data list)."),
    splits: str = typer.Option("valid,test", "--splits", help="Comma-separated splits to measure (each cold and "
                               "primed with train)."),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Bits per byte of classical compressors (gzip, bzip2, xz, zstd, PPMd) on a corpus's splits, alone
    and primed with its train split: the baselines a language model must beat. Cached by the files' sha256."""
    from bench.data.compressors import MIN_SPLIT_BYTES, compressor_baselines
    from bench.text_tables import text_table

    table = compressor_baselines(dataset, split_list(splits), data_dir, progress=not quiet)
    if as_json:
        print(json.dumps({**table.to_json(), "cache": table.cache}, indent=2))
        return
    rows = []
    for b in table.baselines:
        small = f"too small: {b.split_bytes:,} bytes"  # a number here would be mostly the container's header
        rows.append({"split": b.split, "method": b.method, "bits/byte cold": small if b.too_small else
                     b.bits_per_byte_cold, "bits/byte primed": small if b.too_small else b.bits_per_byte_primed,
                     "settings": b.settings})
    print(text_table(rows, ["split", "method", "bits/byte cold", "bits/byte primed", "settings"]))
    status = ", ".join(f"{s} {d['status']}" for s, d in table.splits.items())
    print(f"primed = size(train + split) - size(train), per byte of the split; data: {status}; figures "
          f"{table.cache}")
    if any(b.too_small for b in table.baselines):
        print(f"a split under {MIN_SPLIT_BYTES:,} bytes gets no figure: a compressor's fixed header bytes would "
              f"be much of it")
