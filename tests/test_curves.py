"""``log_to=tensorboard`` (bench.engine.curves): a run's curves in TensorBoard event files, equal to its log.jsonl,
also after a resume that drops log lines; not part of the run id; refused in one line without the package."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench.engine.curves import AXES, TENSORBOARD, tag
from bench.engine.run import plan_run, train
from bench.engine.spec import RunSpec
from bench.engine.trainer import Trainer

SETTINGS = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 12, "eval_every": 6,
            "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "log_every": 2, "eval_max_tokens": 500,
            "stop_if_not_learning": False, "log_to": "tensorboard"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, **changes):
    return RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", seed=3,
                   overrides={**SETTINGS, **changes}, data_dir=str(data_dir), out_dir=str(out))


def event_points(run_folder) -> list[tuple[str, int, float]]:
    events = EventAccumulator(str(run_folder / TENSORBOARD))
    events.Reload()
    return sorted((name, point.step, point.value) for name in events.Tags()["scalars"]
                  for point in events.Scalars(name))


def log_points(run_folder) -> list[tuple[str, int, float]]:
    """What the event files must hold: every finite number of every log line, at its training characters, as the
    float32 that TensorBoard stores."""
    points = []
    for line in (run_folder / "log.jsonl").read_text().splitlines():
        record = json.loads(line)
        for key, value in record.items():
            if "train_chars" in record and key not in AXES and isinstance(value, (int, float)) \
                    and not isinstance(value, bool) and math.isfinite(value):
                points.append((tag(key), record["train_chars"], float(np.float32(value))))
    return sorted(points)


@pytest.mark.slow
def test_the_event_files_hold_the_logged_curves_on_a_character_axis(data_dir, tmp_path):
    train(spec(data_dir, tmp_path / "run"), show_progress=False)
    points = event_points(tmp_path / "run")
    assert points == log_points(tmp_path / "run")
    tags = {name for name, _, _ in points}
    assert {"train/loss", "train/bits_per_byte", "train/lr", "train/chars_per_second", "valid/bits_per_byte",
            "valid/bits_per_char"} <= tags
    assert len({step for name, step, _ in points if name == "train/loss"}) == 6  # steps 2, 4, ..., 12


@pytest.mark.slow
def test_after_a_resume_the_event_files_hold_what_the_log_kept(data_dir, tmp_path, monkeypatch):
    original = Trainer.train_step

    def crash_at_step_seven(self):
        if self.progress.step == 7:
            raise RuntimeError("killed")  # steps 5 and 6 were logged after the last checkpoint (step 4)
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", crash_at_step_seven)
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(data_dir, tmp_path / "run"), show_progress=False)
    monkeypatch.setattr(Trainer, "train_step", original)
    train(spec(data_dir, tmp_path / "run"), show_progress=False)
    points = event_points(tmp_path / "run")
    assert points == log_points(tmp_path / "run")
    assert len([p for p in points if p[0] == "valid/bits_per_char"]) == 2  # steps 6 and 12, once each


def test_curves_are_not_part_of_the_run_id(data_dir, tmp_path):
    with_curves = plan_run(spec(data_dir, tmp_path / "a"))
    without = plan_run(spec(data_dir, tmp_path / "b", log_to="none"))
    assert with_curves.run_id() == without.run_id()


def test_an_unknown_destination_is_refused_in_one_line(data_dir, tmp_path, repo):
    done = subprocess.run([sys.executable, "cli.py", "train", "--dataset", "toy", "--data-dir", str(data_dir),
                           "--set", "log_to=wandb", "--set", "max_steps=2", "--out", str(tmp_path / "run")],
                          cwd=repo, capture_output=True, text=True)
    assert done.returncode != 0 and "log_to" in done.stderr and "tensorboard" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()
