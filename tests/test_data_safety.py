"""No way to lose a result: runs never write into each other's folders, one process trains a run, workers die
with their matrix, and an interrupted run leaves neither torn logs nor temporary files."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.engine.trainer import Trainer, TrainingInterrupted
from bench.study.matrix.execute import Execution, run_matrix

FAST = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 12, "eval_every": 6,
        "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "log_every": 1, "eval_max_tokens": 500}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("safety"))


def snapshot(folder):
    return {p.relative_to(folder): (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()}


def train_args(data_dir, *settings):
    return ["train", "--dataset", "toy", "--data-dir", str(data_dir), "--quiet", "--set", "emsize=16",
            "--set", "nhid=64", "--set", "batch_size=4", *[a for s in settings for a in ("--set", s)]]


def test_a_different_run_never_writes_into_a_finished_runs_folder(data_dir, tmp_path, cli, one_line_error):
    assert cli(*train_args(data_dir, "max_steps=4"), cwd=tmp_path).returncode == 0
    assert cli(*train_args(data_dir, "max_steps=6"), cwd=tmp_path).returncode == 0
    first, second = sorted((tmp_path / "runs").iterdir())  # default folders are named by the run id
    before = snapshot(first)
    one_line_error(cli(*train_args(data_dir, "max_steps=8"), "--out", str(first), cwd=tmp_path),
                   "holds another run")
    assert snapshot(first) == before
    assert cli(*train_args(data_dir, "max_steps=4"), cwd=tmp_path).returncode == 0  # the same run: reused as is
    assert snapshot(first) == before


MATRIX = """
[matrix]
name = "toy"
[axes]
model = ["lstm"]
tokenizer = ["byte", "char", "word-open:60"]
dataset = ["toy"]
[budget]
chars = 40_000
[context]
chars = 32
[shared]
preset = "tiny"
stop_if_not_learning = false  # toy runs too short to leave their unigram floor: machinery, not learning
batch_size = 4
eval_every = 10
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
checkpoint_every = 10
log_every = 1
emsize = 16
nhid = 16
"""


def matrix_process(repo, config, results, data_dir, *extra):
    """``bench run-matrix`` in the background; its output goes to files (a worker outliving it would hold a pipe
    open, and reading the pipe would wait for that worker)."""
    output = open(config.parent / f"run-matrix.{len(list(config.parent.glob('run-matrix.*')))}.log", "w+")
    process = subprocess.Popen([sys.executable, str(repo / "cli.py"), "run-matrix", str(config), "--results",
                                str(results), "--data-dir", str(data_dir), "--quiet", *extra], cwd=repo,
                               stdout=output, stderr=subprocess.STDOUT, text=True)
    process.output = output
    return process


def finish(*processes, timeout=600) -> list[str]:
    """What each process printed once all have exited. If one is still running after ``timeout`` seconds, all are
    killed and the test fails with their output (a bare TimeoutExpired says nothing about where they stood)."""
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
            process.wait()
        pytest.fail(f"run-matrix still running after {timeout} s; they printed:\n" +
                    "\n---\n".join(_output(p)[-3000:] for p in processes))
    return [_output(p) for p in processes]


def _output(process) -> str:
    process.output.seek(0)
    return process.output.read()


def steps_of(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "log.jsonl").read_text().splitlines()
            if "train_loss" in line]


@pytest.mark.slow
def test_two_matrix_processes_on_one_results_folder_train_each_run_once(data_dir, tmp_path, repo):
    config = tmp_path / "toy.toml"
    config.write_text(MATRIX)
    run_matrix(config, tmp_path / "results", dry_run=True, data_dir=data_dir)  # tokenizers trained once
    # one thread each: two processes of two threads on two cores waited on each other's spinning threads (one
    # took over 600 s in CI, where alone it takes seconds)
    first = matrix_process(repo, config, tmp_path / "results", data_dir, "--threads", "1")
    second = matrix_process(repo, config, tmp_path / "results", data_dir, "--threads", "1")
    outputs = finish(first, second, timeout=300)
    # each waits for the runs the other holds: both exit 0 with a complete table (both exited 1 before)
    assert all(p.returncode == 0 for p in (first, second)), outputs
    table = (tmp_path / "results" / "runs.csv").read_text().splitlines()
    assert len(table) == 4 and all(",done," in row for row in table[1:]), table
    run_dirs = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    assert len(run_dirs) == 3
    for run_dir in run_dirs:
        steps = steps_of(run_dir)
        assert steps == list(range(1, len(steps) + 1)), run_dir.name  # each step logged once, in order
    again = run_matrix(config, tmp_path / "results", data_dir=data_dir, execution=Execution(show_progress=False))
    assert again.counts == {"done": 3}


def live(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_killed_matrix_takes_its_workers_with_it(data_dir, tmp_path, repo):
    config = tmp_path / "toy.toml"
    config.write_text(MATRIX.replace("chars = 40_000", "chars = 400_000"))
    run_matrix(config, tmp_path / "results", dry_run=True, data_dir=data_dir)
    parent = matrix_process(repo, config, tmp_path / "results", data_dir, "--jobs", "2")
    deadline = time.monotonic() + 300
    while len(locks := list((tmp_path / "results").glob("*/run.lock"))) < 2 or not all(
            (lock.parent / "checkpoint.pt").exists() for lock in locks):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.2)
    workers = [json.loads(lock.read_text())["pid"] for lock in locks]
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 120
    while any(live(pid) for pid in workers):
        assert time.monotonic() < deadline, "workers outlived their matrix"
        time.sleep(0.2)
    for lock in locks:  # each stopped at a step boundary with a checkpoint: the next pass resumes
        log = (lock.parent / "train.log").read_text()
        assert "SIGTERM" in log and "checkpoint saved" in log


def _crash_at(step, leave_debris):
    original = Trainer.train_step

    def step_then_crash(self):
        if self.progress.step == step:
            if leave_debris:  # what a kill in the middle of writes leaves
                with open(self.run_log.path, "a") as f:
                    f.write('{"step": 99, "train_lo')
                (self.out / ".checkpoint.pt.x1y2.tmp").write_bytes(b"\0" * 1000)
            raise RuntimeError("killed")
        return original(self)

    return step_then_crash


@pytest.mark.parametrize("crash_step", [2, 7])  # before the first checkpoint (step 4), and after it
def test_an_interrupted_run_leaves_no_torn_log_and_no_temporary_files(data_dir, tmp_path, monkeypatch, crash_step):
    def spec(out):
        return RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", seed=1, overrides=FAST,
                       data_dir=str(data_dir), out_dir=str(out))

    train(spec(tmp_path / "whole"), show_progress=False)
    monkeypatch.setattr(Trainer, "train_step", _crash_at(crash_step, leave_debris=True))
    with pytest.raises(RuntimeError, match="killed"):
        train(spec(tmp_path / "cut"), show_progress=False)
    monkeypatch.undo()
    if crash_step < FAST["checkpoint_every"]:  # nothing to resume: the failed run left no folder
        assert not (tmp_path / "cut").exists()
        (tmp_path / "cut").mkdir()
        (tmp_path / "cut" / "log.jsonl").write_text('{"step": 1, "train_loss": 9}\n{"step": 2, "tr')
    train(spec(tmp_path / "cut"), show_progress=False)

    def comparable(run):
        timing = ("seconds", "chars_per_second")
        lines = (tmp_path / run / "log.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines]

    assert comparable("cut") == comparable("whole")
    assert not list((tmp_path / "cut").glob(".*.tmp"))


def test_a_retried_run_keeps_no_stale_error_and_counts_every_attempt(data_dir, tmp_path, monkeypatch):
    config = tmp_path / "toy.toml"
    config.write_text(MATRIX.replace('["byte", "char", "word-open:60"]', '["byte"]').replace("40_000", "3_000"))
    original = Trainer.train_step

    def slow_then_fail(self):
        if self.progress.step == 11:
            time.sleep(1.0)
            self.save_checkpoint()
            raise TrainingInterrupted("stopped for the test")
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", slow_then_fail)
    with pytest.raises(KeyboardInterrupt):  # the matrix stops as on Ctrl-C
        run_matrix(config, tmp_path / "results", data_dir=data_dir, execution=Execution(show_progress=False))
    monkeypatch.setattr(Trainer, "train_step", lambda self: (_ for _ in ()).throw(RuntimeError("broken")))
    failed = run_matrix(config, tmp_path / "results", data_dir=data_dir, execution=Execution(show_progress=False))
    run_dir = failed.chains[0][0].run_dir
    assert failed.counts == {"failed": 1} and (run_dir / "error.txt").is_file()
    monkeypatch.undo()
    done = run_matrix(config, tmp_path / "results", data_dir=data_dir,
                      execution=Execution(show_progress=False, retry_failed=True))
    assert done.counts == {"done": 1} and not (run_dir / "error.txt").exists()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["provenance"]["wall_seconds"] > 1.0  # the first attempt's second is counted


# ------------------------------------------------------------------ no command writes what it does not own


@pytest.fixture(scope="module")
def owned(data_dir, tmp_path_factory):
    """Two finished runs and a finished matrix, for commands that must not write into them."""
    root = tmp_path_factory.mktemp("owned")
    runs = {}
    for name, steps in (("a", 4), ("b", 6)):
        spec = RunSpec(model="lstm", preset="tiny", tokenizer="byte", dataset="toy", overrides={
            **FAST, "max_steps": steps, "dump_token_losses": True, "final_eval_splits": "test"},
            data_dir=str(data_dir), out_dir=str(root / name))
        train(spec, show_progress=False)
        runs[name] = root / name
    config = root / "toy.toml"
    config.write_text(MATRIX.replace('["byte", "char", "word-open:60"]', '["byte"]').replace("40_000", "3_000"))
    run_matrix(config, root / "results" / "toy", data_dir=data_dir, execution=Execution(show_progress=False))
    return root, runs, config


def _everything(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_tokenize_stats_never_replaces_a_file_it_did_not_write(owned, data_dir, tmp_path, cli, cli_here,
                                                               one_line_error):
    root, runs, _ = owned
    before = _everything(root)
    for target in (runs["a"] / "result.json", runs["a"] / "best.pt", root / "results" / "toy" / "runs.csv",
                   runs["a"] / "new.md"):
        one_line_error(cli_here("tokenize", "stats", "--dataset", "toy", "--data-dir", str(data_dir), "--schemes",
                                "byte", "--out", str(target)), str(target))
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    one_line_error(cli_here("tokenize", "stats", "--dataset", "toy", "--data-dir", str(data_dir), "--schemes", "byte",
                       "--out", str(notes)), "was not written by this command")
    assert notes.read_text() == "my notes\n" and _everything(root) == before
    mine = tmp_path / "stats.md"
    for _ in range(2):  # a new file, then this command's own report from before
        assert cli("tokenize", "stats", "--dataset", "toy", "--data-dir", str(data_dir), "--schemes", "byte",
                   "--out", str(mine)).returncode == 0
    assert mine.read_text().startswith("# Tokenization statistics")


def test_eval_never_dumps_losses_into_another_run(owned, data_dir, tmp_path, cli, cli_here, one_line_error):
    root, runs, _ = owned
    before = _everything(root)
    one_line_error(cli_here("eval", str(runs["a"]), "--data-dir", str(data_dir), "--dump-token-losses",
                       str(runs["b"] / "token_nll.test.npy")), str(runs["b"]))
    assert _everything(root) == before
    fresh = tmp_path / "losses.npy"
    assert cli("eval", str(runs["a"]), "--data-dir", str(data_dir), "--dump-token-losses", str(fresh)).returncode == 0
    one_line_error(cli_here("eval", str(runs["a"]), "--data-dir", str(data_dir), "--dump-token-losses", str(fresh)),
                   "choose a new file name")  # a .npy carries no mark of who wrote it: never replaced


def test_eval_never_replaces_a_file_of_its_own_run(owned, data_dir, tmp_path, cli, cli_here, one_line_error):
    """The run's weights, checkpoint, result and spec: the folder is the run's own, the files are not eval's."""
    root, runs, _ = owned
    run = runs["a"]
    names = [path.name for path in sorted(run.iterdir()) if path.is_file()]
    assert {"best.pt", "checkpoint.pt", "result.json", "spec.json"} <= set(names)
    before = _everything(root)
    for name in names:
        one_line_error(cli_here("eval", str(run), "--data-dir", str(data_dir), "--dump-token-losses",
                                str(run / name)), "exists and was not written by this command")
    assert _everything(root) == before
    assert cli("eval", str(run), "--data-dir", str(data_dir), "--dump-token-losses",
               str(run / "eval-losses.npy")).returncode == 0  # a new file in its own folder is fine


