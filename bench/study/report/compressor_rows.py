"""Classical compressors in a report: reference rows for the main table, lines for the attack figure, and the
flag of a run that does not beat the best compressor primed with train on the same bytes.

The figures come from :func:`bench.data.compressors.compressor_baselines` on the test split of each dataset of
the study, read from the runs' data folder; they are used only when that folder's train and test files are the
ones the runs were trained and scored on (same sha256).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from bench.data.compressors import MIN_SPLIT_BYTES, BaselineTable, compressor_baselines
from bench.errors import BenchError
from bench.metrics import METRICS


@dataclass
class StudyBaselines:
    tables: dict[str, BaselineTable] = field(default_factory=dict)  # dataset -> the test split's baselines
    missing: dict[str, str] = field(default_factory=dict)  # dataset -> why there are none

    def best_primed_bits_per_byte(self, dataset: str) -> float | None:
        table = self.tables.get(dataset)
        best = table.best_primed("test") if table else None
        return best.bits_per_byte_primed if best else None


def study_baselines(done: pd.DataFrame, data_dirs: dict[str, str | None]) -> StudyBaselines:
    """The compressor baselines of each dataset of the study (``data_dirs``: dataset -> its runs' data folder)."""
    found = StudyBaselines()
    for dataset, group in done.groupby("dataset"):
        try:
            table = compressor_baselines(dataset, ("test",), data_dirs.get(dataset), progress=True)
        except (BenchError, OSError) as exc:
            found.missing[dataset] = str(exc)
            continue
        scored = {s: set(group[f"data_sha256_{s}"].astype(str)) for s in ("train", "test")}
        if any(scored[s] != {table.splits[s]["sha256"]} for s in scored):
            found.missing[dataset] = "the data folder's train or test file is not the one these runs used"
            continue
        if table.best_primed("test") is None:
            found.missing[dataset] = (f"no compressor primed with train gives the test split a figure (it is "
                                      f"{table.splits['test']['size']:,} bytes; a figure needs at least "
                                      f"{MIN_SPLIT_BYTES:,})")
            continue
        found.tables[dataset] = table
    return found


def flag_worse_than_compressors(done: pd.DataFrame, baselines: StudyBaselines) -> pd.Series:
    """The flags column with ✗ added to runs whose test bits per byte are not below the best primed compressor."""
    def flags(row) -> str:
        best = baselines.best_primed_bits_per_byte(row["dataset"])
        worse = best is not None and not row["test_bits_per_byte"] < best
        return row["flags"] + ("✗" if worse else "")

    return done.apply(flags, axis=1) if not done.empty else done["flags"]


def reference_rows(baselines: StudyBaselines, done: pd.DataFrame) -> list[dict]:
    """One main-table row per dataset and compressor: bits per byte of the test split primed with train (and
    alone), bits per character from the same compressed size."""
    rows = []
    for dataset, table in baselines.tables.items():
        chars_per_byte = _chars_per_byte(done, dataset)
        for b in table.baselines:
            primed = b.bits_per_byte_primed
            rows.append({"dataset": dataset, "model": f"*{b.method}*", "tokenizer": "compressor, primed with train",
                         "seeds": "-", METRICS["bits_per_byte"].label: "-" if primed is None else f"{primed:.4f}",
                         METRICS["bits_per_char"].label: "-" if primed is None else f"{primed / chars_per_byte:.4f}",
                         "flags": f"alone: {b.bits_per_byte_cold:.4f} bits/byte"})
    return rows


def figure_lines(baselines: StudyBaselines, done: pd.DataFrame, metric) -> dict[str, list[tuple[str, float]]]:
    """Per dataset, (label, value in the figures' metric) of gzip -9 alone and of the best compressor primed with
    train."""
    lines = {}
    for dataset, table in baselines.tables.items():
        chars_per_byte = _chars_per_byte(done, dataset) if metric.name == "char" else 1.0
        gzip = next(b for b in table.baselines if b.method == "gzip -9")
        best = table.best_primed("test")
        lines[dataset] = [(f"gzip -9, test alone ({gzip.bits_per_byte_cold:.3f} bits/byte)",
                           gzip.bits_per_byte_cold / chars_per_byte),
                          (f"{best.method} primed with train ({best.bits_per_byte_primed:.3f} bits/byte)",
                           best.bits_per_byte_primed / chars_per_byte)]
    return lines


def summary(baselines: StudyBaselines, done: pd.DataFrame) -> str:
    """In words: how many lossless runs a classical compressor beats, and where there are no baselines, why. A
    lossy run scores another, easier text: it is counted neither way."""
    parts = []
    for dataset, table in baselines.tables.items():
        best = table.best_primed("test")
        runs = done[done["dataset"] == dataset]
        lossless = runs[runs["lossless_bool"].astype(bool)] if "lossless_bool" in runs else runs
        worse = int((lossless["test_bits_per_byte"] >= best.bits_per_byte_primed).sum())
        lossy = len(runs) - len(lossless)
        parts.append(f"On {dataset}, the best classical compressor primed with the train split, {best.method}, "
                     f"codes the test text in {best.bits_per_byte_primed:.3f} bits per byte; "
                     + (f"**{worse} of {len(lossless)} lossless runs do not beat it (✗)**: they have learned less "
                        "of the text than a compressor, and their differences say more about how far training got "
                        "than about tokenization" if worse else f"every one of the {len(lossless)} lossless runs "
                                                                "beats it")
                     + (f" ({lossy} run{'s' if lossy > 1 else ''} with a lossy tokenization, scored on another "
                        "text, left out)." if lossy else "."))
    parts += [f"No compressor baselines for {dataset}: {why}." for dataset, why in baselines.missing.items()]
    return " ".join(parts)


def _chars_per_byte(done: pd.DataFrame, dataset: str) -> float:
    row = done[done["dataset"] == dataset].iloc[0]
    return float(row["test_n_chars"]) / float(row["test_n_bytes"])
