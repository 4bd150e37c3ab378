"""docs/extending.md's code runs as the page shows it: its metric declares bits per line; the nibble scheme
(docs/examples/nibble.py) gives every text back and places each token in it; the launcher (bench_with_plugins.py)
trains the 2x2 matrix in two worker processes, which the plug-in reaches; the study script (nibble_study.py) reads
it back and builds its report, where the nibble runs are compared with the byte runs. Without the plug-in, the
report and an evaluation are refused in one line; with it, an export (which could not carry it) is refused in one
line."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import runpy
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tokenizers_study import FAMILIES, tokenizer_from_bytes, train_tokenizer
from tokenizers_study.stats import scheme_stats
from tokenizers_study.text import text_bytes

EXAMPLES = REPO / "docs" / "examples"
PAGE = REPO / "docs" / "extending.md"
MODELS, SCHEMES = ("lstm", "transformer"), ("byte", "nibble")


@pytest.fixture
def nibble():
    """docs/examples/nibble.py imported (which registers the scheme), and unregistered again after the test."""
    spec = importlib.util.spec_from_file_location("nibble", EXAMPLES / "nibble.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield FAMILIES["nibble"]
    del FAMILIES["nibble"]


def test_the_page_shows_the_example_files_themselves():
    page = PAGE.read_text()
    for example in sorted(path for path in EXAMPLES.iterdir() if path.is_file()):
        assert f'--8<-- "docs/examples/{example.name}"' in page, example.name


def test_the_pages_metric_declares_bits_per_line():
    from bench.metrics import METRICS, normalize_counts

    block = PAGE.read_text().partition("## Adding a metric")[2].partition("```python\n")[2].partition("```")[0]
    try:
        exec(block, {})
        metric = METRICS["bits_per_line"]
        counts = normalize_counts(math.log(2) * 30, n_tokens=40, n_bytes=50, n_chars=50, n_words=10, n_lines=3)
    finally:
        METRICS.pop("bits_per_line", None)
    assert counts["bits_per_line"] == pytest.approx(10.0) and (metric.name, metric.count) == ("line", "lines")


def test_the_example_scheme_gives_every_text_back_and_places_each_token(nibble, adversarial_text):
    scheme = tokenizer_from_bytes(train_tokenizer("nibble", "").to_bytes())  # saved and read back, as a run does
    ids = scheme.encode(adversarial_text)
    assert len(ids) == 2 * len(text_bytes(adversarial_text)) and ((0 <= ids) & (ids < scheme.bos_id)).all()
    assert scheme.decode(ids) == adversarial_text
    assert scheme.byte_lengths(ids).sum() == len(text_bytes(adversarial_text))
    assert scheme.char_lengths(ids).sum() == len(adversarial_text)
    stats, _ = scheme_stats(scheme, adversarial_text, "test")  # bench tokenize stats: it has no one-token bytes
    assert stats.lossless and len(scheme.fallback_ids()) == 0


def _run(args: list, cwd, env) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _run_here(script, cwd, data_dir) -> str:
    """``python SCRIPT`` in this process, whose imports are paid for already (one job: nothing spawned): its
    output. The scheme it registers is unregistered again after it."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(cwd)
        patch.setenv("BENCH_DATA_DIR", str(data_dir))
        patch.syspath_prepend(str(script.parent))  # as `python SCRIPT` puts its folder first
        try:
            runpy.run_path(str(script), run_name="__main__")
        finally:
            FAMILIES.pop("nibble", None)
            sys.modules.pop("nibble", None)
    return out.getvalue()


@pytest.fixture(scope="module")
def study(tmp_path_factory, wt2_data_dir):
    """The page's two commands, in a folder of their own: (the folder, the launcher's run, the study script's
    output). The launcher runs in a process of its own, whose two workers import it again."""
    root = tmp_path_factory.mktemp("extending")
    env = {**os.environ, "BENCH_DATA_DIR": str(wt2_data_dir)}
    launched = _run([EXAMPLES / "bench_with_plugins.py", "run-matrix", EXAMPLES / "nibble-matrix.toml", "--jobs", "2"],
                    root, env)
    return root, launched, _run_here(EXAMPLES / "nibble_study.py", root, wt2_data_dir)


@pytest.mark.slow
@pytest.mark.mirror
def test_the_launcher_trains_the_matrix_in_two_workers_that_know_the_plugin(study):
    root, launched, _ = study
    said = launched.stdout + launched.stderr
    assert "4 to run (2 at a time" in said and "nibble: 4 done" in said
    with open(root / "results" / "nibble" / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["model"], r["tokenizer"], r["status"]) for r in rows} == {(m, t, "done") for m in MODELS
                                                                          for t in SCHEMES}


@pytest.mark.slow
@pytest.mark.mirror
def test_the_nibble_runs_are_scored_on_the_same_bytes_and_compared_in_the_report(study):
    root, _, reported = study
    results = root / "results" / "nibble"
    tests = {}
    for folder in results.glob("*/result.json"):
        result = json.loads(folder.read_text())
        tests[result["spec"]["model"], result["spec"]["tokenizer"]] = (result["metrics"]["test"], result["comparable"])
    assert set(tests) == {(m, t) for m in MODELS for t in SCHEMES}
    assert all(math.isfinite(test["bits_per_byte"]) and test["lossless"] and comparable
               for test, comparable in tests.values())
    assert len({test["n_bytes"] for test, _ in tests.values()}) == 1  # one text, whatever the tokens
    assert all(tests[m, "nibble"][0]["n_tokens"] == 2 * tests[m, "byte"][0]["n_tokens"] for m in MODELS)
    table = reported.splitlines()
    assert sum(line.split()[:2] in ([m, "nibble"] for m in MODELS) for line in table) == 2, reported
    page = (root / "reports" / "nibble" / "report.md").read_text()
    compared = page.partition("## Comparisons between tokenizations")[2].partition("\n## ")[0]
    assert all(f"| {m} | tiny | wt2-nibble | chars | byte | nibble |" in compared for m in MODELS)


@pytest.mark.slow
@pytest.mark.mirror
def test_without_the_plugin_its_runs_are_refused_in_one_line(study, cli_here, one_line_error):
    root, _, _ = study
    done = cli_here("report", str(root / "results" / "nibble"), "--out", str(root / "plain-report"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: unknown tokenization scheme 'nibble'; known: byte")
    assert not (root / "plain-report").exists()
    run = next((root / "results" / "nibble").glob("lstm-tiny-nibble-*"))
    one_line_error(cli_here("eval", str(run)), "names tokenization 'nibble', which is not registered here: if a "
                                               "plug-in declares it, import that module first", code=1)


@pytest.mark.slow
@pytest.mark.mirror
def test_an_export_that_could_not_carry_the_plugin_is_refused_in_one_line(study, nibble, cli_here, one_line_error):
    root, _, _ = study
    run = next((root / "results" / "nibble").glob("lstm-tiny-nibble-*"))
    done = cli_here("export", str(run), str(root / "exported"))
    one_line_error(done, "cannot export: tokenization 'nibble' is a plug-in (NibbleTokenizer in nibble)",
                   "give NibbleTokenizer an hf_tokenizer_json()", code=1)
    assert not (root / "exported").exists()

