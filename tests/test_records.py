"""A finished run's records (bench.study.matrix.records): what a lent GPU sends back and a study commits. The matrix skips a
run whose whole record is given, the report reads its losses by document as if it had its per-token losses, and no
record or run folder is ever replaced."""

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.run_files import CHECKPOINT, RESULT, TOKENIZER, document_losses, token_losses
from bench.study.matrix.finished_run import FinishedRun, read_document_losses
from bench.engine.result import RunResult
from bench.study.matrix.execute import Execution, run_matrix
from bench.study.matrix.record_checks import RECORD_FILES
from bench.study.matrix.records import export_records
from bench.study.report.report import build_report

pytestmark = pytest.mark.mirror

# The smoke config's corpus with two runs of it: a lossless tokenization (its losses by document are kept) and a
# closed vocabulary (they are not: its text cannot be given back).
CONFIG = """
[matrix]
name = "records"
match = "chars"

[corpora.wt2-records]
prefix_of = "wikitext-2"
train_bytes = 60_000
valid_bytes = 12_000
test_bytes = 120_000

[axes]
model = ["lstm"]
tokenizer = ["byte", "word:300"]
dataset = ["wt2-records"]
seed = [0, 1]

[budget]
chars = 8_000

[context]
chars = 48

[shared]
preset = "tiny"
stop_if_not_learning = false  # seconds of training on toy sizes: the machinery, not learning
batch_size = 4
eval_max_chars = 2_000
eval_streams = 8
eval_chunk = 64
checkpoint_every = 20
log_every = 5
dump_token_losses = true

[models.lstm]
emsize = 16
nhid = 24
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory, wt2_data_dir):
    """The config's four runs trained here, and their records exported."""
    root = tmp_path_factory.mktemp("records")
    config = root / "records.toml"
    config.write_text(CONFIG)
    outcome = run_matrix(config, root / "trained", wt2_data_dir, Execution(show_progress=False))
    assert outcome.counts == {"done": 4}
    written = export_records(root / "trained", root / "records")
    assert len(written.paths) == 4 and written.left_out == []
    return config, root / "trained", root / "records", wt2_data_dir


def test_a_record_holds_the_runs_small_files_and_its_losses_by_document(trained):
    _, results, records, _ = trained
    for record in records.iterdir():
        names = {p.name for p in record.iterdir()}
        lossless = "-byte-" in record.name
        assert names == {n for n in RECORD_FILES if lossless or n != document_losses("test")}
        run_dir = results / record.name
        assert (run_dir / token_losses("test")).is_file() and (run_dir / CHECKPOINT).is_file()  # left behind
        if lossless:  # the same numbers the per-token losses give
            run = FinishedRun({}, RunResult.read(run_dir / RESULT), run_dir)
            from_tokens, kept = run._document_losses("test"), read_document_losses(record, "test")
            assert len(kept.bits) >= 5 and np.array_equal(from_tokens.bits, kept.bits)
            assert np.array_equal(from_tokens.bytes, kept.bytes)
            assert kept.bits_per_byte == pytest.approx(run.result.metrics["test"].bits_per_byte, rel=1e-6)


def test_the_matrix_skips_a_recorded_run_and_the_report_reads_its_record(trained, tmp_path, capsys):
    config, results, records, data = trained
    elsewhere = tmp_path / "elsewhere"
    plan = run_matrix(config, elsewhere, data, Execution(show_progress=False), dry_run=True, records=records)
    assert {run.status.value for chain in plan.chains for run in chain} == {"done"}
    assert not elsewhere.exists()  # a plan writes nothing
    outcome = run_matrix(config, elsewhere, data, Execution(show_progress=False), records=records)
    assert outcome.counts == {"done": 4}
    assert "4 run(s) done from their records" in capsys.readouterr().err
    for run_dir in elsewhere.glob("lstm-*"):
        assert not (run_dir / CHECKPOINT).exists()  # nothing trained
        assert (run_dir / TOKENIZER).read_bytes() == (results / run_dir.name / TOKENIZER).read_bytes()
    here = build_report(results, tmp_path / "here").parent
    there = build_report(elsewhere, tmp_path / "there").parent
    table = (there / "main-table.csv").read_text()
    assert table == (here / "main-table.csv").read_text()  # every number, the intervals over documents too
    byte_row = next(line.split(",") for line in table.splitlines() if line.startswith("lstm,byte,"))
    assert float(byte_row[5]) < float(byte_row[3]) < float(byte_row[6])  # its interval over the test's articles