def test_a_matrix_never_takes_over_another_matrix_or_a_run(owned, data_dir, tmp_path, cli, cli_here, one_line_error):
    root, runs, config = owned
    results = root / "results" / "toy"
    before = _everything(root)
    other = tmp_path / "other.toml"  # another config with the same [matrix] name
    other.write_text(config.read_text().replace('["byte"]', '["char"]'))
    for args in (["--results", str(results)], ["--results", str(results), "--dry-run"]):
        one_line_error(cli_here("run-matrix", str(other), "--data-dir", str(data_dir), "--quiet", *args),
                       "holds the results of the matrix run from")
    one_line_error(cli("run-matrix", str(other), "--data-dir", str(data_dir), "--quiet", cwd=root),
                   "holds the results of the matrix run from")  # the default folder, results/toy
    for folder in (runs["a"], runs["a"] / "inside", results / "inside"):
        one_line_error(cli_here("run-matrix", str(config), "--data-dir", str(data_dir), "--results", str(folder),
                           "--dry-run"), str(folder))
    assert _everything(root) == before
    again = cli("run-matrix", str(config), "--data-dir", str(data_dir), "--results", str(results), "--quiet")
    assert again.returncode == 0, again.stderr  # its own config: finished runs reused, nothing retrained
    assert _everything(root) == before


