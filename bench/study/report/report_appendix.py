"""The end of a report: its provenance and the definitions of its metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench.data.corpora import SPLITS
from bench.engine.learning import CLEARLY_BELOW, PATIENCE, PROGRESS, STARTED_BELOW
from bench.metrics import shown_metrics
from bench.study.report.rendering import ReportPage


def provenance_section(doc: ReportPage, table: pd.DataFrame, done: pd.DataFrame, runs: dict, config_path: Path) -> None:
    """Where every number came from: code, devices, libraries, config, runs table and the data's checksums."""
    from bench.fileio import sha256_file
    from bench.provenance import git_commit

    recorded = table["config_sha256"].iloc[0]
    config_matches = config_path.is_file() and sha256_file(config_path) == recorded
    doc.heading("Provenance")
    commits = sorted({f"{r.git_commit}{' (uncommitted changes)' if str(r.git_dirty) == 'True' else ''}"
                      for r in done.itertuples()})
    devices = sorted({f"{r.device} {r.device_name} (torch {r.torch})" for r in done.itertuples()})
    libraries = sorted({json.dumps(run.result.provenance.libraries, sort_keys=True) for run in runs.values()})
    data = sorted({(r.dataset, s, getattr(r, f"data_sha256_{s}"), getattr(r, f"data_status_{s}"))
                   for r in done.itertuples() for s in SPLITS})
    here = git_commit()
    doc.items([
        f"code: {', '.join(commits)}; report built at {here['commit']}" + (" (uncommitted changes)" if here["dirty"]
                                                                           else ""),
        f"devices: {', '.join(devices)}",
        f"libraries: {'; '.join(libraries)}",
        f"config: `{config_path}` (sha256 {recorded})" + ("" if config_matches else
                                                          " **is missing or has changed since the runs were made: "
                                                          "it is not shown**"),
        f"runs table: `{config_path.parent / 'runs.csv'}`; every run folder holds result.json, spec.json, "
        "log.jsonl and its checkpoints",
    ])
    doc.table([{"dataset": d, "split": s, "sha256": h, "status": st} for d, s, h, st in data],
              ["dataset", "split", "sha256", "status"], "Data: official = matches the published checksum; "
                                                        "unverified = it does not; user = a user or derived corpus.")
    if config_matches:
        doc.code(config_path.read_text())


def definitions_section(doc: ReportPage) -> None:
    """How every number of the report is computed; each metric's line is its entry of bench.metrics.METRICS."""
    doc.heading("Metric definitions")
    doc.items([
        "L = total negative log-likelihood (nats) of every token of the test split, the first one predicted from "
        "`<bos>`; the split is cut into the recorded number of streams, each with its state carried chunk to "
        "chunk (the Transformer: a sliding window of the recorded stride).",
        *(f"{m.label} = {m.definition}" + ("" if m.comparable else ", so it is **not comparable across "
                                             "tokenizations**") + "." for m in shown_metrics()),
        "unigram floor = the same metrics for a unigram model of the tokens fitted on train (add-one smoothing); "
        f"'below floor' is how far a run's bits/char is below it (a run less than {CLEARLY_BELOW:.0%} below is "
        f"flagged; training stops as not-learning a run whose last {PATIENCE} validations, after warmup and a "
        f"quarter of its budget by default, all stay within {STARTED_BELOW:.0%} of it, none {PROGRESS:.1%} better "
        f"than the best before them).",
        "Uncertainty: seeds are the unit of replication (a t interval or test over seeds needs two or more); the "
        "text sample is resampled by document (WikiText articles, Wikipedia pages, else 50 equal blocks), with "
        "bits per byte of a resample = its bits / its bytes (scipy.stats.bootstrap); a comparison's interval "
        "and p-value are one Welch t over seeds whose standard error includes the documents' bootstrap "
        "standard error; p-values are also shown Holm-adjusted.",
        "Runs are matched on equal training characters and equal context in characters unless the matching rule "
        "says tokens or steps.",
    ])
