"""One run on several processes (torchrun, gloo on CPU) and a matrix as cluster jobs (submitit's local executor)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from bench.study.matrix.execute import Execution, run_matrix
from bench.study.matrix.launch import ClusterSettings, submit, wait_for

SETTINGS = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 12, "eval_every": 6,
            "checkpoint_every": 4, "eval_streams": 4, "eval_chunk": 32, "eval_max_tokens": 500, "log_every": 2}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("scale"))


def train_args(data_dir, out, *extra):
    args = ["train", "--model", "sha-rnn", "--tokenizer", "byte", "--dataset", "toy", "--data-dir", str(data_dir),
            "--out", str(out), "--quiet", "--json"]
    for key, value in SETTINGS.items():
        args += ["--set", f"{key}={value}"]
    return args + list(extra)


def torchrun(repo, *args):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(repo / "cli.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=repo, timeout=600)


@pytest.mark.slow
def test_two_processes_train_like_one_with_the_same_global_batch(data_dir, tmp_path, cli, repo):
    one = cli(*train_args(data_dir, tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = torchrun(repo, *train_args(data_dir, tmp_path / "two"))
    assert two.returncode == 0, two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # one JSON document: only the main process reports
    assert a["run_id"] == b["run_id"] and a["training"]["tokens"] == b["training"]["tokens"]
    for split in ("valid", "test"):
        assert b["metrics"][split]["total_nll_nats"] == pytest.approx(a["metrics"][split]["total_nll_nats"], rel=1e-6)
        assert b["metrics"][split]["n_tokens"] == a["metrics"][split]["n_tokens"]
    wa = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=True)
    wb = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)
    assert all(torch.allclose(wa["model"][k], wb["model"][k], atol=1e-5) for k in wa["model"])
    # The carried state of all four streams is gathered into the checkpoint, as one process would save it.
    assert [s.shape for s in wb["carried_state"][0][0]] == [s.shape for s in wa["carried_state"][0][0]]
    log_a = [json.loads(line) for line in (tmp_path / "one" / "log.jsonl").read_text().splitlines()]
    log_b = [json.loads(line) for line in (tmp_path / "two" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log_a] == [r["step"] for r in log_b]  # written once, by the main process
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


TOY = """
[matrix]
name = "toy"
[axes]
model = ["lstm"]
tokenizer = ["byte"]
dataset = ["toy"]
[budget]
chars = 60_000
[context]
chars = 32
[shared]
preset = "tiny"
batch_size = 4
eval_every = 10
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
checkpoint_every = 1000
emsize = 16
nhid = 16
"""


@pytest.mark.slow
def test_a_cluster_job_whose_time_is_up_checkpoints_is_requeued_and_resumes(data_dir, tmp_path):
    config = tmp_path / "toy.toml"
    config.write_text(TOY)
    reference = run_matrix(config, tmp_path / "local", data_dir=data_dir, execution=Execution(show_progress=False))
    assert reference.counts == {"done": 1}
    outcome = run_matrix(config, tmp_path / "cluster", dry_run=True, data_dir=data_dir)
    (tmp_path / "cluster").mkdir()
    jobs = submit(outcome.chains, tmp_path / "cluster", "toy", ClusterSettings(gpus_per_run=0), executor="local")
    run_dir = outcome.chains[0][0].run_dir
    deadline = time.monotonic() + 300
    while not ((run_dir / "log.jsonl").is_file() and (run_dir / "log.jsonl").read_text().count("valid") >= 2):
        assert time.monotonic() < deadline and jobs[0].state not in ("FINISHED", "FAILED")
        time.sleep(0.1)
    # What Slurm does before a job's time limit (--signal=USR2@90): signal the job's processes.
    os.kill(json.loads((run_dir / "run.lock").read_text())["pid"], signal.SIGUSR2)
    [(_, records)] = list(wait_for(jobs, outcome.chains))
    assert records[0].status == "done", records
    log = (run_dir / "train.log").read_text()
    assert "resuming" in log and log.count("== ") == 2  # two attempts of the same job
    resumed_at = int(log.split("from step ")[1].split()[0])
    assert resumed_at > 0  # the checkpoint taken on the signal (the run has no periodic one)
    local = reference.chains[0][0].run_dir
    a = torch.load(local / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(run_dir / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)  # the same weights as the uninterrupted run
    assert json.loads((run_dir / "result.json").read_text())["metrics"]["test"]["total_nll_nats"] == \
        json.loads((local / "result.json").read_text())["metrics"]["test"]["total_nll_nats"]


def test_the_slurm_launcher_needs_slurm(data_dir, tmp_path, cli, one_line_error):
    config = tmp_path / "toy.toml"
    config.write_text(TOY)
    one_line_error(cli("run-matrix", str(config), "--launcher", "slurm", "--data-dir", str(data_dir),
                       "--results", str(tmp_path / "r")), "needs a Slurm cluster")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_under_torchrun_a_bad_setting_is_one_line_once_and_run_matrix_is_refused(data_dir, tmp_path, repo):
    bad = torchrun(repo, *train_args(data_dir, tmp_path / "bad", "--seed", "-1"))
    ours = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]
    assert bad.returncode != 0 and ours == ["error: seed must be an integer from 0 to 2**32 - 1, not -1"]
    assert "gloo" not in bad.stderr.lower() and "/bench/" not in bad.stderr  # torchrun's own report only
    assert not (tmp_path / "bad").exists()
    matrix = torchrun(repo, "run-matrix", str(repo / "configs" / "smoke.toml"), "--dry-run")
    assert [line for line in matrix.stderr.splitlines() if line.startswith("error: ")] == [
        line for line in matrix.stderr.splitlines() if "run-matrix under torchrun" in line]
    assert "run-matrix under torchrun" in matrix.stderr


def test_a_failed_cluster_job_is_recorded_with_the_error_it_raised():
    from submitit.core.utils import FailedJobError

    from bench.study.matrix.launch import job_error

    wrapped = FailedJobError("Job (task=0) failed during processing with trace:\n----------------------\n"
                             "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                             "ValueError: bptt must be at least 2\n\n----------------------\n"
                             "You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
                             "  - /tmp/x_0_log.err\n  - /tmp/x_0_log.out")
    assert job_error(wrapped) == "ValueError: bptt must be at least 2"
    assert job_error(RuntimeError("Job got killed for an unknown reason.")) == "Job got killed for an unknown reason."


@pytest.mark.slow
def test_a_cluster_job_imports_the_plugins_its_matrix_knew(data_dir, tmp_path):
    """A scheme from a plug-in file (not importable by name) trains in a cluster job: the job imports what the
    matrix's process had imported; a job not handed it fails the run."""
    from bench import plugins
    from tests.conftest import REPO
    from tokenizers_study import FAMILIES

    config = tmp_path / "toy.toml"
    config.write_text(TOY.replace('tokenizer = ["byte"]', 'tokenizer = ["nibble"]').replace("60_000", "1_000"))
    try:
        plugins.load_plugin(str(REPO / "examples" / "plugin" / "bench_toy_plugin" / "nibble.py"))
        outcome = run_matrix(config, tmp_path / "cluster", dry_run=True, data_dir=data_dir)
        handed = plugins.for_other_processes(cluster=True)
        (tmp_path / "cluster").mkdir()
        for given, status in ((handed, "done"), ([], "failed")):
            jobs = submit(outcome.chains, tmp_path / "cluster", "toy", ClusterSettings(gpus_per_run=0), given,
                          executor="local")
            [(_, records)] = list(wait_for(jobs, outcome.chains))
            assert records[0].status == status, records
            if status == "failed":
                assert "unknown tokenization scheme 'nibble'" in records[0].error
            (outcome.chains[0][0].run_dir / "result.json").unlink(missing_ok=True)
    finally:
        FAMILIES.pop("nibble", None)
        sys.modules.pop("nibble", None)
        plugins._LOADED.pop("nibble", None)
