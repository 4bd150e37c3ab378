"""`bench reproduce`: recorded runs trained again from their recorded configuration, each metric compared; the
same machine gives bit-identical numbers, another thread count is named, a tampered record fails, other data are
refused before anything trains, and the folder checked is never touched."""

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from bench.study.matrix.execute import Execution, run_matrix
from bench.study.matrix.reproduce import COMPARED, compare

CONFIG = """
[matrix]
name = "repro"
match = "chars"

[corpora.toy]
train = "{root}/train.txt"
valid = "{root}/valid.txt"
test = "{root}/test.txt"

[axes]
model = ["lstm"]
tokenizer = ["byte", "word-open:60"]
dataset = ["toy"]
seed = [0, 1]

[budget]
chars = 2_000

[context]
chars = 32

[shared]
preset = "tiny"
stop_if_not_learning = false
batch_size = 4
eval_every = 5
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
checkpoint_every = 5
log_every = 2

[models.lstm]
emsize = 16
nhid = 16
"""


def digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def study(tmp_path_factory, make_text):
    root = tmp_path_factory.mktemp("repro")
    for i, split in enumerate(("train", "valid", "test")):
        (root / f"{split}.txt").write_text(make_text(n_lines=150 if split == "train" else 25, seed=i))
    config = root / "repro.toml"
    config.write_text(CONFIG.format(root=root))
    outcome = run_matrix(config, root / "results", root / "data", Execution(threads=1, show_progress=False))
    assert outcome.counts == {"done": 4}
    return root


def reproduce(cli_here, study, *args):
    return cli_here("reproduce", str(study / "results"), "--data-dir", str(study / "data"), "--quiet", *args)


def test_the_same_machine_reproduces_bit_for_bit_and_the_folder_checked_is_untouched(study, cli_here, tmp_path):
    before = digest(study / "results")
    done = reproduce(cli_here, study, "--out", str(tmp_path / "again"), "--jobs", "2")
    assert done.returncode == 0, done.stderr
    assert "4 runs; 4 bit-identical; all within tolerance" in done.stdout
    assert "machine: the same machine, as recorded" in done.stdout
    compared = 2 * len(COMPARED)  # valid and test: the total NLL and every metric the tables show
    assert done.stdout.count("bit-identical") == 4 * compared + 1  # every metric of every run, and the summary
    assert digest(study / "results") == before


def test_another_thread_count_is_named_as_a_difference_of_the_machines(study, cli_here, tmp_path):
    done = reproduce(cli_here, study, "--out", str(tmp_path / "again"), "--runs", "1", "--threads", "2")
    assert done.returncode == 0, done.stderr
    assert "machine: threads: 1 -> 2" in done.stdout and "1 runs;" in done.stdout


def test_a_tampered_record_is_reported_and_fails(study, cli_here, tmp_path):
    checked = tmp_path / "tampered"  # a reference's runs.csv (a result.json checks its own numbers when read)
    checked.mkdir()
    (checked / "matrix.toml").write_bytes((study / "results" / "matrix.toml").read_bytes())
    table = pd.read_csv(study / "results" / "runs.csv")
    run_id = table["run_id"][1]
    table.loc[1, "test_bits_per_byte"] *= 1.05
    table.to_csv(checked / "runs.csv", index=False)
    done = cli_here("reproduce", str(checked), "--data-dir", str(study / "data"), "--quiet", "--run", run_id[:8],
                    "--out", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if "test_bits_per_byte" in line)
    assert "EXCEEDS" in line and line.split()[-2] != "-"  # in units of the cell's two seeds
    assert "1 runs; 0 bit-identical" in done.stdout and "1 difference(s) beyond the tolerance" in done.stdout


def test_other_data_are_refused_in_one_line_before_anything_trains(study, cli_here, one_line_error, tmp_path):
    from bench.data.user import add_user_corpus

    other = tmp_path / "corpus"
    other.mkdir()
    for split in ("train", "valid", "test"):  # the same corpus name, one more line in its test split
        (other / f"{split}.txt").write_text((study / f"{split}.txt").read_text() + ("x\n" if split == "test" else ""))
    add_user_corpus("toy", {s: other / f"{s}.txt" for s in ("train", "valid", "test")}, tmp_path / "data")
    done = cli_here("reproduce", str(study / "results"), "--data-dir", str(tmp_path / "data"), "--quiet",
                    "--out", str(tmp_path / "again"))
    one_line_error(done, "is not the one the recorded runs used")
    assert not (tmp_path / "again").exists()


