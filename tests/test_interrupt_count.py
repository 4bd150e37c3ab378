"""Ctrl-C of `run-matrix --jobs 2`: its closing line counts where every run stands, finished ones included."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.study.matrix.execute import _stopped_counts
from bench.study.matrix.run_status import RunStatus

# Two short runs (equal tokens) planned first, then four that would train for hours (equal characters).
CONFIG = """
[matrix]
name = "toy"
match = "tokens"

[corpora.toy]
train = "train.txt"
valid = "valid.txt"
test = "test.txt"

[axes]
model = ["lstm"]
tokenizer = ["byte", "word-open:60"]
dataset = ["toy"]
seed = [0]

[budget]
tokens = 400
chars = 300_000_000

[context]
chars = 32
tokens = 12

[shared]
preset = "tiny"
stop_if_not_learning = false
batch_size = 4
eval_every = 5
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
checkpoint_every = 5

[models.lstm]
emsize = 16
nhid = 16

[[include]]
model = "lstm"
tokenizer = ["byte", "word-open:60"]
dataset = "toy"
seed = [0, 1]
match = "chars"
"""


# The matrix's command line in a process of its own, Ctrl-C at its default (as in a terminal; a suite started
# with `&` ignores it); ``prelude``: Python run in that process first.
LAUNCH = "import sys\nsys.path.insert(0, {repo!r})\n{prelude}\nimport cli\nsys.exit(cli.main(sys.argv[1:]))"

# Ctrl-C taken by the matrix between two chains (while it writes runs.csv after the second), once the two long
# runs have checkpointed, rather than while it waits for the runs
BETWEEN_CHAINS = """
import os, signal, time
from pathlib import Path
from bench.study.matrix import execute
real, calls = execute.write_runs_table, []
def write_then_ctrl_c(chains, config, results, *rest):
    table = real(chains, config, results, *rest)
    calls.append(1)
    while len(calls) == 2 and len([p for p in Path(results).glob("*/checkpoint.pt")
                                   if not (p.parent / "result.json").exists()]) < 2:
        time.sleep(0.1)
    if len(calls) == 2:
        os.killpg(0, signal.SIGINT)
        time.sleep(60)
    return table
execute.write_runs_table = write_then_ctrl_c
"""


def _matrix(tmp_path: Path, make_text, repo: Path, prelude: str = "pass") -> subprocess.Popen:
    for i, split in enumerate(("train", "valid", "test")):
        (tmp_path / f"{split}.txt").write_text(make_text(n_lines=150 if split == "train" else 25, seed=i))
    (tmp_path / "toy.toml").write_text(CONFIG)

    def as_started():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    return subprocess.Popen([sys.executable, "-c", LAUNCH.format(repo=str(repo), prelude=prelude), "run-matrix",
                             str(tmp_path / "toy.toml"), "--jobs", "2", "--threads", "1", "--results",
                             str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), "--quiet"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=as_started)


def _closing(process: subprocess.Popen, ready=lambda: True) -> tuple[str, float]:
    """Ctrl-C to the matrix's process group once ``ready()`` (None: the matrix sends it itself); its stderr once it
    has exited 130, and the seconds from Ctrl-C to its exit."""
    try:
        deadline = time.monotonic() + 300
        while ready is not None and not ready() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        sent = time.monotonic()
        if ready is not None and not ready():  # what it was doing, for a failure seen once in many runs
            exited = process.poll()
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"the matrix never got there (exit {exited}); its files: {_files(process)}; its stderr: "
                        f"{process.communicate()[1][-3000:]}")
        if ready is not None:
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=300 if ready is None else 60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    return stderr, time.monotonic() - sent


def _files(process: subprocess.Popen) -> list[str]:
    """The files of the matrix's results folder (its --results), checkpoints and logs included."""
    results = Path(process.args[process.args.index("--results") + 1])
    return sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.is_file()) if results.exists() else []


TRUE_COUNTS = ("stopped: 2 runs finished, 2 interrupted (both saved a checkpoint), 2 not started; run the same "
               "command again to resume")


