"""`bench compare A B`: two runs, or two matrices' results, side by side on the same text."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.study.matrix.execute import Execution, run_matrix
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


@pytest.fixture(scope="module")
def matrices(runs, tmp_path_factory):
    """Two results folders of one cell, seeds 0 and 1 in a, 2 and 3 in b."""
    _, data, _ = runs
    root = tmp_path_factory.mktemp("matrices")
    for name, seeds in (("a", "[0, 1]"), ("b", "[2, 3]")):
        (root / f"{name}.toml").write_text(MATRIX.replace('name = "toy"', f'name = "{name}"')
                                           .replace("seed = [0]", f"seed = {seeds}"))
        run_matrix(root / f"{name}.toml", root / name, data_dir=data, execution=Execution(show_progress=False))
    return root / "a", root / "b"


def strict_json(text: str) -> dict:
    """JSON as the standard has it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in --json output: not JSON"))


def set_test_metric(run_dir, key: str, value) -> None:
    """Damage a run's result.json the way a diverged run or a hand edit does (the schema writes nan as "nan")."""
    result = json.loads((run_dir / "result.json").read_text())
    result["metrics"]["test"][key] = value
    (run_dir / "result.json").write_text(json.dumps(result))


def rescore_test(run_dir, nats_per_word: float) -> None:
    """Give a run's test split another total NLL, every number derived from it as the scorer derives them."""
    from bench.metrics import normalize_counts

    result = json.loads((run_dir / "result.json").read_text())
    test = result["metrics"]["test"]
    counts = {k: test[k] for k in ("n_bytes", "n_chars", "n_words", "n_lines")}
    scored = normalize_counts(nats_per_word * test["n_words"], test["n_tokens"], **counts)
    test.update({k: v if math.isfinite(v) else str(v) for k, v in scored.items()})
    (run_dir / "result.json").write_text(json.dumps(result))


def test_two_matrices_cell_by_cell_with_welch_t_over_seeds(matrices):
    code, out, err = call(["compare", *map(str, matrices), "--json"])
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    assert row["seeds"] == "2 / 2" and row["p"] is not None and row["p (Holm)"] == row["p"]
    assert row["A - B"] == pytest.approx(row["A bits/byte"] - row["B bits/byte"], abs=1e-4)


def test_runs_on_different_texts_or_of_different_kinds_are_refused(runs, tmp_path):
    root, _, folders = runs
    other = tmp_path / "other"
    shutil.copytree(folders["byte"], other)
    result = json.loads((other / "result.json").read_text())
    result["data"]["splits"]["test"]["sha256"] = "0" * 64
    (other / "result.json").write_text(json.dumps(result))
    code, _, err = call(["compare", str(folders["byte"]), str(other)])
    assert code == 1 and "were scored on different test texts" in err
    code, _, err = call(["compare", str(folders["byte"]), str(root)])
    assert code == 1 and "give two run folders" in err


