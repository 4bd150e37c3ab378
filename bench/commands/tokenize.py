"""``bench tokenize``: train schemes and measure how they cut a corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import data_dir_option, each_once, echo_err, split_list, split_schemes, plugin_option
from bench.errors import BenchError
from tokenizers_study import scheme_forms

app = typer.Typer(help="Tokenization schemes: train them and measure how they cut a corpus.", no_args_is_help=True,
                  rich_markup_mode=None)


@app.command("stats")
def tokenize_stats(
    dataset: str = typer.Option(..., "--dataset", help="Corpus name (fetched into the data folder)."),
    schemes: str = typer.Option("byte,char,bpe:4096,sp-unigram:4096,word:33278,word-open:33278", "--schemes",
                                help=f"Comma-separated schemes: {scheme_forms(installed=False)}, or a plug-in's "
                                "(N: the vocabulary size; PATH: a pretrained tokenizer's file, or the folder of a "
                                "tokenizer.json)."),
    splits: str = typer.Option("train,valid,test", "--splits", help="Comma-separated splits to measure."),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of records instead of a table."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write a Markdown report to this file."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Train (or load) each scheme on the train split and report how it cuts every split."""
    from bench.data.tokenize_stats import STATS_TITLE, own_report, run_stats, stats_markdown, stats_table
    from tokenizers_study import parse_scheme

    scheme_list = [parse_scheme(s).name for s in split_schemes(schemes)]  # validate all names first
    if not scheme_list:
        raise BenchError("--schemes is empty; give e.g. --schemes byte,bpe:4096")
    if not split_list(splits):
        raise BenchError("--splits is empty; give e.g. --splits train,valid,test")
    each_once(scheme_list, "--schemes")
    each_once(split_list(splits), "--splits")
    if out is not None:  # before any work: a new file, or this command's own report from before, unchanged
        from bench.ownership import claim_output_file

        claim_output_file(out, "--out", written_by=STATS_TITLE if own_report(out) else None)
    result = run_stats(dataset, scheme_list, split_list(splits), data_dir)
    if out is not None:
        from bench.fileio import write_text_atomic

        write_text_atomic(out, stats_markdown(result))
        echo_err(f"wrote {out}")
    if as_json:
        print(json.dumps([r.to_json() for r in result.records], indent=2))
    else:
        print(stats_table(result))
