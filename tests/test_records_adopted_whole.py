"""Records adopted and written only whole (bench.study.matrix.record_checks): `bench run-matrix --records` refuses a
record that is not (a file missing, a file of another run, a log or losses by document that disagree with its
result) by name, before it copies anything; `bench records export` and `bench records documents` read a matrix's
results folder and write into a folder of records, refusing any other in one line. The bad inputs are CATALOGUE
(the form of tests/test_bad_inputs.py's CASES), over the sandbox of that file plus the folders of :func:`places`."""

import json
import shutil
from pathlib import Path

import pytest

from bench.engine.result import RunResult
from bench.errors import BenchError
from bench.run_files import CELL, LOG, RESULT, SPEC, STATUS, document_losses
from bench.study.matrix.record_checks import check_records_folder, record_problem
from bench.study.matrix.records import export_records
from tests.conftest import REPO
from tests.test_bad_inputs import call, expand, sandbox  # noqa: F401  (sandbox: the fixture)
from tests.verdict_catalogues import WORKS, check_case

DOCUMENTS = document_losses("test")
ADOPT = ["run-matrix", "{matrix}", "--data-dir", "{data}", "--results", "{new}", "--quiet", "--records"]
EXPORT = ["records", "export"]
FIX = "export them again from the results they were trained in"

CATALOGUE = [
    # run-matrix --records: a record that is not whole is refused by name, and no run is adopted
    ("adopt a record whose spec.json is another run's", ADOPT + ["{whole-spec-other}"],
     "whole-spec-other/lstm-"),
    ("adopt a record whose spec.json is another run's: what disagrees", ADOPT + ["{whole-spec-other}"],
     "its spec.json is of run"),
    ("adopt a record without log.jsonl", ADOPT + ["{whole-no-log}"], "(no log.jsonl); " + FIX),
    ("adopt a record whose log.jsonl is garbage", ADOPT + ["{whole-log-garbage}"], "its log.jsonl line 1 is not JSON"),
    ("adopt a record whose log.jsonl is of a longer run", ADOPT + ["{whole-log-longer}"],
     "its log.jsonl ends at step 99999"),
    ("adopt a record whose documents.test.json is garbage", ADOPT + ["{whole-documents-garbage}"],
     "its documents.test.json is not a readable record of losses by document"),
    ("adopt a record whose losses by document miss bits", ADOPT + ["{whole-documents-bits}"],
     "bits, its result.json to"),
    ("adopt a record whose losses by document miss bytes", ADOPT + ["{whole-documents-bytes}"],
     "bytes, its result.json scored"),
    ("adopt a record whose result.json is another run's", ADOPT + ["{whole-result-other}"],
     "its result.json is of run"),
    ("adopt a record whose status.json says failed", ADOPT + ["{whole-status-failed}"], "its status.json says failed"),
    ("adopt a record whose cell.json is another run's", ADOPT + ["{whole-cell-other}"],
     "its cell.json is of run 0000000000000000"),
    ("adopt a record whose cell.json names another cell", ADOPT + ["{whole-cell-relabelled}"],
     "names another cell than the run"),
    ("adopt a record whose result.json is a link", ADOPT + ["{whole-linked}"], "its result.json is a link"),
    ("adopt a record that is a file", ADOPT + ["{whole-file}"], "(not a folder)"),
    ("adopt whole records", ADOPT + ["{whole-records}"], WORKS + "1 run(s) done from their records"),
    # records export: from a matrix's results folder, into a folder of records
    ("records export of a missing folder", EXPORT + ["{sandbox}/missing", "{sandbox}/records-out"],
     "does not exist; give the results folder of `bench run-matrix`"),
    ("records export of a run folder", EXPORT + ["{run}", "{sandbox}/records-out"],
     "is a run (", ),
    ("records export of a report folder", EXPORT + ["{whole-report}", "{sandbox}/records-out"],
     "is a report, not a matrix's results folder"),
    ("records export of a user's folder", EXPORT + ["{whole-user}", "{sandbox}/records-out"],
     "holds no owner.json or runs.csv, not a matrix's results folder"),
    ("records export of a matrix with no finished run", EXPORT + ["{all_failed}", "{sandbox}/records-out"],
     "holds no finished run of a matrix"),
    ("records export of a run folder without log.jsonl", EXPORT + ["{no_log}", "{sandbox}/records-out"],
     "(no log.jsonl)"),
    ("records export of a run folder whose log is garbage", EXPORT + ["{bad_log}", "{sandbox}/records-out"],
     "its log.jsonl line 1 is not JSON"),
    ("records export into another matrix's results folder", EXPORT + ["{results}", "{corrupt_results}"],
     "is a matrix results folder"),
    ("records export into a run folder", EXPORT + ["{results}", "{run}"], "is a run ("),
    ("records export inside a run folder", EXPORT + ["{results}", "{run}/records"],
     "would be written inside another command's folder"),
    ("records export into a report folder", EXPORT + ["{results}", "{whole-report}"], "not a folder of records"),
    ("records export into a user's folder", EXPORT + ["{results}", "{whole-user}"],
     "already holds other files (notes.txt)"),
    ("records export inside the results it exports", EXPORT + ["{results}", "{results}/records"],
     "is inside the results folder"),
    ("records export into a file", EXPORT + ["{results}", "{file}"], "is a file, not a folder"),
    ("records export over another run's record", EXPORT + ["{results}", "{whole-taken}"],
     "exists and is not the whole record of run"),
    ("records export of a matrix", EXPORT + ["{results}", "{new}"], WORKS + "1 record(s) written"),
    # records documents: writes into the finished runs of a matrix's results folder only
    ("records documents of a missing folder", ["records", "documents", "{sandbox}/missing"], "does not exist"),
    ("records documents of a run folder", ["records", "documents", "{run}"], "not a matrix's results folder"),
    ("records documents of a user's folder", ["records", "documents", "{whole-user}"],
     "not a matrix's results folder"),
    ("records documents of a matrix with no finished run", ["records", "documents", "{all_failed}"],
     "holds no finished run"),
]


