"""``log_to=tensorboard`` (bench.engine.curves): a run's curves in TensorBoard event files, equal to its log.jsonl,
also after a resume that drops log lines; not part of the run id; refused in one line without the package. The
run writes only its own event files (a resume removes those and nothing else), never through a link, and a path it
cannot write is refused before the log is touched."""

import errno
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench.engine.curves import AXES, OURS, TENSORBOARD, TensorBoardCurves, tag
from bench.engine.run import plan_run, train
from bench.engine.spec import RunSpec

SETTINGS = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 12, "eval_every": 6,
            "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "log_every": 2, "eval_max_tokens": 500,
            "stop_if_not_learning": False, "log_to": "tensorboard"}


# a run that checkpoints at its last step (4): resumed, it trains nothing more and only evaluates
RESUMED = {**SETTINGS, "max_steps": 4, "eval_every": 2, "checkpoint_every": 2}


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
def test_after_a_resume_the_event_files_hold_what_the_log_kept(data_dir, tmp_path, crash_at_step):
    crash_at_step(7)  # steps 5 and 6 were logged after the last checkpoint (step 4)
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(data_dir, tmp_path / "run"), show_progress=False)
    crash_at_step(None)
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


@pytest.fixture(scope="module")
def finished_run(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "run"
    train(spec(data_dir, out, **RESUMED), show_progress=False)
    return out


def interrupted(finished_run, where):
    """A copy of the finished run killed after its last checkpoint: no result, a log line the resume drops."""
    run = shutil.copytree(finished_run, where / "run", symlinks=True)
    (run / "result.json").unlink()
    with open(run / "log.jsonl", "a") as f:
        f.write(json.dumps({"step": 5, "epoch": 0, "train_chars": 10 ** 6, "train_loss": 1.0}) + "\n")
    return run


def contents(folder) -> dict[str, bytes | str]:
    """Every file under ``folder`` by its path, a link by where it leads (not followed)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                found[path] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                found[path] = open(path, "rb").read()
    return found


def test_a_resume_removes_the_runs_event_files_and_nothing_else(finished_run, data_dir, tmp_path):
    run = interrupted(finished_run, tmp_path)
    board = run / TENSORBOARD
    (ours,) = board.glob(OURS)
    (board / "notes.txt").write_text("my notes")
    (board / "events.out.tfevents.1700000000.laptop.42.0").write_bytes(b"another writer's curves")
    (board / "events.out.tfevents.1.laptop.1.0.bench").mkdir()  # named as the run's, but a folder
    (board / "events.out.tfevents.1.laptop.1.0.bench" / "kept").write_text("kept")
    (board / "events.out.tfevents.2.laptop.1.0.bench").symlink_to("notes.txt")  # and a link
    theirs = {path: data for path, data in contents(board).items() if path != str(ours)}
    train(spec(data_dir, run, **RESUMED), show_progress=False)
    assert {path: data for path, data in contents(board).items() if path in theirs} == theirs
    written = [path for path in board.glob(OURS) if path.is_file() and not path.is_symlink()]
    assert len(written) == 1 and written[0] != ours


def prepare_link_to_a_folder(board, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "theirs.txt").write_text("not the run's")
    board.symlink_to(tmp_path / "elsewhere", target_is_directory=True)


def prepare_dangling_link(board, tmp_path):
    board.symlink_to(tmp_path / "nowhere", target_is_directory=True)


def prepare_file(board, tmp_path):
    board.write_text("a file where the event files go")


def prepare_read_only_folder(board, tmp_path):
    board.mkdir()
    (board / "theirs.txt").write_text("not the run's")
    board.chmod(0o555)
    if os.access(board, os.W_OK):
        pytest.skip("this user writes into a read-only folder anyway (root)")


@pytest.mark.parametrize("prepare, problem", [(prepare_link_to_a_folder, "is a link"),
                                              (prepare_dangling_link, "is a link"),
                                              (prepare_file, "is not a folder"),
                                              (prepare_read_only_folder, "is not writable")])
def test_a_tensorboard_path_the_run_cannot_own_is_refused_before_the_log_is_touched(
        prepare, problem, finished_run, data_dir, tmp_path, cli_here, one_line_error):
    run = interrupted(finished_run, tmp_path)
    shutil.rmtree(run / TENSORBOARD)
    prepare(run / TENSORBOARD, tmp_path)
    before = contents(tmp_path)  # the run folder and what a link leads to
    try:
        settings = [f"{key}={str(value).lower()}" for key, value in RESUMED.items()]
        done = cli_here("train", "--dataset", "toy", "--data-dir", str(data_dir), "--seed", "3", "--quiet",
                        "--out", str(run), *[arg for pair in settings for arg in ("--set", pair)])
    finally:
        if (run / TENSORBOARD).is_dir() and not (run / TENSORBOARD).is_symlink():
            (run / TENSORBOARD).chmod(0o755)
    one_line_error(done, f"{run / TENSORBOARD} {problem}", "log_to=none", code=1)
    assert contents(tmp_path) == before


def test_a_failure_writing_the_curves_leaves_the_log_as_it_was(finished_run, data_dir, tmp_path, monkeypatch):
    run = interrupted(finished_run, tmp_path)
    log = (run / "log.jsonl").read_bytes()

    def disk_full(self, records):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.folder))

    monkeypatch.setattr(TensorBoardCurves, "restart", disk_full)
    with pytest.raises(OSError, match="No space"):
        train(spec(data_dir, run, **RESUMED), show_progress=False)
    assert (run / "log.jsonl").read_bytes() == log
