"""The Python API section of docs/study.md runs as written, in a fresh folder beside a checkout's configs, with WikiText-2
fetched; and bench.api is what its docstring lists."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


def docs_snippet() -> str:
    section = (REPO / "docs" / "study.md").read_text().split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
@pytest.mark.mirror
def test_the_docs_python_api_section_runs_as_written(tmp_path, wt2_data_dir):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    env = {**os.environ, "BENCH_DATA_DIR": str(wt2_data_dir), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", docs_snippet()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "attack.png").stat().st_size > 10_000
    assert (tmp_path / "runs" / "api-lstm" / "result.json").is_file()
    table = done.stdout.splitlines()
    assert any("word-open:300" in line for line in table) and any(line.startswith("0 ") for line in table)


def test_the_api_is_what_its_docstring_lists():
    from bench import api

    listed = set(re.findall(r"api\.(\w+)\(", api.__doc__))
    assert listed <= set(api.__all__) and all(callable(getattr(api, name)) for name in api.__all__)


# ---- every function of bench.api keeps the command line's rules (issue 44) ------------------------------------------

LSTM_SETTINGS = {"emsize": 16, "nhid": 16, "bptt": 16, "batch_size": 4, "max_steps": 4, "eval_every": 2,
                 "checkpoint_every": 2, "eval_streams": 4, "eval_chunk": 32, "eval_max_tokens": 300}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make_toy_corpus):
    """A finished tiny run (its folder) and the data folder of its toy corpus."""
    from bench import api

    root = tmp_path_factory.mktemp("api")
    data = make_toy_corpus(root)
    api.train(api.RunSpec(model="lstm", tokenizer="byte", dataset="toy", overrides=LSTM_SETTINGS, data_dir=str(data),
                          out_dir=str(root / "run")), show_progress=False)
    return root / "run", data


def _spec(data, out, **changes):
    from bench.engine.spec import RunSpec

    return RunSpec(**{**dict(model="lstm", tokenizer="byte", dataset="toy", overrides=LSTM_SETTINGS,
                             data_dir=str(data), out_dir=str(out)), **changes})


BAD_CALLS = {  # name -> (call(api, run folder, data folder, a new path), a fragment of its one-line refusal)
    "dump onto the run's best.pt": (lambda a, r, d, n: a.evaluate(r, split="valid", dump=r / "best.pt"),
                                    "was not written by this command"),
    "dump onto the run's result.json": (lambda a, r, d, n: a.evaluate(r, split="valid", dump=r / "result.json"),
                                        "was not written by this command"),
    "dump onto the run's spec.json": (lambda a, r, d, n: a.evaluate(r, dump=str(r / "spec.json")),
                                      "was not written by this command"),
    "streams 0": (lambda a, r, d, n: a.evaluate(r, streams=0), "--streams must be a whole number"),
    "streams as text": (lambda a, r, d, n: a.evaluate(r, streams="4"), "--streams must be a whole number"),
    "chunk 0": (lambda a, r, d, n: a.evaluate(r, chunk=0), "--chunk must be a whole number"),
    "an unknown split": (lambda a, r, d, n: a.evaluate(r, split="dev"), "--split must be"),
    "evaluate None": (lambda a, r, d, n: a.evaluate(None), "the checkpoint must be a path"),
    "seed -1": (lambda a, r, d, n: a.plan(_spec(d, n, seed=-1)), "seed must be an integer"),
    "seed '0'": (lambda a, r, d, n: a.plan(_spec(d, n, seed="0")), "seed must be an integer"),
    "seed 0.5": (lambda a, r, d, n: a.plan(_spec(d, n, seed=0.5)), "seed must be an integer"),
    "an unknown override": (lambda a, r, d, n: a.plan(_spec(d, n, overrides={"nope": 1})), "unknown setting 'nope'"),
    "overrides as a list": (lambda a, r, d, n: a.plan(_spec(d, n, overrides=[1])), "RunSpec.overrides must be"),
    "a spec as a dict": (lambda a, r, d, n: a.plan(dict(model="lstm", dataset="toy")), "a run must be a RunSpec"),
    "plan None": (lambda a, r, d, n: a.plan(None), "a run must be a RunSpec"),
    "train None": (lambda a, r, d, n: a.train(None), "a run must be a RunSpec"),
    "train a dict": (lambda a, r, d, n: a.train(dict(model="lstm")), "a run must be a RunSpec"),
    "model None": (lambda a, r, d, n: a.plan(_spec(d, n, model=None)), "RunSpec.model must be a str"),
    "a bad tokenizer name": (lambda a, r, d, n: a.plan(_spec(d, n, tokenizer="bpe:x")), "needs a vocabulary size"),
    "train with progress 'no'": (lambda a, r, d, n: a.train(_spec(d, n), show_progress="no"),
                                 "show_progress must be True or False"),
    "export None": (lambda a, r, d, n: a.export(None, n), "RUN must be a path"),
    "export into the run's folder": (lambda a, r, d, n: a.export(r, r / "hf"), "would be written inside another command's"),
    "export over the run": (lambda a, r, d, n: a.export(r, r), "exists; bench export writes a new folder"),
    "export in a format as a number": (lambda a, r, d, n: a.export(r, n, format=3), "--format must be"),
    "export of a data folder": (lambda a, r, d, n: a.export(d, n), "is not a run folder"),
    "run_matrix None": (lambda a, r, d, n: a.run_matrix(None), "the matrix config must be a path"),
    "run_matrix with an execution as text": (lambda a, r, d, n: a.run_matrix(n, execution="fast"),
                                             "execution must be an Execution"),
    "load_runs None": (lambda a, r, d, n: a.load_runs(None), "the results folder must be a path"),
    "load_runs 3": (lambda a, r, d, n: a.load_runs(3), "the results folder must be a path"),
    "build_report None": (lambda a, r, d, n: a.build_report(None), "the results folder must be a path"),
    "attack_figure None": (lambda a, r, d, n: a.attack_figure(None), "the runs must be a DataFrame"),
    "attack_figure of rows without its columns": (lambda a, r, d, n: a.attack_figure(__import__("pandas").DataFrame(
        {"model": ["lstm"]})), "the runs have no column"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_each_api_function_refuses_bad_arguments_as_the_command_line_does(name, trained, tmp_path):
    """A BenchError with one line (the command line's message where it has one), never a TypeError from inside,
    and nothing written: the run's own files unchanged, no new folder."""
    from bench import api
    from bench.errors import BenchError

    run, data = trained
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    call, fragment = BAD_CALLS[name]
    with pytest.raises(BenchError) as refused:
        call(api, run, data, tmp_path / "new")
    assert fragment in str(refused.value) and "\n" not in str(refused.value)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert not (tmp_path / "new").exists()


def test_plan_writes_no_run_folder_and_attack_figure_of_rows_without_numbers_is_refused(trained, tmp_path):
    from bench import api
    from bench.errors import BenchError

    run, data = trained
    planned = api.plan(_spec(data, tmp_path / "planned"))
    assert planned.spec.out_dir == str(tmp_path / "planned") and not (tmp_path / "planned").exists()
    import pandas as pd

    nan = float("nan")
    runs = pd.DataFrame({"model": ["lstm"], "tokenizer": ["byte"], "dataset": ["toy"], "match": ["chars"],
                         "seed": [0], "flags": [""], "test_n_bytes": [1000], "test_n_words": [180],
                         "test_bits_per_byte": [nan], "test_token_perplexity": [nan],
                         "test_word_perplexity": [nan]})
    with pytest.raises(BenchError, match="nothing to draw"):
        api.attack_figure(runs)
    drawn = api.attack_figure(runs.assign(test_bits_per_byte=1.5, test_token_perplexity=2.8,
                                          test_word_perplexity=300.0))
    assert drawn.axes
