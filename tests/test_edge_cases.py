"""What a hostile tester found that is not a plain refusal (tests/test_bad_inputs.py holds those): numbers
recorded as they were computed, caches that are rebuilt rather than trusted, data folders that stay readable."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pytest

from bench.engine.run import train
from bench.engine.spec import RunSpec
from tests.test_bad_inputs import FAST, call


@pytest.fixture(scope="module")
def toy(tmp_path_factory, make_toy_corpus):
    root = tmp_path_factory.mktemp("edges")
    data = make_toy_corpus(root)
    run = root / "run"
    train(RunSpec(model="lstm", tokenizer="byte", dataset="toy", overrides=FAST, data_dir=str(data),
                  out_dir=str(run)), show_progress=False)
    return root, data, run


def test_a_user_corpus_records_its_own_name_and_is_readable_by_others(toy):
    root, data, _ = toy
    manifest = json.loads((data / "toy" / "manifest.json").read_text())
    assert manifest["corpus"] == "toy"  # not the scratch folder it was written in
    assert (data / "toy").stat().st_mode & stat.S_IROTH  # as mkdir makes it, not mkdtemp's 0700


def test_one_corrupt_manifest_does_not_hide_the_other_corpora(toy, tmp_path):
    import shutil

    _, data, _ = toy
    copy = tmp_path / "data"
    for name in ("toy", "toy2"):
        shutil.copytree(data / "toy", copy / name)
    (copy / "toy2" / "manifest.json").write_text("[]")
    code, out, err = call(["data", "list", "--data-dir", str(copy), "--json"])
    rows = json.loads(out)
    assert code == 0, err
    assert {r["corpus"] for r in rows if r["present"]} >= {"toy"}
    assert any(r["corpus"] == "toy2" and r["status"].startswith("corrupt") for r in rows)


def test_more_streams_than_tokens_is_refused_not_scored_without_context(toy):
    _, data, run = toy
    code, out, err = call(["eval", str(run), "--split", "valid", "--streams", "1000000000", "--json"])
    assert code == 1 and out == "" and err.startswith("error: --streams 1,000,000,000 is more than the"), err
    code, out, err = call(["eval", str(run), "--split", "valid", "--streams", "3", "--json"])
    assert code == 0 and json.loads(out)["layout"]["streams"] == 3, err


def test_token_losses_go_to_the_name_given(toy, tmp_path):
    _, _, run = toy
    (tmp_path / "losses.npy").write_text("precious")
    code, _, err = call(["eval", str(run), "--split", "valid", "--dump-token-losses", str(tmp_path / "losses")])
    assert code == 0, err
    assert (tmp_path / "losses.npy").read_text() == "precious"  # np.save would have added .npy and replaced it
    assert np.load(tmp_path / "losses").ndim == 1


def test_a_cut_short_encoded_cache_is_encoded_again(toy):
    _, data, run = toy
    before = json.loads(call(["eval", str(run), "--split", "test", "--json"])[1])["metrics"]
    cached = next((data / "cache" / "encoded" / "toy").glob("test.*.npy"))
    short = np.array(np.load(cached)[:10])
    with open(cached, "wb") as handle:
        np.save(handle, short)
    code, out, err = call(["eval", str(run), "--split", "test", "--json"])
    assert code == 0 and "encoding again" in err, err
    after = json.loads(out)["metrics"]
    assert after["n_tokens"] == before["n_tokens"] and after["bits_per_byte"] == before["bits_per_byte"]


def test_tokenize_stats_calls_a_user_corpus_a_user_corpus(toy):
    _, data, _ = toy
    code, out, _ = call(["tokenize", "stats", "--dataset", "toy", "--schemes", "byte", "--splits", "valid",
                         "--data-dir", str(data)])
    assert code == 0 and "USER CORPUS: toy has no official copy" in out and "UNVERIFIED" not in out


def test_baselines_never_print_a_negative_rate_and_rebuild_a_corrupt_cache(toy, tmp_path):
    from bench.data.compressors import compressor_baselines
    from bench.data.user import add_user_corpus

    root, data, _ = toy
    (tmp_path / "ab.txt").write_text("ab\n")
    add_user_corpus("short", {"train": root / "train.txt", "valid": tmp_path / "ab.txt", "test": root / "test.txt"},
                    data)
    table = compressor_baselines("short", ("valid",), data)
    assert all(b.bits_per_byte_primed is None or b.bits_per_byte_primed > 0 for b in table.baselines)
    cache = next((data / "cache" / "baselines").glob("short-*.json"))
    cache.write_text("garbage")
    assert compressor_baselines("short", ("valid",), data).baselines == table.baselines
    both = compressor_baselines("short", ("train", "valid"), data)  # other splits asked: not the cached table
    assert {b.split for b in both.baselines} == {"train", "valid"}


def test_an_mfu_above_the_peak_is_not_printed_as_a_percentage():
    code, out, err = call(["speed", "--model", "lstm", "--steps", "1", "--warmup", "0", "--set", "emsize=16",
                           "--set", "nhid=16", "--set", "bptt=8", "--set", "batch_size=2", "--peak-tflops", "1e-12"])
    assert code == 0, err
    train_line = next(line for line in out.splitlines() if line.startswith("train "))  # "train [the --set]: ..."
    assert "MFU not shown: the measured rate is above the peak" in train_line and "%" not in train_line


def test_a_cluster_job_of_several_tasks_is_read_from_its_first_task():
    from bench.study.matrix.launch import wait_for
    from bench.study.matrix.run_status import Attempt, RunStatus

    class Job:  # submitit's multi-task job: result() refuses, results() has one entry per task
        job_id = "1"

        def result(self):
            raise RuntimeError("You should use `results()` if your job has subtasks.")

        def results(self):
            return [[Attempt("run", RunStatus.DONE).to_json()], [Attempt("run", RunStatus.DONE).to_json()]]

    class Planned:
        run_dir = "run"

    [(_, records)] = list(wait_for([Job()], [[Planned()]]))
    assert [r.status for r in records] == [RunStatus.DONE]


def test_a_report_of_runs_scored_on_valid_only_says_so(toy, tmp_path):
    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.report.report import build_report
    from bench.errors import BenchError
    from tests.test_bad_inputs import MATRIX

    _, data, _ = toy
    config = tmp_path / "v.toml"
    config.write_text(MATRIX.replace("nhid = 16", 'nhid = 16\nfinal_eval_splits = "valid"'))
    run_matrix(config, tmp_path / "results", data_dir=data, execution=Execution(show_progress=False))
    with pytest.raises(BenchError, match="no finished run was scored on the test split"):
        build_report(tmp_path / "results", tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_a_report_does_not_show_a_config_that_changed_since_the_runs(toy, tmp_path):
    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.report.report import build_report
    from tests.test_bad_inputs import MATRIX

    _, data, _ = toy
    config = tmp_path / "m.toml"
    config.write_text(MATRIX)
    run_matrix(config, tmp_path / "results", data_dir=data, execution=Execution(show_progress=False))
    (tmp_path / "results" / "matrix.toml").write_text("garbage [[[")
    page = build_report(tmp_path / "results", tmp_path / "report").read_text()
    assert "is missing or has changed since the runs were made" in page and "garbage [[[" not in page


def test_reading_a_run_needs_no_readable_spec_json_and_a_loose_checkpoint_gets_no_marginal_file(toy, tmp_path):
    import shutil

    _, _, run = toy
    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged)
    (damaged / "spec.json").write_text("garbage")
    code, _, err = call(["eval", str(damaged), "--split", "valid"])
    assert code == 0, err  # eval reads best.pt, which carries the configuration; it writes nothing here
    bpe = tmp_path / "bpe"
    train(RunSpec(model="lstm", tokenizer="bpe:300", dataset="toy", overrides=FAST, data_dir=str(toy[1]),
                  out_dir=str(bpe)), show_progress=False)
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(bpe / "best.pt", loose / "model.pt")
    (loose / "notes.txt").write_text("the user's own folder")
    code, _, err = call(["eval", str(loose / "model.pt"), "--split", "valid", "--marginal", "2", "--marginal-lines",
                         "2"])
    assert code == 0 and "the estimate is not saved" in err, err
    assert sorted(p.name for p in loose.iterdir()) == ["model.pt", "notes.txt"]


def test_a_finished_run_found_in_another_folder_is_reported_where_it_is(toy, tmp_path):
    import shutil

    _, data, run = toy
    moved = tmp_path / "moved"
    shutil.copytree(run, moved)
    result = train(RunSpec(model="lstm", tokenizer="byte", dataset="toy", overrides=FAST, data_dir=str(data),
                           out_dir=str(moved)), show_progress=False)
    assert result.spec.out_dir == str(moved)


def test_an_overflowing_perplexity_is_written_as_strict_json_and_read_back(tmp_path):
    import math

    from bench.engine.result import SplitMetrics
    from bench.fileio import write_json_atomic

    metrics = SplitMetrics.score(16_500.0, 3000, {"n_bytes": 3000, "n_chars": 3000, "n_words": 1, "n_lines": 1},
                                 1.0, True)  # one 3,000-letter word: exp(16,500 nats) overflows
    assert math.isinf(metrics.word_perplexity)
    write_json_atomic(tmp_path / "m.json", {"metrics": metrics.__dict__})
    text = (tmp_path / "m.json").read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))  # strict parsers read it
    from bench.engine.result import _build

    assert math.isinf(_build(SplitMetrics, json.loads(text)["metrics"]).word_perplexity)


def test_sampling_a_word_model_keeps_the_space_and_shows_the_prompt_as_the_model_saw_it(toy):
    from bench.engine.score.inference import sample

    root, data, _ = toy
    run = root / "words"
    train(RunSpec(model="lstm", tokenizer="word:40", dataset="toy", overrides=FAST, data_dir=str(data),
                  out_dir=str(run)), show_progress=False)
    seen, continuation = sample(run, "Zebra quux the", max_tokens=6)
    assert seen.startswith("<unk> <unk> the")  # the words outside the vocabulary, as the model got them
    assert continuation.startswith((" ", "\n"))  # not glued to the prompt's last word


def test_a_changed_user_corpus_file_stays_reported_until_added_again(toy, tmp_path):
    import shutil

    _, data, _ = toy
    copy = tmp_path / "data"
    shutil.copytree(data / "toy", copy / "toy")
    with open(copy / "toy" / "valid.txt", "a") as handle:
        handle.write("a tampered line\n")
    for _ in range(2):  # the second verify still sees it: the change is not adopted
        code, out, _ = call(["data", "verify", "toy", "--data-dir", str(copy)])
        assert code == 1 and "changed since it was added" in out and "add the corpus again" in out


@pytest.fixture(scope="module")
def finished_matrix(toy, tmp_path_factory):
    """A toy matrix run to its end, to be copied by each test that edits it."""
    from bench.study.matrix.execute import Execution, run_matrix
    from tests.test_bad_inputs import MATRIX

    root = tmp_path_factory.mktemp("finished")
    (root / "m.toml").write_text(MATRIX)
    run_matrix(root / "m.toml", root / "results", data_dir=toy[1], execution=Execution(show_progress=False))
    return root / "results"


def _copy_of(results, tmp_path):
    import shutil

    return Path(shutil.copytree(results, tmp_path / "results"))


def test_a_report_is_the_run_folders_whatever_runs_csv_says(finished_matrix, tmp_path):
    """runs.csv is an index written for users and tools: deleted, torn or edited, the report prints the same."""
    import re

    import pandas as pd

    from bench.study.report.report import build_report

    results = _copy_of(finished_matrix, tmp_path)
    index = results / "runs.csv"

    def report(name: str) -> str:
        text = build_report(results, tmp_path / name).read_text()
        return re.sub(r"Generated \S+", "Generated", text)

    whole = report("whole")
    pd.read_csv(index).drop(columns=["seed", "data_sha256_test"]).assign(test_bits_per_byte=0.5).to_csv(index)
    assert report("edited") == whole
    index.write_text(index.read_text()[:-40] + "\n")
    assert report("torn") == whole
    index.unlink()
    assert report("deleted") == whole


@pytest.mark.parametrize("edit,fragment", [
    (lambda m: m["test"].update(bits_per_byte=0.5), "test bits_per_byte is 0.5 where its total NLL and counts give"),
    (lambda m: m["test"].update(bits_per_byte="nan"), "test bits_per_byte is nan where"),
    (lambda m: m["test"].update(total_nll_nats=float("nan")), "test total_nll_nats is nan, not a finite"),
    (lambda m: m.update(test="abc"), "is not a readable result"),
    (lambda m: m["test"].update(n_bytes="many"), "is not a readable result"),
], ids=["edited", "nan", "nan-nll", "text-metrics", "text-count"])
def test_a_result_whose_numbers_were_edited_is_refused_by_the_report_and_compare(finished_matrix, tmp_path, edit,
                                                                                  fragment):
    """The report and compare draw from result.json: numbers its own total NLL and counts do not give were drawn
    as they stood (a NaN bits per byte), and metrics that are not an object were an AttributeError traceback."""
    results = _copy_of(finished_matrix, tmp_path)
    path = next(results.glob("*/result.json"))
    content = json.loads(path.read_text())
    edit(content["metrics"])
    path.write_text(json.dumps(content))
    for argv in (["report", str(results), "--out", str(tmp_path / "report")], ["compare", str(results), str(results)]):
        code, _, err = call(argv)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code != 0 and len(lines) == 1 and fragment in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "report").exists()


def test_the_remedy_for_an_edited_result_scores_the_run_anew(toy, finished_matrix, tmp_path):
    from tests.test_bad_inputs import MATRIX

    results = _copy_of(finished_matrix, tmp_path)
    path = next(results.glob("*/result.json"))
    original = json.loads(path.read_text())
    path.unlink()  # as the refusal says
    (tmp_path / "m.toml").write_text(MATRIX)
    code, _, err = call(["run-matrix", str(tmp_path / "m.toml"), "--results", str(results), "--data-dir",
                         str(toy[1]), "--quiet"])
    assert code == 0, err
    scored = json.loads(path.read_text())["metrics"]
    for split, metrics in original["metrics"].items():  # the same numbers (eval seconds aside): scored anew
        assert {k: v for k, v in scored[split].items() if "eval_" not in k} == \
            {k: v for k, v in metrics.items() if "eval_" not in k}
