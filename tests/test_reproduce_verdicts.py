"""`bench reproduce` vouches only for what it compared: never a record against itself or a copy of it, never a run it
could not check (named, and the command fails), never an --out folder that is another command's; an earlier --out is
read by --reproduced, and an eval-hf folder is refused in one line.

CATALOGUE holds the bad-input cases (as tests/test_bad_inputs.py's CASES) and `places` the sandbox folders they need."""

import json
import shutil
from pathlib import Path

import pytest

from bench.study.matrix.reproduce import Difference, Reproduction
from bench.study.matrix.reproduce_checks import Unchecked, same_training
from tests.test_bad_inputs import MATRIX, call, expand, sandbox  # noqa: F401  (sandbox: a fixture)
from tests.verdict_catalogues import WORKS, check_case

AGAIN = ["--data-dir", "{data}", "--quiet", "--brief"]

CATALOGUE = [
    ("reproduce against one of its own run folders", ["reproduce", "{results}", "--reproduced", "{rv-results-run}"],
     "the folder being checked"),
    ("reproduce a matrix's run folder against the matrix", ["reproduce", "{rv-results-run}", "--reproduced",
                                                            "{results}"], "the folder being checked"),
    ("reproduce against a copy of the results", ["reproduce", "{results}", "--reproduced", "{rv-copy}"],
     "is a copy of the recorded run, not another training"),
    ("reproduce against a copy given other start times", ["reproduce", "{results}", "--reproduced", "{rv-restarted}"],
     "the same wall time"),
    ("reproduce against a copy given other start and wall times", ["reproduce", "{results}", "--reproduced",
                                                                   "{rv-retimed}"], "the same best.pt"),
    ("reproduce a run folder against its copy", ["reproduce", "{lstm_run}", "--reproduced", "{rv-run-copy}"],
     "is a copy of the recorded run"),
    ("reproduce into another matrix's results", ["reproduce", "{results}", *AGAIN, "--out", "{rv-two}"],
     "is a matrix results folder (run from"),
    ("reproduce into a run folder", ["reproduce", "{results}", *AGAIN, "--out", "{lstm_run}"], "is a run ("),
    ("reproduce into a report folder", ["reproduce", "{results}", *AGAIN, "--out", "{rv-report}"],
     "not a folder of bench reproduce"),
    ("reproduce into a folder inside a report", ["reproduce", "{results}", *AGAIN, "--out", "{rv-report}/again"],
     "is inside another folder"),
    ("reproduce into a folder of other files", ["reproduce", "{results}", *AGAIN, "--out", "{rv-others}"],
     "already holds other files"),
    ("reproduce into another results' reproduction", ["reproduce", "{results}", *AGAIN, "--out", "{rv-two-again}"],
     "holds the reproduction of"),
    ("reproduce into an earlier --out holding a copy of a record", ["reproduce", "{rv-two}", *AGAIN, "--out",
                                                                    "{rv-planted}"], "a run found finished there"),
    ("reproduce an eval-hf result", ["reproduce", "{hf_result}", *AGAIN], "bench eval-hf's score"),
    ("reproduce against an eval-hf result", ["reproduce", "{results}", "--reproduced", "{hf_result}"],
     "bench eval-hf's score"),
    ("reproduce with --out and --reproduced", ["reproduce", "{results}", "--out", "{new}", "--reproduced",
                                               "{rv-two-again}"], "give one"),
    ("reproduce a matrix whose cell.json was edited", ["reproduce", "{rv-edited-cell}", "--reproduced",
                                                       "{rv-two-again}"], "1 recorded run(s) not checked: lstm-"),
    ("reproduce a matrix whose result.json spec was edited", ["reproduce", "{rv-edited-result}", "--reproduced",
                                                              "{rv-two-again}"], "names another cell than the run"),
    ("reproduce a run whose result.json spec was edited", ["reproduce", "{rv-edited-run}", *AGAIN, "--out", "{new}"],
     "records another spec than its spec.json: lr"),
    ("reproduce a matrix with a run folder missing", ["reproduce", "{rv-missing}", "--reproduced", "{rv-two-again}"],
     "its folder is missing"),
    ("reproduce against an earlier --out", ["reproduce", "{rv-two}", "--reproduced", "{rv-two-again}", "--brief"],
     WORKS + "2 runs; 2 bit-identical; all within tolerance"),
]


