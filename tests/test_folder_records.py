"""A matrix's run folders are checked against each other (bench.study.matrix.folder_records): a cell.json that names
another cell, a result.json of another run, a folder of another matrix are left out by name, never relabelled;
finished folders without cell.json are counted; an unknown schema_version is refused; a data file changed after
the matrix finished costs no finished run its record (issue 44)."""

import json
import shutil

import pytest

from bench.errors import BenchError
from bench.run_files import CELL, RESULT
from bench.study.matrix.execute import Execution, run_matrix
from bench.study.report.report import load_study
from tests.test_bad_inputs import MATRIX

QUIET = Execution(show_progress=False)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, make_toy_corpus):
    """A finished matrix of two seeds: (config, results folder, data folder), copied afresh by ``matrix``."""
    root = tmp_path_factory.mktemp("records")
    data = make_toy_corpus(root)
    (root / "m.toml").write_text(MATRIX.replace("seed = [0]", "seed = [0, 1]"))
    run_matrix(root / "m.toml", root / "results", data_dir=data, execution=QUIET)
    return root


@pytest.fixture
def matrix(finished, tmp_path):
    """A copy of the finished matrix (its config and data beside it): (config, results, data, its two run folders)."""
    for name in ("m.toml", "results", "data"):
        (shutil.copytree if (finished / name).is_dir() else shutil.copy)(finished / name, tmp_path / name)
    results = tmp_path / "results"
    record = json.loads((results / "owner.json").read_text())  # the copy is its own matrix's results folder
    (results / "owner.json").write_text(json.dumps({**record, "config": "../m.toml",
                                                    "config_absolute": str(tmp_path / "m.toml")}))
    runs = sorted(p.parent for p in results.glob(f"*/{CELL}"))  # their records name the fixture's data folder
    return tmp_path / "m.toml", results, tmp_path / "data", runs