def test_train_and_report_never_write_into_a_matrix_or_another_run(owned, data_dir, cli_here, one_line_error):
    root, runs, _ = owned
    results = root / "results" / "toy"
    before = _everything(root)
    for folder in (results, results / "mine", runs["a"] / "mine"):
        one_line_error(cli_here(*train_args(data_dir, "max_steps=4"), "--out", str(folder)), str(folder))
    for folder in (runs["a"], results, results / "report"):
        one_line_error(cli_here("report", str(results), "--out", str(folder)), str(folder))
    assert _everything(root) == before


def test_a_report_folder_belongs_to_the_results_it_reports(tmp_path):
    from bench.errors import BenchError
    from bench.ownership import claim_report_folder, record_report_owner

    first, second, out = tmp_path / "results" / "one", tmp_path / "results" / "two", tmp_path / "reports" / "one"
    out.mkdir(parents=True)
    record_report_owner(out, first)
    claim_report_folder(out, first)  # the same results: rebuilt in place
    with pytest.raises(BenchError, match="not the report of"):
        claim_report_folder(out, second)


def test_a_folder_of_loose_checkpoints_above_is_nobodys(tmp_path):
    from bench.ownership import claim_run_folder, enclosing_owner

    (tmp_path / "best.pt").write_bytes(b"weights")  # a user's own checkpoint, no run recorded
    claim_run_folder(tmp_path / "project" / "runs" / "r1", "0123456789abcdef")
    assert enclosing_owner(tmp_path / "project" / "runs" / "r1") is None
    (tmp_path / "spec.json").write_text('{"run_id": "fedcba9876543210"}')  # now it is a run's folder
    assert enclosing_owner(tmp_path / "project").kind == "run"


