"""`bench compare A B`: two runs, or two matrices' results, side by side on the same text."""

from __future__ import annotations

import json

import pytest

from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.study.execute import Execution, run_matrix
from tests.test_bad_inputs import FAST, MATRIX, call


@pytest.fixture(scope="module")
def runs(tmp_path_factory, make_toy_corpus):
    root = tmp_path_factory.mktemp("compare")
    data = make_toy_corpus(root)
    folders = {}
    for tokenizer in ("byte", "word-open:200"):
        folders[tokenizer] = root / tokenizer.replace(":", "")
        train(RunSpec(model="lstm", tokenizer=tokenizer, dataset="toy", overrides={**FAST, "dump_token_losses": True},
                      data_dir=str(data), out_dir=str(folders[tokenizer])), show_progress=False)
    return root, data, folders


def test_two_runs_side_by_side_with_the_difference_and_its_interval_over_documents(runs):
    _, _, folders = runs
    code, out, err = call(["compare", str(folders["byte"]), str(folders["word-open:200"]), "--json"])
    assert code == 0, err
    rows = {row["metric"]: row for row in json.loads(out)["rows"]}
    bpb = rows["bits/byte"]
    a = json.loads((folders["byte"] / "result.json").read_text())["metrics"]["test"]["bits_per_byte"]
    assert bpb["A"] == a and bpb["A - B"] == pytest.approx(bpb["A"] - bpb["B"])
    low, high = json.loads(bpb["95% interval"])
    assert low < bpb["A - B"] < high  # a paired bootstrap over the test text's documents
    assert "token ppl (NOT comparable)" in rows
    notes = " ".join(json.loads(out)["notes"])
    assert "covers the sample of text only" in notes and "no p-value" in notes


def test_two_matrices_cell_by_cell_with_welch_t_over_seeds(runs, tmp_path):
    _, data, _ = runs
    for name, seeds in (("a", "[0, 1]"), ("b", "[2, 3]")):
        (tmp_path / f"{name}.toml").write_text(MATRIX.replace('name = "toy"', f'name = "{name}"')
                                               .replace("seed = [0]", f"seed = {seeds}"))
        run_matrix(tmp_path / f"{name}.toml", tmp_path / name, data_dir=data, execution=Execution(show_progress=False))
    code, out, err = call(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    assert row["seeds"] == "2 / 2" and row["p"] is not None and row["p (Holm)"] == row["p"]
    assert row["A - B"] == pytest.approx(row["A bits/byte"] - row["B bits/byte"], abs=1e-4)


def test_runs_on_different_texts_or_of_different_kinds_are_refused(runs, tmp_path):
    root, _, folders = runs
    other = tmp_path / "other"
    import shutil

    shutil.copytree(folders["byte"], other)
    result = json.loads((other / "result.json").read_text())
    result["data"]["splits"]["test"]["sha256"] = "0" * 64
    (other / "result.json").write_text(json.dumps(result))
    code, _, err = call(["compare", str(folders["byte"]), str(other)])
    assert code == 1 and "were scored on different test texts" in err
    code, _, err = call(["compare", str(folders["byte"]), str(root)])
    assert code == 1 and "give two run folders" in err


def test_runs_stopped_as_not_learning_are_left_out_and_named(runs, tmp_path):
    import pandas as pd

    _, data, _ = runs
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(MATRIX.replace('name = "toy"', f'name = "{name}"')
                                               .replace("seed = [0]", "seed = [0, 1]"))
        run_matrix(tmp_path / f"{name}.toml", tmp_path / name, data_dir=data, execution=Execution(show_progress=False))
    table = pd.read_csv(tmp_path / "b" / "runs.csv")
    stuck = table.iloc[[1]].assign(status="not-learning", error="TrainingNotLearning: not learning: ...")
    stuck = stuck[["model", "tokenizer", "dataset", "seed", "match", "run_dir", "status", "error"]]
    pd.concat([table.iloc[[0]], stuck]).to_csv(tmp_path / "b" / "runs.csv", index=False)
    code, out, err = call(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    assert row["seeds"] == "2 / 1"  # the stopped run is no seed of its cell
    assert f"NOT LEARNING, left out: B has 1 run(s) stopped at their unigram floor ({table['run_dir'][1]})" in \
        json.loads(out)["notes"]