def test_ctrl_c_after_runs_finished_counts_them(tmp_path, make_text, repo):
    """Once the two short runs have finished and two long ones have checkpointed, Ctrl-C said "no run had begun"
    (it looked only at interrupted runs). It must count every run truly, and still exit at once."""
    results = tmp_path / "results"

    def ready() -> bool:
        training = [p for p in results.glob("*/checkpoint.pt") if not (p.parent / "result.json").exists()]
        return len(list(results.glob("*/result.json"))) == 2 and len(training) == 2

    stderr, took = _closing(_matrix(tmp_path, make_text, repo), ready)
    assert TRUE_COUNTS in stderr.splitlines(), stderr
    assert took < 30, f"{took:.1f} s from Ctrl-C to exit"


def test_ctrl_c_between_two_chains_still_counts_the_runs_in_progress(tmp_path, make_text, repo):
    """A Ctrl-C that the matrix takes between two chains (writing runs.csv), not in its wait for the runs: the runs
    in progress stopped and checkpointed, but the line was written before their records came, and said "4 not
    started"."""
    stderr, _ = _closing(_matrix(tmp_path, make_text, repo, prelude=BETWEEN_CHAINS), ready=None)
    assert TRUE_COUNTS in stderr.splitlines(), stderr


def test_the_closing_line_counts_each_status_whichever_invocation_left_it(tmp_path):
    """Runs finished before this command, failed ones, those interrupted with and without a checkpoint."""
    def run(name: str, status: RunStatus, checkpoint: bool = False) -> SimpleNamespace:
        (tmp_path / name).mkdir()
        if checkpoint:
            (tmp_path / name / "checkpoint.pt").write_bytes(b"")
        return SimpleNamespace(run_dir=tmp_path / name, status=status)

    earlier, now = run("a", RunStatus.DONE), run("b", RunStatus.DONE)
    saved, lost = run("c", RunStatus.INTERRUPTED, checkpoint=True), run("d", RunStatus.INTERRUPTED)
    killed, failed = run("e", RunStatus.PARTIAL, checkpoint=True), run("f", RunStatus.DIVERGED)
    new = run("g", RunStatus.NEW)
    chains = [[earlier], [now, saved], [lost], [killed], [failed], [new]]
    assert _stopped_counts(chains, chains[1:]) == ("2 runs finished (1 before this command), 3 interrupted (2 saved a "
                                                   "checkpoint, the other starts anew), 1 diverged, 1 not started")
    assert _stopped_counts([[lost]], [[lost]]) == "0 runs finished, 1 interrupted (before its first checkpoint: it " \
                                                  "starts anew)"
    assert _stopped_counts([[now], [saved]], [[now], [saved]]) == "1 run finished, 1 interrupted (it saved a " \
                                                                  "checkpoint)"


def test_a_run_folder_its_worker_removes_while_the_runs_table_is_written_is_not_an_error(tmp_path, make_toy_corpus,
                                                                                          monkeypatch):
    """A run stopped by Ctrl-C before its first checkpoint removes its folder; the matrix may be writing that
    folder's cell.json at that moment (seen under load: exit 1, "cell.json: No such file or directory", instead
    of the closing counts). A folder gone meanwhile is skipped; one that is there and cannot be written still is
    an error."""
    import shutil

    import pytest

    from bench.study.matrix import runs_table
    from bench.study.matrix.execute import Execution, run_matrix
    from tests.test_bad_inputs import MATRIX

    data = make_toy_corpus(tmp_path)
    (tmp_path / "m.toml").write_text(MATRIX)
    results = tmp_path / "results"
    run_matrix(tmp_path / "m.toml", results, data_dir=data, execution=Execution(show_progress=False))
    outcome = run_matrix(tmp_path / "m.toml", results, data_dir=data, dry_run=True)
    folder = outcome.chains[0][0].run_dir
    (folder / runs_table.CELL).unlink()
    real = runs_table.update_text

    def removed_first(path, text, **options):
        if path.name == runs_table.CELL:
            shutil.rmtree(path.parent)  # the worker's clean-up, between the check and the write
        return real(path, text, **options)

    monkeypatch.setattr(runs_table, "update_text", removed_first)
    runs_table.write_runs_table(outcome.chains, outcome.config, results)
    assert not folder.exists() and (results / runs_table.RUNS_CSV).is_file()  # not made again for its cell.json

    folder.mkdir()  # there, but its cell.json cannot be written: still an error
    monkeypatch.setattr(runs_table, "update_text", lambda path, text, **options: real(
        path.parent / "no-such-folder" / path.name, text, **options))
    with pytest.raises(FileNotFoundError):
        runs_table.write_runs_table(outcome.chains, outcome.config, results)
