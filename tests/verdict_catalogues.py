"""The bad-input cases of the verdicts (reproduce, records, export, contamination, speed), each kept in its own
suite as ``CATALOGUE`` with the sandbox places it needs (``places(box, sandbox_places)``): the command-line check of
tests/test_bad_inputs.py and scripts/hostile_catalogue.py read them from here."""

import importlib

SUITES = ("tests.test_reproduce_verdicts", "tests.test_records_adopted_whole", "tests.test_export_certified",
          "tests.test_contamination_near", "tests.test_speed_refusals")


def suites() -> list:
    return [importlib.import_module(name) for name in SUITES]


def cases() -> list[tuple[str, list[str], str]]:
    return [case for suite in suites() for case in suite.CATALOGUE]
