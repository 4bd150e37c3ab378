"""Training curves where researchers already look: ``log_to=tensorboard`` mirrors a run's ``log.jsonl`` into
TensorBoard event files in the run folder, so that ``tensorboard --logdir results/NAME`` shows a whole matrix live.

The x axis is training characters, not steps: a step holds another number of characters under each tokenization,
and characters put every run of a matrix on the same axis. Each numeric field of a log line is one scalar (tags
``train/...`` and ``valid/...``), as the line has it. log.jsonl stays the record: when a resumed run drops log lines
after its checkpoint, the event files are written again from the lines kept, so they always show what the log says.
The run's own event files end in ``.bench`` (TensorBoard reads any name holding ``tfevents``): a resume removes
those, and whatever else is in the folder stays.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from bench.errors import BenchError

TENSORBOARD = "tensorboard"  # the run folder's event files
SUFFIX = ".bench"  # ends the names of the event files a run writes, and only theirs
OURS = "events.out.tfevents.*" + SUFFIX  # SummaryWriter's names: events.out.tfevents.<time>.<host>.<pid>.<n><suffix>
AXES = ("step", "epoch", "tokens", "train_chars", "train_flops", "seconds")  # where a line is, not what it measured


def tag(key: str) -> str:
    """``train_bits_per_byte`` -> ``train/bits_per_byte``, ``valid_loss`` -> ``valid/loss``, ``lr`` -> ``train/lr``."""
    group, _, name = key.partition("_")
    return f"{group}/{name}" if group in ("train", "valid") and name else f"train/{key}"


def check_log_to(log_to: str) -> None:
    """Refused at resolution (so --dry-run finds it): TensorBoard curves without the package to write them."""
    if log_to == "tensorboard":
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise BenchError("log_to=tensorboard needs the tensorboard package: pip install "
                             "'tokenization-bench[tensorboard]' (or pip install tensorboard)") from None


def check_curves_folder(log_to: str, run_folder: Path) -> None:
    """Refused before the run writes anything (its log included): event files written through a link would land
    outside the run folder, and a file or a folder that cannot be written would fail only after the log was cut."""
    if log_to != "tensorboard":
        return
    folder = run_folder / TENSORBOARD
    writes = "log_to=tensorboard writes the run's event files"
    if folder.is_symlink():
        raise BenchError(f"{folder} is a link: {writes} inside the run folder, not where a link leads; remove the "
                         f"link, or set log_to=none")
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"{folder} is not a folder: {writes} in it; move it away, or set log_to=none")
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise BenchError(f"{folder} is not writable: {writes} in it; make it writable (chmod u+wx), or set "
                         f"log_to=none")


class Curves:
    """Where a run's log lines are mirrored: nowhere (``log_to=none``)."""

    def restart(self, records: list[dict]) -> None:
        """Begin again from these lines (the log's after a resume dropped the rest)."""

    def write(self, record: dict) -> None:
        """One log line."""


class TensorBoardCurves(Curves):
    def __init__(self, run_folder: Path):
        self.folder = run_folder / TENSORBOARD
        self.writer = None

    def restart(self, records: list[dict]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if self.writer is not None:
            self.writer.close()
        for path in self.folder.glob(OURS):
            if path.is_file() and not path.is_symlink():  # a folder or a link of that name is not the run's
                path.unlink()
        self.writer = SummaryWriter(str(self.folder), flush_secs=30, filename_suffix=SUFFIX)
        for record in records:
            self.write(record)
        self.flush()

    def write(self, record: dict) -> None:
        chars = record.get("train_chars")
        if chars is None:  # a warning line: text, not a point of a curve
            return
        for key, value in record.items():
            if key not in AXES and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value):
                self.writer.add_scalar(tag(key), value, global_step=int(chars))
        if any(key.startswith("valid_") for key in record):
            self.flush()

    def flush(self) -> None:
        """Make what was written visible: at each validation, the run's last step included."""
        if self.writer is not None:
            self.writer.flush()


def curves_for(log_to: str, run_folder: Path) -> Curves:
    check_curves_folder(log_to, run_folder)
    return TensorBoardCurves(run_folder) if log_to == "tensorboard" else Curves()