def places(box: Path, sandbox_places: dict) -> dict:
    """The folders of CATALOGUE's cases, under ``box``: a two-seed matrix and its reproduction, copies of the
    sandbox's results (plain, given other times), records edited once each, a report's folder, a user's folder."""
    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.matrix.reproduce import reproduce

    given = {key: Path(value) for key, value in sandbox_places.items()}
    root = box / "reproduce"
    root.mkdir()
    (root / "two.toml").write_text(MATRIX.replace("seed = [0]", "seed = [0, 1]"))
    run_matrix(root / "two.toml", root / "two", data_dir=given["data"],
               execution=Execution(threads=1, show_progress=False))
    assert reproduce(root / "two", None, [], root / "two-again", None, 1, given["data"], show_progress=False).ok
    found = {"rv-two": root / "two", "rv-two-again": root / "two-again",
             "rv-results-run": next(given["results"].glob("*/result.json")).parent}
    for name, source, edit in [
            ("rv-copy", given["results"], None),
            ("rv-restarted", given["results"], lambda p: p.update(started_at="2001-01-01T00:00:00+00:00")),
            ("rv-retimed", given["results"], lambda p: p.update(started_at="2001-01-01T00:00:00+00:00",
                                                                wall_seconds=p["wall_seconds"] + 1.5)),
            ("rv-run-copy", given["lstm_run"], None)]:
        found[name] = shutil.copytree(source, root / name[3:])
        if edit is not None:
            _edit(next(found[name].glob("*/result.json")), lambda result: edit(result["provenance"]))
    for name, what in [("rv-edited-cell", "cell.json"), ("rv-edited-result", "result.json"),
                       ("rv-missing", None)]:
        found[name] = shutil.copytree(root / "two", root / name[3:])
        first = next(found[name].glob("*-s0-*"))
        if what == "cell.json":
            _edit(first / what, lambda record: record["cell"].update(seed=7))
        elif what == "result.json":
            _edit(first / what, lambda result: result["spec"].update(seed=7))
        else:
            shutil.rmtree(first)
    found["rv-planted"] = shutil.copytree(root / "two-again", root / "planted")  # a record put in its place
    planted = next(found["rv-planted"].glob("*-s0-*"))
    shutil.rmtree(planted)
    shutil.copytree(next(found["rv-two"].glob("*-s0-*")), planted)
    found["rv-edited-run"] = shutil.copytree(given["lstm_run"], root / "edited-run")
    _edit(found["rv-edited-run"] / "result.json", lambda result: result["spec"]["overrides"].update(lr=0.5))
    found["rv-report"], found["rv-others"] = root / "report", root / "others"
    for folder, files in ((found["rv-report"], ("report.md", "report.html")), (found["rv-others"], ("notes.txt",))):
        folder.mkdir()
        for name in files:
            (folder / name).write_text("a file of someone else's\n")
    return found


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def box(sandbox):  # noqa: F811  (the sandbox fixture imported above)
    built = {key: str(value) for key, value in places(Path(sandbox["sandbox"]), sandbox).items()}
    return {**sandbox, **built}


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CATALOGUE],
                         ids=[name for name, _, _ in CATALOGUE])
def test_a_reproduction_it_never_made_is_refused_in_one_line_and_writes_nothing(box, args, fragment):
    out = check_case(Path(box["sandbox"]), [expand(a, box) for a in args], fragment, call)
    assert fragment.startswith(WORKS) or "all within tolerance" not in out


def test_an_earlier_out_folder_is_trained_into_again_and_read_back(box):
    again = ["reproduce", box["rv-two"], "--data-dir", box["data"], "--quiet", "--brief"]
    for where in (["--out", box["rv-two-again"]], ["--reproduced", box["rv-two-again"]]):
        code, out, err = call(again + where)
        assert code == 0 and "2 runs; 2 bit-identical; all within tolerance" in out, out + err


def test_the_summary_never_vouches_for_runs_it_did_not_compare():
    close = [Difference("a", "test_bits_per_byte", 1.0, 1.0, None), Difference("b", "test_bits_per_byte", 1.0, 1.001,
                                                                               None)]
    whole = Reproduction(close, [], ["a", "b"])
    assert whole.summary().endswith("2 runs; 1 bit-identical; the largest relative difference 0.001 (b, "
                                    "test_bits_per_byte); all within tolerance") and whole.problem() is None
    partial = Reproduction(close, [], ["a", "b"], missing=["c"], unchecked=[Unchecked("d", "d1", "edited")])
    line = partial.summary()
    assert line.startswith("2 of 4 recorded runs compared;") and "1 not checked: d (edited)" in line
    assert "all within tolerance" not in line and line.endswith("the 2 compared within tolerance")
    assert "1 recorded run(s) not checked: d (edited)" in partial.problem() and not partial.ok
    nothing = Reproduction([], [], [], unchecked=[Unchecked("d", "d1", "edited")])
    assert nothing.summary() == "0 of 1 recorded runs compared; 1 not checked: d (edited); nothing compared"


def test_a_run_trained_again_within_the_same_seconds_is_no_copy(tmp_path):
    """Toy runs start and finish within a second: the times alone never make a training a copy."""
    recorded = {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00",
                "wall_seconds": 0.40547511, "folder": str(tmp_path / "a")}
    for name, weights in (("a", b"weights"), ("b", b"weights"), ("c", b"other weights")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "best.pt").write_bytes(weights)
    again = {**recorded, "wall_seconds": 0.39811, "folder": str(tmp_path / "c")}
    assert same_training(recorded, again) is None
    assert "the same wall time" in same_training(recorded, {**again, "wall_seconds": 0.40547511})
    assert "the same best.pt" in same_training(recorded, {**again, "folder": str(tmp_path / "b")})
    assert "the same start time" in same_training({**recorded, "wall_seconds": None}, again)  # an older record
