"""A run's log.jsonl (and its curves in TensorBoard, where asked): one JSON line per log point, validation and
warning, written by the main process; a resumed run keeps the lines up to its checkpoint's step, so that the log
of an interrupted run equals that of an uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

from bench.engine.curves import Curves, curves_for
from bench.engine.progress import read_log_lines
from bench.run_files import LOG


class RunLog:
    def __init__(self, out: Path, log_to: str, is_main: bool):
        self.path = out / LOG
        self.is_main = is_main
        self.curves = curves_for(log_to, out) if is_main else Curves()

    def write(self, record: dict) -> None:
        if not self.is_main:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        self.curves.write(record)

    def keep_until(self, step: int) -> None:
        """Drop the lines after ``step`` (they will be written again) and a torn last line."""
        if not self.is_main:
            return
        lines = read_log_lines(self.path) if self.path.exists() else []
        kept = [(line, entry) for line in lines if (entry := json.loads(line))["step"] <= step]  # each parsed once
        self.curves.restart([entry for _, entry in kept])  # first: a failure there leaves the log as it was
        if self.path.exists():
            self.path.write_text("".join(line + "\n" for line, _ in kept))
