"""The finished-run record: what the report, the comparisons and the records read of one finished run folder:
its row of the runs table, its result.json, its learning curve, its per-token or per-document losses and its
tokenizer, each read once."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from bench.data.documents import MIN_RESAMPLED, document_starts, document_totals
from bench.engine.result import RunResult
from bench.errors import BenchError
from bench.run_files import LOG, TOKENIZER, document_losses, on_other_data, token_losses
from bench.study.stats.uncertainty import TextLosses
from tokenizers_study.text import text_bytes


@dataclass
class FinishedRun:
    """What the analyses need from one finished run."""

    row: dict  # its row of the runs table (bench.study.matrix.runs_table)
    result: RunResult
    run_dir: Path
    _text_losses: dict = field(default_factory=dict, repr=False, compare=False)  # split -> what text_losses gave

    @cached_property
    def log(self) -> list[dict]:
        """The run's log.jsonl, read once: the main table, the summary and three figures use it."""
        from bench.engine.progress import read_log_lines

        path = self.run_dir / LOG
        if not path.is_file():
            raise BenchError(f"{path} is missing: the run's learning curve; restore it or train the run again")
        entries = []
        for number, line in enumerate(read_log_lines(path), 1):
            try:
                entries.append(json.loads(line))
            except ValueError:
                raise BenchError(f"{path} line {number} is not JSON: the run's learning curve is damaged; restore it "
                                 f"or train the run again") from None
        return entries

    @property
    def on_other_data(self) -> bool:
        """Trained on data files that have changed since (run-matrix marked it): its text is not there to read, so
        the analyses of text (floors, document intervals, pieces) leave it out; its result stands as recorded."""
        return on_other_data(self.row)

    def marginal(self, split: str = "test") -> dict | None:
        """The estimate of ``bench eval --marginal`` saved in the run folder, if any."""
        path = self.run_dir / f"marginal.{split}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def token_nll(self, split: str = "test") -> np.ndarray | None:
        path = self.run_dir / token_losses(split)
        if not path.is_file():
            return None
        try:
            return np.load(path).astype(np.float64)
        except (OSError, ValueError, EOFError) as exc:
            raise BenchError(f"{path} is not a readable array of per-token losses ({type(exc).__name__}); delete it "
                             f"(the report then has no document intervals for this run) or evaluate the run again "
                             f"with `bench eval {self.run_dir} --dump-token-losses {path}`") from None

    @cached_property
    def tokenizer(self):
        from tokenizers_study import load_tokenizer

        return load_tokenizer(self.run_dir / TOKENIZER)

    def split_data(self, split: str):
        from bench.data.store import open_split

        return open_split(self.result.spec.dataset, split, self.result.spec.data_dir)

    def ids(self, split: str) -> np.ndarray:
        from bench.data.cache import encoded_split

        return np.asarray(encoded_split(self.tokenizer, self.split_data(split)))

    def text_losses(self, split: str = "test") -> TextLosses | None:
        """Bits and bytes of each document of the split, from the per-token losses or the run's record of them
        (None without either, for a tokenization that does not give the text back, or for a text of too few
        documents to resample). Worked out once: the main table and every pair of the paired comparisons that a
        run is in ask for them."""
        if split not in self._text_losses:
            self._text_losses[split] = self._document_losses(split)
        return self._text_losses[split]

    def _document_losses(self, split: str) -> TextLosses | None:
        if self.on_other_data:
            return None
        nll = self.token_nll(split)
        if nll is None:  # a run trained elsewhere keeps its losses by document alone (bench.study.matrix.records)
            return self._recorded_document_losses(split)
        ids = self.ids(split)
        text = self.split_data(split).read_text()
        ends = np.cumsum(self.tokenizer.byte_lengths(ids))
        n_bytes = len(text_bytes(text))
        if len(ids) != len(nll) or not len(ends) or ends[-1] != n_bytes or not self.result.metrics[split].lossless:
            return None
        starts, _ = document_starts(text)
        if len(starts) < MIN_RESAMPLED:
            return None
        bits, sizes = document_totals(ends, nll / math.log(2), starts, n_bytes)
        return TextLosses(bits, sizes.astype(np.float64))


    def _recorded_document_losses(self, split: str) -> TextLosses | None:
        """The record's losses by document, checked against the text: its documents and bytes, its total bits."""
        losses = read_document_losses(self.run_dir, split)
        if losses is None:
            return None
        text = self.split_data(split).read_text()
        starts, _ = document_starts(text)
        total_bits = self.result.metrics[split].total_nll_nats / math.log(2)
        if (len(losses.bits) != len(starts) or losses.bytes.sum() != len(text_bytes(text))
                or not math.isclose(losses.bits.sum(), total_bits, rel_tol=1e-6)):
            raise BenchError(f"{self.run_dir}: its losses by document of {split} are not those of this text ("
                             f"{len(losses.bits)} documents, {losses.bytes.sum():,.0f} bytes, {losses.bits.sum():,.1f} "
                             f"bits; the text has {len(starts)} documents, {len(text_bytes(text)):,} bytes, the result "
                             f"{total_bits:,.1f} bits): restore the record, or delete it to report the run without "
                             f"document intervals")
        return losses


def read_document_losses(run_dir: Path, split: str) -> TextLosses | None:
    """The run's losses by document of ``split`` from its record, or None where it has none."""
    path = run_dir / document_losses(split)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        bits, sizes = np.asarray(record["bits"], dtype=np.float64), np.asarray(record["bytes"], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} is not a readable record of losses by document ({type(exc).__name__}); restore "
                         f"it, or delete it and evaluate the run again with --dump-token-losses") from None
    if bits.shape != sizes.shape or bits.ndim != 1 or not len(bits):
        raise BenchError(f"{path}: its bits and bytes are not one number per document each; restore it")
    return TextLosses(bits, sizes)


# --------------------------------------------------------------------------------------- unigram floor
