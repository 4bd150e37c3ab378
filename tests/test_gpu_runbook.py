"""The GPU runbook's CPU dry run (``TINY=1 scripts/gpu/runbook.sh``): every stage runs at toy sizes, so the
runbook cannot rot before a GPU is lent. The stages' output files are what a lent machine sends back."""

import json
import os
import subprocess
import sys
import tarfile

import pytest
import torch

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts" / "gpu"))
from speed_table import read_objects  # noqa: E402


def runbook(stage, out, **env):
    # the stages' time limits are for a lease; here they would make the rows depend on the machine's load
    no_time_limits = {"DEADLINE": "100000", "SPEED_SECONDS": "100000", "MEASURE_SECONDS": "500"}
    environment = {**os.environ, "TINY": "1", "PYTHON": sys.executable, **no_time_limits,
                   **{k: str(v) for k, v in env.items()}}
    return subprocess.run(["bash", "scripts/gpu/runbook.sh", stage, str(out)], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_speed_stage_measures_every_variant_of_every_model_and_writes_its_table(tmp_path):
    done = runbook("speed", tmp_path / "out", REFERENCE=tmp_path / "absent")
    assert done.returncode == 0, done.stderr[-2000:]
    *rows, sha_rnn_sweep, transformer_sweep = read_objects((tmp_path / "out" / "speed.jsonl").read_text())
    models = ["sha-rnn", "lstm", "transformer"]
    precisions = [r["precision"].split(" ")[0].split(",")[0] for r in rows[:9]]
    assert [r["model"] for r in rows[:9]] == [m for m in models for _ in range(3)]
    assert precisions == ["float32", "bfloat16", "float16"] * 3 and "loss scaling" in rows[2]["precision"]
    graphs = rows[9:12] if torch.cuda.is_available() else []  # CUDA graphs, where there is CUDA
    assert [(r["model"], r["cuda_graphs"]) for r in graphs] == [(m, True) for m in models][:len(graphs)]
    lamb = rows[9 + len(graphs):11 + len(graphs)]
    assert [(r["lamb_impl"], r["optimizer"]) for r in lamb] == [("loop", "lamb loop"), ("foreach", "lamb foreach")]
    assert len(rows) == 11 + len(graphs)  # then the batch sweeps, a list of rows each, the fastest marked
    for model, sweep in (("sha-rnn", sha_rnn_sweep), ("transformer", transformer_sweep)):
        assert [(r["model"], r["batch_size"]) for r in sweep] == [(model, 4), (model, 8)]
        assert [r["best"] for r in sweep].count(True) == 1
    assert all(r["train_tokens_per_second"] > 0 and r["steps_warmup"] >= 3 for r in rows)
    table = (tmp_path / "out" / "speed.md").read_text()
    assert table.count("| tiny |") == len(rows) and "train chars/s" in table and "MFU" in table
    assert "Batch sweep, sha-rnn tiny" in table and "Batch sweep, transformer tiny" in table
    assert "side-by-side with the reference is skipped" in done.stdout
    assert "- compile=true: not measured in the dry run" in table
    if not torch.cuda.is_available():  # skipped with a line saying why, in the output and under the table
        for model in models:
            line = f"cuda_graphs=true ({model}): skipped, it needs a CUDA device and this machine has none"
            assert line in done.stdout and f"- {line}" in table
        assert "| no peak |" in table
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["speed.jsonl", "speed.md"]


def test_the_reference_side_by_side_refuses_a_folder_without_the_reference(tmp_path):
    done = subprocess.run([sys.executable, "scripts/gpu/reference_speed.py", "--reference", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("error: no model.py in") and "Traceback" not in done.stderr


def test_the_prove_stage_reports_versions_and_the_cuda_tests(tmp_path):
    done = runbook("prove", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-2000:]
    prove = (tmp_path / "out" / "prove.md").read_text()
    assert "torch " in prove and "## pytest tests/test_cuda.py" in prove
    if not __import__("torch").cuda.is_available():
        assert "no CUDA GPU" in prove and "skipped" in prove


@pytest.mark.mirror
def test_the_study_stage_plans_the_gpu_matrix(tmp_path, mirror):
    done = runbook("study", tmp_path / "out", MIRROR=mirror, BENCH_DATA_DIR=tmp_path / "data",
                   RESULTS=tmp_path / "gpu-wikitext2")  # its records: results/reference/gpu-wikitext2/runs
    assert done.returncode == 0, done.stderr[-2000:]
    plan = (tmp_path / "out" / "study.log").read_text()
    recorded = len(list((REPO / "results" / "reference" / "gpu-wikitext2" / "runs").iterdir()))
    assert f"36 runs, {36 - recorded} to train; estimated training compute" in plan  # the committed runs are done
    for scheme in ("byte", "bpe:4096", "word-open:33278", "word:33278"):
        assert plan.count(f" {scheme} ") == 9  # 3 models x 3 seeds
    assert not (tmp_path / "gpu-wikitext2").exists()  # a plan writes no results


def test_the_speed_table_reads_the_side_by_side(tmp_path):
    row = {"model": "sha-rnn", "preset": "paper", "params_total": 53.8e6, "batch_size": 16, "bptt": 1024,
           "compile": True, "cuda_graphs": True, "optimizer": "lamb foreach", "train_tokens_per_second": 250_000.0,
           "train_tflops": 91.0, "mfu": 0.092,
           "eval": {"16": {"tokens_per_second": 950_000.0, "over_train": 3.8},
                    "256": {"tokens_per_second": 2_400_000.0, "over_train": 9.6}},
           "warmup_seconds": {"train": 24.0}, "compile_seconds": {"train": 21.5, "eval": 3.0, "timed": 0.0},
           "peak_memory_gb": 6.1, "peak_tflops": 989.4, "precision": "bfloat16",
           "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "torch": "2.11", "cuda": "13.0",
                      "cudnn": 91900}}
    reference = {"chars_per_second": {"bench": 250_000.0, "reference": 252_000.0},
                 "chars_per_second_rounds": {"bench": [250_000.0], "reference": [252_000.0]},
                 "params": {"bench": 53_800_000, "reference": 53_800_000}, "ratio_median": 0.99,
                 "ratio_rounds": [0.99], "rounds": 1, "steps_per_round": 5, "batch_size": 16, "bptt": 1024,
                 "max_memory": 5000, "precision": "bfloat16 autocast"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row, indent=2) + "\n" + json.dumps(row))
    (tmp_path / "reference.json").write_text(json.dumps(reference))
    done = subprocess.run([sys.executable, "scripts/gpu/speed_table.py", str(tmp_path / "rows.jsonl"),
                           "--reference", str(tmp_path / "reference.json")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("| bfloat16 | lamb foreach | yes | yes | 250,000 | 91.0 | 9.2% | 950,000 | 3.8x | "
                             "2,400,000 | 9.6x | 24.0 | 21.5 | 6.1 |") == 2
    assert "Ratio bench / reference: **0.99x**" in done.stdout and "(989 TFLOP/s)" in done.stdout
    earlier = {**row, "eval_tokens_per_second": 950_000.0, "eval_over_train": 3.8}  # the training batch's layout
    del earlier["eval"]
    (tmp_path / "rows.jsonl").write_text(json.dumps(earlier))
    done = subprocess.run([sys.executable, "scripts/gpu/speed_table.py", str(tmp_path / "rows.jsonl")], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "| 9.2% | n/a | n/a | n/a | n/a | 24.0 |" in done.stdout, done.stderr


@pytest.mark.mirror
def test_the_diagnose_stage_trains_the_sharnn_cell_under_each_variant_and_tabulates_them(tmp_path, mirror):
    done = runbook("diagnose", tmp_path / "out", MIRROR=mirror, BENCH_DATA_DIR=tmp_path / "data")
    assert done.returncode == 0, done.stderr[-2000:]
    table = (tmp_path / "out" / "diagnose.md").read_text()
    for variant in ("float32", "bf16-fp32-lstm", "float16-scaled", "gpu-as-before", "as-before-sdpa"):
        assert f"| {variant} |" in table
    assert table.count("| 10 |") == 5 and "failed" not in (tmp_path / "out" / "diagnose.log").read_text()
    assert "cpu (float16 LSTMs emulated)" in table  # gpu-as-before on a CPU
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["diagnose.log", "diagnose.md"]


@pytest.mark.mirror
def test_the_lease_stage_trains_a_block_of_the_study_sends_its_records_back_then_speed(tmp_path, mirror):
    config = tmp_path / "lease.toml"  # the smoke config (TINY's default) cut to byte and closed-word LSTM runs
    config.write_text((REPO / "configs" / "smoke.toml").read_text().replace(
        'model = ["sha-rnn", "lstm"]', 'model = ["lstm"]').replace(
        'tokenizer = ["byte", "word-open:300", "word:300"]', 'tokenizer = ["byte", "word:300"]'))
    done = runbook("lease", tmp_path / "out", MIRROR=mirror, BENCH_DATA_DIR=tmp_path / "data", LEASE_CONFIG=config,
                   LEASE_RESULTS=tmp_path / "smoke", REFERENCE=tmp_path / "absent")
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "out"
    assert "smoke: 6 done" in (out / "study.log").read_text()
    with tarfile.open(out / "records.tgz") as records:
        names = records.getnames()
    assert not [n for n in names if n.endswith((".pt", ".npy"))]
    documents = sorted(n.split("/")[-2] for n in names if n.endswith("/documents.test.json"))
    assert len(documents) == 5, documents  # the runs' losses by document
    nll = subprocess.run(f"cat {out}/nll.tgz.* | tar tzf -", shell=True, capture_output=True, text=True).stdout
    assert nll.count("token_nll.test.npy") == 6
    # the study had nothing left: the speed levers follow, most wanted first (compiled: a note in the dry run)
    *rows, sweep = read_objects((out / "speed.jsonl").read_text())
    assert [(r["model"], r["precision"].split(" ")[0].rstrip(","), r["settings"].get("layer_overlap"),
             bool(r["profile"]), sorted(r["eval"])) for r in rows] == [
        ("sha-rnn", "float16", None, False, ["16", "32"]), ("lstm", "float16", None, False, ["16", "32"]),
        ("transformer", "bfloat16", None, False, ["16", "32"]), ("sha-rnn", "float16", "2", False, ["16", "32"]),
        ("sha-rnn", "float16", "4", False, ["16", "32"]), ("sha-rnn", "float16", "8", False, ["16", "32"]),
        ("sha-rnn", "float16", None, True, ["16", "32"])]  # the dry run's streams: 256 would double its time
    assert [(r["model"], r["batch_size"]) for r in sweep] == [("transformer", 16), ("transformer", 32),
                                                               ("transformer", 64)]
    table = (out / "speed.md").read_text()
    assert table.count("not measured in the dry run") == 1
    assert "the captured float16 step's CUDA test: failed or skipped" in table  # no CUDA here
    assert table.count("| sha-rnn | tiny | layer_overlap=") == 3
    assert "Profile of a training step" in table and "Batch sweep, transformer tiny" in table
    assert sorted(p.name for p in out.iterdir()) == ["logs.tgz", "nll.tgz.aa", "records.tgz", "speed.jsonl",
                                                     "speed.md", "study.log"]
    assert "lease done" in done.stdout