def test_a_run_killed_after_its_last_checkpoint_keeps_one_final_validation(data_dir, tmp_path, monkeypatch):
    import bench.engine.run as run_module

    def spec(out):  # 10 steps, validation every 6: the last step's validation comes after the loop
        return RunSpec(model="lstm", preset="tiny", tokenizer="byte", dataset="toy", seed=1,
                       overrides={**FAST, "max_steps": 10}, data_dir=str(data_dir), out_dir=str(out))

    train(spec(tmp_path / "whole"), show_progress=False)
    original = run_module._evaluate

    def killed(*args, **kwargs):
        raise RuntimeError("killed during the final evaluation")

    monkeypatch.setattr(run_module, "_evaluate", killed)
    for _ in range(3):  # killed three times after the last checkpoint, then left to finish
        with pytest.raises(RuntimeError, match="killed"):
            train(spec(tmp_path / "cut"), show_progress=False)
    monkeypatch.setattr(run_module, "_evaluate", original)
    train(spec(tmp_path / "cut"), show_progress=False)

    def validations(run):
        lines = [json.loads(line) for line in (tmp_path / run / "log.jsonl").read_text().splitlines()]
        return [(e["step"], e["valid_bits_per_byte"]) for e in lines if "valid_bits_per_byte" in e]

    assert validations("cut") == validations("whole") and [s for s, _ in validations("whole")] == [6, 10]