def test_a_run_started_here_is_never_replaced_by_its_record(trained, tmp_path):
    config, results, records, data = trained
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(results, elsewhere)
    ours = next(elsewhere.glob("lstm-*-byte-*s0*"))
    (ours / RESULT).unlink()  # a run of this machine, interrupted: it resumes, its record is not taken
    plan = run_matrix(config, elsewhere, data, Execution(show_progress=False), dry_run=True, records=records)
    status = {run.run_dir.name: run.status.value for chain in plan.chains for run in chain}
    assert status[ours.name] == "partial" and sorted(status.values()).count("done") == 3


def test_a_record_whose_tokenizer_differs_from_the_data_is_refused(trained, tmp_path):
    config, _, records, data = trained
    tampered = tmp_path / "records"
    shutil.copytree(records, tampered)
    record = next(tampered.glob("lstm-*-byte-*s0*"))
    result = json.loads((record / RESULT).read_text())
    result["tokenizer"]["hash"] = "0" * 64
    (record / RESULT).write_text(json.dumps(result))
    with pytest.raises(BenchError, match="tokenizer trained here .* is not the run's"):
        run_matrix(config, tmp_path / "elsewhere", data, Execution(show_progress=False), records=tampered)
    assert not (tmp_path / "elsewhere" / record.name).exists()


def test_export_keeps_the_same_record_and_refuses_another(trained, tmp_path):
    _, results, records, _ = trained
    target = tmp_path / "records"
    shutil.copytree(records, target)
    assert export_records(results, target).paths == []  # the same runs: nothing written, nothing replaced
    first, second = sorted(target.iterdir())[:2]
    shutil.rmtree(first)
    shutil.copytree(second, first)  # another run's record under this run's name
    before = (first / RESULT).read_bytes()
    with pytest.raises(BenchError, match=f"{first} exists and is not the whole record of run .*its result.json is of"):
        export_records(results, target)
    assert (first / RESULT).read_bytes() == before


def test_a_run_folder_whose_records_disagree_is_not_exported_and_is_named(trained, tmp_path, cli_here):
    """A cell.json edited to another tokenizer was exported as it said: the byte run became a BPE run's record."""
    _, results, _, _ = trained
    copy = shutil.copytree(results, tmp_path / "results", ignore=shutil.ignore_patterns("*.pt", "*.npy"))
    relabelled = next(copy.glob("lstm-*-byte-*"))
    cell = json.loads((relabelled / "cell.json").read_text())
    (relabelled / "cell.json").write_text(json.dumps({**cell, "cell": {**cell["cell"], "tokenizer": "bpe:300"}}))
    done = cli_here("records", "export", str(copy), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.parent.name for p in copy.glob("*/cell.json") if p.parent != relabelled)
    assert done.stderr.startswith("note: 1 run folder(s) left out, their records disagree: " + relabelled.name)
    assert "tokenizer 'bpe:300' in cell.json" in done.stderr


def test_a_damaged_record_of_losses_by_document_is_one_line(tmp_path):
    (tmp_path / document_losses("test")).write_text('{"bits": [1.0, 2.0], "bytes": [3.0]}')
    with pytest.raises(BenchError, match="not one number per document"):
        read_document_losses(tmp_path, "test")
    (tmp_path / document_losses("test")).write_text("{")
    with pytest.raises(BenchError, match="not a readable record"):
        read_document_losses(tmp_path, "test")
    assert read_document_losses(Path(tmp_path / "absent"), "test") is None


