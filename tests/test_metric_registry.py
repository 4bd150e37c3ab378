"""A metric is declared once, as one entry of bench.metrics.METRICS: a toy metric added there (and nowhere else)
reaches the report's main table and its definitions, the CSV and LaTeX exports, `bench compare` and the CLI's
tables, also for results written before it was declared (it is computed from their total NLL and counts)."""

from __future__ import annotations

import csv
import json
import math

import pytest

from bench import metrics
from bench.metrics import Metric
from bench.study.matrix.execute import Execution, run_matrix
from tests.test_bad_inputs import FAST, MATRIX, call

TOY = Metric("nats_per_byte", "nats/byte", "nats per byte", lambda c: c.per(c.bytes), True,
             "L / UTF-8 bytes of the text")


@pytest.fixture
def toy_metric(monkeypatch):
    """The one place the toy metric is declared; gone again after the test."""
    monkeypatch.setitem(metrics.METRICS, TOY.key, TOY)
    return TOY


@pytest.fixture(scope="module")
def finished(tmp_path_factory, make_toy_corpus):
    """A one-run matrix finished before the toy metric was declared: its result.json does not hold it."""
    root = tmp_path_factory.mktemp("registry")
    data = make_toy_corpus(root)
    (root / "m.toml").write_text(MATRIX)
    run_matrix(root / "m.toml", root / "results", data_dir=data, execution=Execution(show_progress=False))
    run = next((root / "results").glob("*/result.json")).parent
    test = json.loads((run / "result.json").read_text())["metrics"]["test"]
    assert TOY.key not in test
    return root, data, run, test["total_nll_nats"] / test["n_bytes"]


def test_a_declared_metric_is_a_column_of_the_main_table_its_exports_and_a_definition(toy_metric, finished,
                                                                                      tmp_path):
    from bench.study.report.report import build_report

    root, _, _, value = finished
    page = build_report(root / "results", tmp_path / "report").read_text()
    header = next(line for line in page.splitlines() if line.startswith("|") and "bits/byte" in line)
    assert "| nats/byte |" in header
    assert "- nats/byte = L / UTF-8 bytes of the text." in page
    with open(tmp_path / "report" / "main-table.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert float(row["nats/byte"]) == pytest.approx(value, abs=5e-5)  # one seed: the value, 4 decimals
    assert "nats/byte" in (tmp_path / "report" / "main-table.tex").read_text()


def test_compare_sets_a_declared_metric_side_by_side(toy_metric, finished):
    _, _, run, value = finished
    code, out, err = call(["compare", str(run), str(run), "--json"])
    assert code == 0, err
    rows = {row["metric"]: row for row in json.loads(out)["rows"]}
    assert rows["nats/byte"]["A"] == pytest.approx(value, rel=1e-12) and rows["nats/byte"]["A - B"] == 0


def test_a_run_trained_with_a_declared_metric_writes_it_and_prints_it(toy_metric, finished, tmp_path):
    _, data, _, _ = finished
    argv = ["train", "--dataset", "toy", "--data-dir", str(data), "--quiet", "--out", str(tmp_path / "run")]
    for key, value in FAST.items():
        argv += ["--set", f"{key}={value}"]
    code, out, err = call(argv)
    assert code == 0, err
    assert "nats_per_byte" in next(line for line in out.splitlines() if "bits_per_byte" in line)
    test = json.loads((tmp_path / "run" / "result.json").read_text())["metrics"]["test"]
    assert math.isclose(test["nats_per_byte"], test["total_nll_nats"] / test["n_bytes"], rel_tol=1e-12)


def test_a_metric_declared_comparable_does_not_depend_on_the_token_count():
    """What `comparable` promises, for every declared metric: the same total NLL of the same text under another
    tokenization (another token count) gives the same number, and a metric that is not comparable changes."""
    counts = {"n_bytes": 120, "n_chars": 100, "n_words": 20, "n_lines": 3}
    few, many = (metrics.normalize_counts(150.0, n_tokens, **counts) for n_tokens in (30, 120))
    for metric in metrics.METRICS.values():
        assert (few[metric.key] == many[metric.key]) == metric.comparable, metric.key


def test_a_figure_metric_declared_after_the_runs_draws_their_test_numbers_and_says_their_logs_lack_it(finished,
                                                                                                     tmp_path,
                                                                                                     monkeypatch):
    """The runs' test numbers have it (computed from their counts); their log.jsonl, written before it was
    declared, does not: the curve figures are left out with that reason, not drawn empty."""
    from bench.study.report.report import build_report

    drawn = Metric("nats_per_byte", "nats/byte", "nats per byte", lambda c: c.per(c.bytes), True,
                   "L / UTF-8 bytes of the text", name="nat", count="bytes")
    monkeypatch.setitem(metrics.METRICS, drawn.key, drawn)
    root = finished[0]
    page = build_report(root / "results", tmp_path / "report", metric="nat").read_text()
    assert "![1-tokenization-attack]" in page
    for figure in ("5", "7", "8"):
        assert (f"*Figure {figure} is left out: no run's log.jsonl holds validation" in page
                and "in nats per byte (valid_nats_per_byte)" in page), figure
    assert not (tmp_path / "report" / "8-ranking-against-budget.png").exists()