def test_runs_stopped_as_not_learning_are_left_out_and_named(runs, tmp_path):
    _, data, _ = runs
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(MATRIX.replace('name = "toy"', f'name = "{name}"')
                                               .replace("seed = [0]", "seed = [0, 1]"))
        run_matrix(tmp_path / f"{name}.toml", tmp_path / name, data_dir=data, execution=Execution(show_progress=False))
    stuck = sorted((tmp_path / "b").glob("*-s1-*"))[0]  # as a run stopped at its floor leaves its folder
    (stuck / "result.json").unlink()
    status = json.loads((stuck / "status.json").read_text())
    (stuck / "status.json").write_text(json.dumps({**status, "status": "not-learning",
                                                   "error": "TrainingNotLearning: not learning: ..."}))
    code, out, err = call(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    assert row["seeds"] == "2 / 1"  # the stopped run is no seed of its cell
    assert f"NOT LEARNING, left out: B has 1 run(s) stopped at their unigram floor ({stuck.name})" in \
        json.loads(out)["notes"]


@pytest.mark.parametrize("damage", ["deleted", "torn", "edited"])
def test_runs_csv_is_an_index_compare_never_reads(matrices, tmp_path, damage):
    """The run folders are the truth: runs.csv deleted, torn or edited changes nothing compare prints."""
    import pandas as pd

    a, b = matrices
    shutil.copytree(b, tmp_path / "b")
    index = tmp_path / "b" / "runs.csv"
    if damage == "deleted":
        index.unlink()
    elif damage == "torn":
        index.write_text(index.read_text()[:-40] + "\n")
    else:
        table = pd.read_csv(index)
        table.drop(columns=["seed", "data_sha256_test", "test_lossless"]).assign(test_bits_per_byte=0.5).to_csv(
            index, index=False)
    code, out, err = call(["compare", str(a), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    assert out.replace(str(tmp_path / "b"), str(b)) == call(["compare", str(a), str(b), "--json"])[1]


def test_a_result_whose_bits_per_byte_was_made_nan_is_refused_never_compared(matrices, tmp_path):
    """A NaN its own total NLL does not give is damage, not a result: it once became a row with p = 1."""
    a, b = matrices
    shutil.copytree(b, tmp_path / "b")
    first = sorted(p.parent for p in (tmp_path / "b").glob("*/result.json"))[0]
    set_test_metric(first, "bits_per_byte", "nan")
    code, out, err = call(["compare", str(a), str(tmp_path / "b"), "--json"])
    assert code == 1 and out == "" and err.count("\n") == 1 and first.name in err
    assert "test bits_per_byte is nan where its total NLL and counts give" in err


def test_two_runs_with_a_metric_that_is_not_a_number_leave_it_out_with_a_note(runs, tmp_path):
    _, _, folders = runs
    shutil.copytree(folders["word-open:200"], tmp_path / "b")
    rescore_test(tmp_path / "b", 720.0)  # a perplexity too large for a float: exp(720) per word
    code, out, err = call(["compare", str(folders["byte"]), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    compared = strict_json(out)
    assert "word ppl" not in {row["metric"] for row in compared["rows"]}
    assert any(note.startswith("NOT A NUMBER, left out: word ppl (A ") and "B inf" in note
               for note in compared["notes"])
    set_test_metric(tmp_path / "b", "bits_per_byte", "nan")
    code, out, err = call(["compare", str(folders["byte"]), str(tmp_path / "b")])
    assert code == 1 and "test bits_per_byte is nan where its total NLL and counts give" in err


@pytest.fixture
def a_metric_shown_before_bits_per_byte():
    """A comparable metric declared first of all, so that bits per byte is not the first row of bench compare."""
    from bench import metrics
    from bench.metrics import Metric

    declared = dict(metrics.METRICS)
    first = Metric("nats_per_byte", "nats/byte", "nats per byte", lambda c: c.per(c.bytes), True,
                   "L / UTF-8 bytes of the text")
    metrics.METRICS.clear()  # in place: every module reads this one registry
    metrics.METRICS.update({first.key: first, **declared})
    yield first
    metrics.METRICS.clear()
    metrics.METRICS.update(declared)


def test_the_interval_is_that_of_bits_per_byte_whichever_row_comes_first(runs, a_metric_shown_before_bits_per_byte):
    _, _, folders = runs
    code, out, err = call(["compare", str(folders["byte"]), str(folders["word-open:200"]), "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[0]["metric"] == a_metric_shown_before_bits_per_byte.label
    by_metric = {row["metric"]: row for row in rows}
    low, high = json.loads(by_metric["bits/byte"]["95% interval"])
    assert low < by_metric["bits/byte"]["A - B"] < high
    assert [row["metric"] for row in rows if row.get("95% interval", "") != ""] == ["bits/byte"]


def test_no_interval_names_the_side_that_saved_no_per_token_losses(runs, tmp_path):
    _, _, folders = runs
    shutil.copytree(folders["word-open:200"], tmp_path / "b")
    (tmp_path / "b" / "token_nll.test.npy").unlink()
    code, out, err = call(["compare", str(folders["byte"]), str(tmp_path / "b"), "--json"])
    assert code == 0, err
    compared = json.loads(out)
    assert {row["metric"]: row for row in compared["rows"]}["bits/byte"]["95% interval"] == "-"
    note = next(note for note in compared["notes"] if note.startswith("One trained model a side"))
    assert f"no per-token losses were saved for {tmp_path / 'b'}" in note and "no p-value" in note


@pytest.fixture(scope="module")
def few_documents(tmp_path_factory, make_text):
    """Two runs with per-token losses on a corpus whose test text is three WikiText articles: too few to resample."""
    from bench.data.user import add_user_corpus

    root = tmp_path_factory.mktemp("few")
    paths = {}
    for i, split in enumerate(("train", "valid", "test")):
        lines = make_text(n_lines=300 if split == "train" else 60, seed=i).splitlines()
        paths[split] = root / f"{split}.txt"
        articles = (f" = {split.capitalize()} article {k} = \n" + "\n".join(lines[k::3]) + "\n" for k in range(3))
        paths[split].write_text("".join(articles))
    add_user_corpus("toy", paths, root / "data")
    folders = [root / f"seed{seed}" for seed in (0, 1)]
    for seed, folder in enumerate(folders):
        train(RunSpec(model="lstm", tokenizer="byte", dataset="toy", seed=seed,
                      overrides={**FAST, "dump_token_losses": True}, data_dir=str(root / "data"),
                      out_dir=str(folder)), show_progress=False)
    return folders


def test_no_interval_over_a_text_of_too_few_documents_says_so(few_documents):
    from bench.data.documents import MIN_RESAMPLED

    code, out, err = call(["compare", *map(str, few_documents), "--json"])
    assert code == 0, err
    compared = json.loads(out)
    assert {row["metric"]: row for row in compared["rows"]}["bits/byte"]["95% interval"] == "-"
    note = next(note for note in compared["notes"] if note.startswith("One trained model a side"))
    assert f"the test text has 3 articles, fewer than the {MIN_RESAMPLED} a bootstrap needs" in note
    assert "dump_token_losses" not in note  # both runs saved them