def test_a_record_of_another_texts_documents_is_refused_by_the_report(trained, tmp_path):
    config, results, records, data = trained
    elsewhere = tmp_path / "elsewhere"
    run_matrix(config, elsewhere, data, Execution(show_progress=False), records=records)
    path = next(elsewhere.glob("lstm-*-byte-*s0*")) / document_losses("test")
    losses = json.loads(path.read_text())
    path.write_text(json.dumps({"bits": losses["bits"][1:], "bytes": losses["bytes"][1:]}))
    with pytest.raises(BenchError, match=r"are not those of this text \(\d+ documents"):
        build_report(elsewhere, tmp_path / "report")


def test_a_folder_already_here_is_not_adopted_and_a_refusal_adopts_nothing(trained, tmp_path, capsys):
    config, results, records, data = trained
    elsewhere = tmp_path / "elsewhere"
    plan = run_matrix(config, elsewhere, data, Execution(show_progress=False), dry_run=True)
    from bench.ownership import record_matrix_owner

    first = plan.chains[0][0].run_dir
    first.mkdir(parents=True)  # a run of this machine killed before its first checkpoint: an empty folder
    record_matrix_owner(elsewhere, config)
    adopted = run_matrix(config, elsewhere, data, Execution(show_progress=False), dry_run=True, records=records)
    assert [run.status.value for chain in adopted.chains for run in chain].count("done") == 3
    assert "3 run(s) done from their records" in capsys.readouterr().err  # the summary counts the runs adopted
    tampered = tmp_path / "records"
    shutil.copytree(records, tampered)
    last = sorted(tampered.iterdir())[-1]
    result = json.loads((last / RESULT).read_text())
    result["tokenizer"]["hash"] = "f" * 64
    (last / RESULT).write_text(json.dumps(result))
    with pytest.raises(BenchError, match="is not the run's"):
        run_matrix(config, tmp_path / "third", data, Execution(show_progress=False), records=tampered)
    assert not list((tmp_path / "third").glob("lstm-*"))  # checked before any folder was made


@pytest.mark.parametrize("edit,said", [
    ("bits", r"its documents.test.json sums to [\d,.]+ bits, its result.json to [\d,.]+\)"),
    ("bytes", r"its documents.test.json sums to [\d,]+ bytes, its result.json scored [\d,]+\)"),
    ("garbage", "its documents.test.json is not a readable record of losses by document"),
])
def test_a_record_whose_losses_by_document_disagree_with_its_result_is_refused_and_nothing_adopted(
        trained, tmp_path, edit, said):
    """Losses by document that do not sum to the result's total bits and scored bytes were adopted, and the report
    then refused the whole results folder."""
    config, _, records, data = trained
    tampered = shutil.copytree(records, tmp_path / "records")
    record = next(tampered.glob("lstm-*-byte-*s0*"))
    path = record / document_losses("test")
    losses = json.loads(path.read_text())
    total = RunResult.read(record / RESULT).metrics["test"].total_nll_nats / math.log(2)
    assert math.isclose(sum(losses["bits"]), total, rel_tol=1e-12)  # as exported: its sums are the result's
    if edit == "bits":
        losses["bits"][0] += total * 1e-5  # beyond float rounding
    elif edit == "bytes":
        losses["bytes"][0] += 1
    path.write_text(json.dumps(losses) if edit != "garbage" else '{"bits": [1.0')
    named = f"1 folder.* no run adopted: {re.escape(str(tampered / record.name))} \\("
    with pytest.raises(BenchError, match=named + said):
        run_matrix(config, tmp_path / "elsewhere", data, Execution(show_progress=False), records=tampered)
    assert not list((tmp_path / "elsewhere").glob("lstm-*"))  # nothing half-adopted: the whole records neither