def test_a_reference_of_runs_csv_and_matrix_toml_alone_is_planned_again_and_matched_by_run_id(study, cli_here,
                                                                                             tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in ("runs.csv", "matrix.toml"):
        (reference / name).write_bytes((study / "results" / name).read_bytes())
    done = cli_here("reproduce", str(reference), "--data-dir", str(study / "data"), "--quiet", "--runs", "2",
                    "--out", str(tmp_path / "again"))
    assert done.returncode == 0, done.stderr
    assert "2 runs; 2 bit-identical" in done.stdout
    assert sorted(p.name for p in reference.iterdir()) == ["matrix.toml", "runs.csv"]


def test_the_demos_comparison_trains_nothing(study, cli_here, tmp_path, monkeypatch):
    config = tmp_path / "repro.toml"  # the same study run again elsewhere, as make demo runs its own
    config.write_text(CONFIG.format(root=study))
    assert run_matrix(config, tmp_path / "mine", study / "data", Execution(threads=1, show_progress=False)).counts == {
        "done": 4}
    before = digest(tmp_path / "mine")

    def trained(*args, **kwargs):
        raise AssertionError("--reproduced trained a run")

    monkeypatch.setattr("bench.engine.run.execute", trained)  # what every run, in a matrix or alone, trains with
    done = cli_here("reproduce", str(study / "results"), "--reproduced", str(tmp_path / "mine"), "--quiet")
    assert done.returncode == 0 and "4 runs; 4 bit-identical; all within tolerance" in done.stdout, done.stderr
    assert digest(tmp_path / "mine") == before


def test_a_difference_is_measured_in_the_seeds_spread_of_its_cell():
    recorded = pd.DataFrame({"run_id": ["a", "b", "c"], "model": ["m"] * 3, "tokenizer": ["t"] * 3,
                             "seed": [0, 1, 0], "dataset": ["d", "d", "e"], "test_bits_per_byte": [1.0, 1.2, 2.0]})
    new = recorded.assign(test_bits_per_byte=[1.04, 1.2, 2.03])
    outcome = compare(recorded, new)
    by_run = {d.run: d for d in outcome.differences}
    assert by_run["a"].in_seed_sds == pytest.approx(0.04 / 0.1414, rel=1e-3) and not by_run["a"].within
    assert by_run["b"].row()["verdict"] == "bit-identical"
    assert by_run["c"].seed_sd is None and not by_run["c"].within  # 1.5% relative, one seed: 1% tolerance
    assert not outcome.ok and "2 difference(s) beyond the tolerance" in outcome.summary()
    word = compare(recorded.assign(test_word_perplexity=[74.22, 1, 1]), recorded.assign(test_word_perplexity=[73.28, 1, 1]))
    ppl = next(d for d in word.differences if d.run == "a" and d.metric == "test_word_perplexity")
    assert ppl.relative == pytest.approx(0.0030, abs=1e-4)  # of the log perplexity: 1.3% of the perplexity


def test_a_bench_train_run_folder_is_reproduced_too(study, cli_here, tmp_path):
    trained = cli_here("train", "--model", "lstm", "--preset", "tiny", "--tokenizer", "byte", "--dataset", "toy",
                       "--data-dir", str(study / "data"), "--set", "max_steps=6", "--set", "eval_every=3",
                       "--set", "threads=1", "--out", str(tmp_path / "run"), "--quiet")
    assert trained.returncode == 0, trained.stderr
    done = cli_here("reproduce", str(tmp_path / "run"), "--data-dir", str(study / "data"), "--quiet", "--brief",
                    "--out", str(tmp_path / "again"))
    assert done.returncode == 0, done.stderr
    assert "1 runs; 1 bit-identical; all within tolerance" in done.stdout and "| valid" not in done.stdout


def test_a_number_on_one_side_only_fails_and_cells_keep_every_axis():
    recorded = pd.DataFrame({"model": ["m"] * 4, "lr": [1e-3, 1e-3, 6e-3, 6e-3], "seed": [0, 1, 0, 1],
                             "phase": [""] * 4, "run_id": ["a", "b", "c", "d"],  # runs.csv's order: axes, phase, id
                             "test_bits_per_byte": [1.0, 1.01, 2.0, 2.02]})
    new = recorded.assign(test_bits_per_byte=[1.0, float("nan"), 2.0, 2.02])
    outcome = compare(recorded, new)
    by_run = {d.run: d for d in outcome.differences}
    assert by_run["a"].seed_sd == pytest.approx(0.00707, rel=1e-3)  # lr is an axis: not pooled with lr 6e-3
    assert not by_run["b"].within and by_run["b"].row()["verdict"] == "NaN or missing on one side"
    assert not outcome.ok


def test_unreadable_references_and_the_same_folder_twice_are_one_line(study, cli_here, one_line_error, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    pd.read_csv(study / "results" / "runs.csv").drop(columns=["status"]).to_csv(broken / "runs.csv", index=False)
    one_line_error(cli_here("reproduce", str(broken), "--reproduced", str(study / "results")), "has no status column")
    one_line_error(cli_here("reproduce", str(study / "results"), "--reproduced", str(study / "results")),
                   "--reproduced is the folder being checked")
    one_line_error(cli_here("reproduce", str(study / "results"), "--jobs", "0"), "--jobs 0")
