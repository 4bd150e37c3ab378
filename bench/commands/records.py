"""``bench records``: the records of a matrix's finished runs, what a study commits of runs trained elsewhere
(bench.study.matrix.records); ``bench run-matrix CONFIG --records RECORDS`` adopts them."""

from __future__ import annotations

from pathlib import Path

from typing import List

import typer

from bench.commands.common import echo_err, plugin_option

app = typer.Typer(help="A matrix's finished runs as records (their small files and losses by document): exported "
                  "here, committed, adopted elsewhere by `bench run-matrix CONFIG --records RECORDS`.",
                  no_args_is_help=True, rich_markup_mode=None)

RESULTS_HELP = "A matrix's results folder (that of `bench run-matrix`)."


@app.command("export")
def records_export(
    results: Path = typer.Argument(..., metavar="RESULTS", help=RESULTS_HELP),
    records: Path = typer.Argument(..., metavar="RECORDS", help="The folder of records to write into: new, or "
                                   "one this command wrote (a record already there is kept when it is the same "
                                   "run's, and refused when it is not)."),
    plugin: List[str] = plugin_option(),
) -> None:
    """The records of every finished run of RESULTS into RECORDS: result.json, spec.json, cell.json, status.json,
    log.jsonl and the losses by document, never checkpoints, per-token losses or the tokenizer. A run folder that is
    not a whole record of its run is refused by name, and then nothing is written."""
    from bench.study.matrix.records import export_records

    written = export_records(results, records)
    for note in written.left_out:  # as the report says them: by name, never exported under the matrix's labels
        echo_err(f"note: {note}")
    print(f"{len(written.paths)} record(s) written to {records}")


@app.command("documents")
def records_documents(
    results: Path = typer.Argument(..., metavar="RESULTS", help=RESULTS_HELP),
    plugin: List[str] = plugin_option(),
) -> None:
    """The losses by document (documents.test.json) of every finished run of RESULTS with per-token losses of a
    lossless tokenization, written beside them: for a workflow that packs the run folders itself."""
    from bench.study.matrix.records import write_documents

    written = write_documents(results)
    for note in written.left_out:
        echo_err(f"note: {note}")
    for path in written.paths:
        print(path)