def test_a_moved_results_folder_still_belongs_to_its_config(owned, data_dir, tmp_path, cli):
    root, _, config = owned
    moved = tmp_path / "elsewhere" / "toy"
    shutil.copytree(root / "results" / "toy", moved)  # its owner.json names the config by a path that moved away
    again = cli("run-matrix", str(config), "--data-dir", str(data_dir), "--results", str(moved))
    assert again.returncode == 0, again.stderr  # the same config (its sha256 in runs.csv): finished runs reused
    assert "0 to run" in again.stderr


def test_a_run_folder_name_is_one_folder_whatever_its_settings_spell():
    # every kind of run (bench train, a matrix cell, a pretrained model) is named by this one function: a
    # pretrained tokenizer's path must not become folders inside folders
    from bench.run_files import run_folder_name

    assert run_folder_name(["lstm", "tiny", "bpe1024", "wikitext-2", "s0"], "0123456789abcdef") == \
        "lstm-tiny-bpe1024-wikitext-2-s0-0123456789"
    assert run_folder_name(["sha-rnn", "tiny", "hf/models/gpt 2", "wt2_a.b", "s1"], "fedcba9876543210") == \
        "sha-rnn-tiny-hf-models-gpt-2-wt2_a.b-s1-fedcba9876"


def test_a_run_folder_holding_the_result_of_another_run_is_refused(owned, data_dir, tmp_path, cli_here,
                                                                   one_line_error):
    """spec.json of one run and result.json of another: whose folder it is cannot be told, so neither training
    it again nor an eval writing into it may replace or add anything."""
    import dataclasses

    from bench.errors import BenchError

    _, runs, _ = owned
    mixed = tmp_path / "mixed"
    shutil.copytree(runs["a"], mixed)
    shutil.copy(runs["b"] / "result.json", mixed / "result.json")
    before = _everything(mixed)
    spec = RunSpec.from_json(json.loads((mixed / "spec.json").read_text())["spec"])  # this folder's spec.json
    with pytest.raises(BenchError, match="holds the files of two runs"):
        train(dataclasses.replace(spec, out_dir=str(mixed)), show_progress=False)
    one_line_error(cli_here("eval", str(mixed), "--data-dir", str(data_dir), "--dump-token-losses",
                            str(mixed / "losses.npy")), "holds the files of two runs")
    assert _everything(mixed) == before
    (mixed / "spec.json").unlink()  # now the folder records the other run only: its checkpoint is not that run's
    before = _everything(mixed)
    one_line_error(cli_here("eval", str(mixed), "--data-dir", str(data_dir), "--dump-token-losses",
                            str(mixed / "token_nll.valid.npy")), "but its checkpoint")
    assert _everything(mixed) == before


