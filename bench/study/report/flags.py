"""The report's flags: what a reader must know about a run before comparing it, one symbol each."""

from __future__ import annotations

import pandas as pd

from bench.data.corpora import SPLITS
from bench.study.matrix.pretrained import PRETRAINED
from bench.run_files import on_other_data
from tokenizers_study import lossless_on

FLAG_NOTES = {
    "†": "unverified data: a split of this run does not match the official file",
    "‡": "lossy tokenization (a closed vocabulary, or decoding does not give the text back): not comparable with "
         "lossless schemes",
    "§": "user or derived corpus: no official reference; compare only within this study",
    "◊": "pretrained elsewhere (bench eval-hf), on data and with compute this study does not control; the test "
         "text may have been in its training data: a reference point, not a comparison at equal training",
    "≠": "trained on other data than the data folder holds now (a data file changed after the run finished): its "
         "numbers are for the text it was trained and scored on; `bench run-matrix` trains it on today's",
    "✗": "worse than a classical compressor on the same bytes: it does not beat the best compressor primed with "
         "the train split (the compressor rows), so it has learned less of the text than that compressor",
}


def run_flags(row) -> str:
    """The flags a run's row of runs.csv carries by itself (the compressor flag needs the baselines)."""
    statuses = {str(row.get(f"data_status_{s}", "")) for s in SPLITS}
    flags = ""
    if "unverified" in statuses:
        flags += "†"
    if not lossless_on(str(row["tokenizer"]), gave_text_back(row)):
        flags += "‡"
    if "user" in statuses:
        flags += "§"
    if row["match"] == PRETRAINED:
        flags += "◊"
    if on_other_data(row):
        flags += "≠"
    return flags


def gave_text_back(row) -> bool:
    """Whether decoding gave the run's test text back, as its row of runs.csv records it (not recorded: no)."""
    return str(row.get("test_lossless", "")).lower() == "true"


def flag_legend(done: pd.DataFrame) -> str:
    """Each flag present, what it means and which runs carry it."""
    present = sorted(set("".join(done["flags"])))
    if not present:
        return "Every run is comparable: verified data, lossless tokenization."
    everyone = {f"{r.model}/{r.tokenizer}" for r in done.itertuples()}
    parts = []
    for flag in present:
        labels = sorted({f"{r.model}/{r.tokenizer}" for r in done.itertuples() if flag in r.flags})
        which = "all runs" if set(labels) == everyone else ", ".join(labels)
        parts.append(f"{flag} {FLAG_NOTES[flag]} ({which})")
    return "Flags: " + "; ".join(parts) + "."