def places(box: Path, sandbox_places: dict) -> dict:
    """The sandbox matrix's one finished run exported whole (whole-records), copies of it damaged once each, a
    report's folder, a user's folder, and a folder of records holding another run's under the run's name."""
    whole = box / "whole-records"
    assert len(export_records(Path(sandbox_places["results"]), whole).paths) == 1
    result = RunResult.read(next(whole.iterdir()) / RESULT).metrics["test"]
    other = Path(sandbox_places["lstm_run"])  # a run of its own (bench train): another run id
    bits = result.total_nll_nats / 0.6931471805599453
    damage = {
        "whole-spec-other": lambda record: shutil.copyfile(other / SPEC, record / SPEC),
        "whole-no-log": lambda record: (record / LOG).unlink(),
        "whole-log-garbage": lambda record: (record / LOG).write_text("garbage\n{}\n"),
        "whole-log-longer": lambda record: (record / LOG).write_text((record / LOG).read_text() + '{"step": 99999}\n'),
        "whole-documents-garbage": lambda record: (record / DOCUMENTS).write_text("garbage"),
        "whole-documents-bits": lambda record: (record / DOCUMENTS).write_text(json.dumps(
            {"bits": [1.0, 2.0], "bytes": [result.n_bytes - 1, 1]})),
        "whole-documents-bytes": lambda record: (record / DOCUMENTS).write_text(json.dumps(
            {"bits": [bits / 2, bits / 2], "bytes": [1, 2]})),
        "whole-result-other": lambda record: shutil.copyfile(other / RESULT, record / RESULT),
        "whole-status-failed": lambda record: _edit(record / STATUS, status="failed"),
        "whole-cell-other": lambda record: _edit(record / CELL, run_id="0" * 16),
        "whole-cell-relabelled": lambda record: _edit(record / CELL, cell={
            **json.loads((record / CELL).read_text())["cell"], "tokenizer": "bpe:300"}),
        "whole-linked": lambda record: (record / RESULT).unlink() or (record / RESULT).symlink_to(
            next(whole.iterdir()) / RESULT),
        "whole-file": lambda record: shutil.rmtree(record) or record.write_text("a file where the record goes\n"),
        "whole-taken": lambda record: _edit(record / STATUS, status="failed"),
    }
    for name, edit in damage.items():
        shutil.copytree(whole, box / name)
        edit(next((box / name).iterdir()))
    (box / "whole-report").mkdir()
    for name in ("report.md", "report.html"):
        (box / "whole-report" / name).write_text("a report\n")
    (box / "whole-user").mkdir()
    (box / "whole-user" / "notes.txt").write_text("a user's notes\n")
    return {name: box / name for name in ["whole-records", *damage, "whole-report", "whole-user"]}


def _edit(path: Path, **fields) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.fixture(scope="module")
def box(sandbox):
    return {**sandbox, **{name: str(path) for name, path in places(Path(sandbox["sandbox"]), sandbox).items()}}


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CATALOGUE],
                         ids=[name for name, _, _ in CATALOGUE])
def test_a_record_not_whole_or_a_foreign_folder_is_refused_in_one_line_and_writes_nothing(box, args, fragment):
    check_case(Path(box["sandbox"]), [expand(arg, box) for arg in args], fragment, call, fresh=Path(box["new"]))


def test_every_committed_record_of_the_gpu_study_is_whole():
    """The 32 records results/reference/gpu-wikitext2/runs holds are adopted (tests/test_gpu_runbook.py plans the
    study with them): each is the whole record of the run its folder is named for."""
    records = sorted((REPO / "results" / "reference" / "gpu-wikitext2" / "runs").iterdir())
    assert len(records) == 32
    for record in records:
        run_id = json.loads((record / RESULT).read_text())["run_id"]
        assert record.name.endswith(run_id[:10]) and record_problem(record, run_id) is None, record.name


def test_the_study_reference_folder_keeps_its_own_records_and_no_other_study_s(tmp_path):
    """A records folder may be inside a study's reference folder (its runs.csv makes it a matrix's) when the
    results exported are of that study's config; another config's results are refused there."""
    reference = REPO / "results" / "reference" / "gpu-wikitext2"
    results = tmp_path / "gpu-wikitext2"
    results.mkdir()
    shutil.copyfile(REPO / "configs" / "gpu-wikitext2.toml", results / "matrix.toml")
    check_records_folder(reference / "runs", results)
    (results / "matrix.toml").write_text((reference / "matrix.toml").read_text() + "\n# another config\n")
    with pytest.raises(BenchError, match="would be written inside another command's folder: .* is a matrix"):
        check_records_folder(reference / "runs", results)