def test_a_report_whose_owner_file_is_lost_is_never_replaced(owned, tmp_path, cli, cli_here, one_line_error):
    root, _, _ = owned
    other = tmp_path / "other-results"
    shutil.copytree(root / "results" / "toy", other)
    report = tmp_path / "report"
    assert cli("report", str(other), "--out", str(report)).returncode == 0
    for damage in ((report / "owner.json").unlink, lambda: (report / "owner.json").write_text("{garbage")):
        damage()
        before = _everything(report)
        one_line_error(cli_here("report", str(root / "results" / "toy"), "--out", str(report)),
                       "the results it reports cannot be told")
        assert _everything(report) == before


def test_a_results_folder_whose_owner_file_is_lost_is_known_by_its_runs(owned, data_dir, tmp_path, cli_here,
                                                                         one_line_error):
    """Without owner.json (and without matrix.toml) the results folder still says which config it ran: each run
    folder's cell.json records the config's sha256; a config with other contents, its name or not, is refused."""
    root, _, config = owned
    results = tmp_path / "results"
    shutil.copytree(root / "results" / "toy", results)
    (results / "owner.json").unlink()
    other = tmp_path / "other.toml"
    for text in (config.read_text().replace('name = "toy"', 'name = "other"'), config.read_text() + "# edited\n"):
        other.write_text(text)
        for keep in (True, False):
            if not keep:
                (results / "matrix.toml").unlink(missing_ok=True)
            one_line_error(cli_here("run-matrix", str(other), "--data-dir", str(data_dir), "--results", str(results),
                                    "--dry-run"), "cell.json record its sha256")
    again = cli_here("run-matrix", str(config), "--data-dir", str(data_dir), "--results", str(results), "--dry-run")
    assert again.returncode == 0, again.stderr  # the config whose contents its runs record: its own


def test_a_moved_report_or_config_is_named_where_it_is(tmp_path):
    """Moving a report, a results folder or a config: each claim either still matches (the recorded path,
    relative or absolute, leads to it) or names where the config or results folder really was."""
    from bench.errors import BenchError
    from bench.ownership import claim_matrix_folder, claim_report_folder, record_matrix_owner, record_report_owner

    results, report = tmp_path / "results" / "one", tmp_path / "reports" / "one"
    results.mkdir(parents=True)
    report.mkdir(parents=True)
    record_report_owner(report, results)
    moved = tmp_path / "elsewhere" / "deeper" / "one"
    moved.parent.mkdir(parents=True)
    report.rename(moved)
    claim_report_folder(moved, results)  # the report moved, its results did not: still theirs
    results.rename(tmp_path / "results" / "two")
    with pytest.raises(BenchError, match=f"is the report of {results}, which does not exist, not the report of"):
        claim_report_folder(moved, tmp_path / "results" / "two")

    config, folder = tmp_path / "configs" / "m.toml", tmp_path / "runs" / "m"
    config.parent.mkdir()
    config.write_text('[matrix]\nname = "m"\n')
    folder.mkdir(parents=True)
    record_matrix_owner(folder, config)
    (folder / "runs.csv").write_text("matrix,config_sha256\nm,0\n")
    shutil.move(folder, tmp_path / "m")
    config.write_text('[matrix]\nname = "m"\n# edited\n')
    claim_matrix_folder(tmp_path / "m", config)  # the results moved, the config did not: still its own
    config.rename(tmp_path / "m.toml")
    with pytest.raises(BenchError, match=f"run from {config}, which does not exist, .* put the config back at "
                                         f"{config}"):
        claim_matrix_folder(tmp_path / "m", tmp_path / "m.toml")