def _edit(path, **changes):
    record = json.loads(path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            record[key] = {**record[key], **value}
        else:
            record[key] = value
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("axis, value", [("tokenizer", "bpe:300"), ("model", "sha-rnn"), ("seed", 7)])
def test_a_cell_record_edited_to_another_cell_is_left_out_by_name_never_relabelled(matrix, axis, value, capsys):
    _, results, _, (first, second) = matrix
    _edit(first / CELL, cell={axis: value})
    study = load_study(results)
    assert list(study.done["run_dir"]) == [second.name]  # the other run alone, under its own labels
    assert value not in set(study.done[axis])
    assert len(study.left_out) == 1 and first.name in study.left_out[0] and f"{axis} {value!r}" in study.left_out[0]
    assert first.name in capsys.readouterr().err


def test_a_finished_run_without_cell_record_is_counted_not_dropped_silently(matrix):
    _, results, _, (first, _) = matrix
    (first / CELL).unlink()
    study = load_study(results)
    assert len(study.done) == 1
    assert study.left_out == ["1 finished run folder(s) are not part of the matrix (no cell.json: their settings "
                              "changed, or the record was deleted) and are left out"]


def test_another_matrixs_run_folder_moved_in_is_not_counted_as_this_matrixs_seed(matrix):
    config, results, data, (first, _) = matrix
    moved = results / "moved-in"
    shutil.copytree(first, moved)
    _edit(moved / CELL, matrix="other", config_sha256="0" * 64, cell={"seed": 5})
    study = load_study(results)
    assert sorted(study.done["seed"]) == [0, 1]
    assert "moved-in" in study.left_out[0] and "matrix 'other'" in study.left_out[0]
    run_matrix(config, results, data_dir=data, execution=QUIET)  # the matrix leaves another matrix's record alone
    assert json.loads((moved / CELL).read_text())["matrix"] == "other"


@pytest.mark.parametrize("how", ["copied", "linked"])
def test_a_result_of_another_run_is_left_out_of_the_report_and_refused_by_compare(matrix, how, cli_here):
    _, results, _, (first, second) = matrix
    (second / RESULT).unlink()
    if how == "copied":
        shutil.copy(first / RESULT, second / RESULT)
    else:
        (second / RESULT).symlink_to(first / RESULT)
    study = load_study(results)
    assert list(study.done["run_dir"]) == [first.name]
    assert second.name in study.left_out[0]
    refused = cli_here("compare", str(first), str(second))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "cannot be told to be its own" in refused.stderr


@pytest.mark.parametrize("version", [99, 1, None, "3"])
def test_an_unknown_schema_version_is_refused_in_one_line(matrix, version, cli_here):
    _, results, _, (first, _) = matrix
    record = json.loads((first / RESULT).read_text())
    if version is None:
        del record["schema_version"]
    else:
        record["schema_version"] = version
    (first / RESULT).write_text(json.dumps(record))
    with pytest.raises(BenchError, match="schema_version"):
        load_study(results)
    refused = cli_here("report", str(results), "--out", str(results.parent / "report"))
    assert refused.returncode == 1 and refused.stderr.startswith("error: ") and "schema_version" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # a newer toolkit's result is not damaged: it is read with that toolkit, never deleted
    assert ("read it with that version" in refused.stderr) == (version == 99) != ("delete it" in refused.stderr)


def test_a_data_file_changed_after_the_matrix_finished_costs_no_run_its_record(tmp_path, make_toy_corpus):
    data = make_toy_corpus(tmp_path)  # a matrix of its own: its runs record this data folder
    config, results = tmp_path / "m.toml", tmp_path / "results"
    config.write_text(MATRIX.replace("seed = [0]", "seed = [0, 1]"))
    run_matrix(config, results, data_dir=data, execution=QUIET)
    runs = sorted(p.parent for p in results.glob(f"*/{CELL}"))
    before = {run: (run / CELL).read_text() for run in runs}
    with open(data / "toy" / "test.txt", "a") as f:
        f.write("a line added after the matrix finished\n")
    outcome = run_matrix(config, results, data_dir=data, execution=QUIET)
    assert all((run / CELL).is_file() and json.loads((run / CELL).read_text())["run_id"] ==
               json.loads(before[run])["run_id"] for run in runs)
    assert any("2 finished run(s) were trained on other data" in note and "test.txt changed" in note
               for note in outcome.notes)
    from bench.study.matrix.runs_table import read_runs_table

    done = read_runs_table(results).done()
    assert len(done) == 2 and done["other_data"].str.contains("test.txt").all()
    from bench.study.report.flags import run_flags

    assert all("≠" in run_flags(row) for _, row in done.iterrows())
    from bench.study.report.report import build_report  # reported as they are, without the analyses of a text not there

    page = build_report(results, results.parent / "report").read_text()
    assert "| lstm | byte | 2 |" in page and "≠ trained on other data" in page


def test_a_changed_setting_still_forgets_the_old_runs_records(matrix):
    """The other side of the data rule: a setting changed is a new run, and the old folders leave the matrix."""
    config, results, data, runs = matrix
    config.write_text(config.read_text().replace("nhid = 16", "nhid = 12").replace("chars = 2_000", "chars = 1_000"))
    outcome = run_matrix(config, results, data_dir=data, execution=Execution(show_progress=False), dry_run=False)
    assert not any((run / CELL).exists() for run in runs)
    assert any("2 finished run folder(s) are not part of the matrix" in note for note in outcome.notes)


def test_a_config_with_windows_line_endings_is_copied_byte_for_byte_so_its_runs_stay_the_folders_own(matrix):
    """matrix.toml was copied as text: a CRLF config's copy had another sha256 than its runs' cell.json named, and
    every finished run was then left out as another matrix's."""
    config, results, data, runs = matrix
    config.write_bytes(config.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    run_matrix(config, results, data_dir=data, execution=QUIET)
    assert (results / "matrix.toml").read_bytes() == config.read_bytes()
    study = load_study(results)
    assert sorted(study.done["run_dir"]) == sorted(run.name for run in runs) and not study.left_out


def test_another_data_folder_marks_no_finished_run_and_forgets_none(matrix, tmp_path, monkeypatch):
    """A mistyped --data-dir, one where the corpus was never fetched (a registry corpus is then planned as 'no data'),
    says nothing of the runs' data: every finished run keeps its record unmarked (all were marked as trained on
    other data), and the report is as before."""
    from bench.study.matrix import plan as planning
    from bench.study.matrix.config import read_config
    from bench.study.matrix.runs_table import write_runs_table

    config, results, _, runs = matrix
    before = {run: (run / CELL).read_bytes() for run in runs}
    monkeypatch.setattr(planning, "_facts_or_problem", lambda spec, data_dir: f"{spec.dataset} is not in {data_dir}")
    (tmp_path / "elsewhere").mkdir()
    chains = planning.plan(read_config(config), results, tmp_path / "elsewhere")
    assert {run.status.value for chain in chains for run in chain} == {"no data"}
    write_runs_table(chains, read_config(config), results)
    assert {run: (run / CELL).read_bytes() for run in runs} == before
    done = load_study(results).done
    assert sorted(done["run_dir"]) == [run.name for run in runs] and "other_data" not in done
