"""The bad-input cases of the verdicts (reproduce, records, export, contamination, speed), each kept in its own
suite as ``CATALOGUE`` with the sandbox places it needs (``places(box, sandbox_places)``): the command-line check of
tests/test_bad_inputs.py and experiments/hostile_catalogue.py read them from here."""

import importlib
import shutil
from pathlib import Path

from tests.test_bad_inputs import files_under

SUITES = ("tests.test_reproduce_verdicts", "tests.test_records_adopted_whole", "tests.test_export_certified",
          "tests.test_contamination_near", "tests.test_speed_refusals")


def suites() -> list:
    return [importlib.import_module(name) for name in SUITES]


def cases() -> list[tuple[str, list[str], str]]:
    return [case for suite in suites() for case in suite.CATALOGUE]


WORKS = "works:"  # an expected fragment that starts so: exit 0 expected, the rest found in stdout + stderr


def check_case(sandbox: Path, argv: list[str], fragment: str, run, fresh: Path | None = None) -> str:
    """Run one case (``run(argv)`` -> code, stdout, stderr) and hold it to the catalogue's rule: a refusal is one
    line naming ``fragment``, a non-zero exit, no traceback and nothing under ``sandbox`` written or changed; a
    case expected to work exits 0 saying the fragment, and writes under ``fresh`` alone (removed after) when given.
    Returns stdout."""
    before = files_under(sandbox)
    code, out, err = run(argv)
    if fragment.startswith(WORKS):
        assert code == 0 and fragment[len(WORKS):] in out + err, out + err
        if fresh is None:
            return out
        written = set(files_under(sandbox)) - set(before)
        assert all(path.is_relative_to(fresh) for path in written), written
        shutil.rmtree(fresh, ignore_errors=True)
    else:
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("training ", "encoding "))]
        assert code not in (0, 130) and "Traceback" not in err, out + err
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert files_under(sandbox) == before
    return out
