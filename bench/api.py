"""The toolkit from Python (a notebook, a script): the functions the command line calls, under short names.

    from bench import api
    api.plan(spec)            # the run resolved once: run id, model size, planned tokens (bench train --dry-run)
    api.train(spec)           # train, resume or return the finished result (bench train)
    api.evaluate(run_folder)  # every metric of a split from its total NLL (bench eval)
    api.export(run_folder, out)  # a finished run as a transformers folder (bench export)
    api.run_matrix(config)    # a whole study (bench run-matrix)
    api.load_runs(results)    # its finished runs, one row each, read from the run folders (a pandas DataFrame)
    api.attack_figure(runs)   # a report's figure, from those rows (matplotlib)
    api.build_report(results) # the whole report (bench report)
    api.load_plugins(["my_scheme.py"])  # plug-ins by module or file (--plugin); a matrix's workers import them too

The "Python API" section of docs/study.md runs in the tests as written (tests/test_api.py).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from bench.engine.score import inference
from bench.export import hf_folder

from bench.engine import run
from bench.engine.spec import RunSpec
from bench.errors import BenchError
from bench.plugins import load_plugins
from bench.study.matrix import execute
from bench.study.report import figures, report
from bench.study.matrix.execute import Execution
from tokenizers_study import TokenizerError


def _one_error_type(function):
    """Every refusal as the BenchError the command line prints (a tokenization's own error included); each
    function validates its arguments itself, so that scripts calling the engine directly keep the same rules."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TokenizerError as exc:
            raise BenchError(str(exc)) from None

    return call


plan = _one_error_type(run.plan_run)
train = _one_error_type(run.train)
evaluate = _one_error_type(inference.evaluate_checkpoint)
export = _one_error_type(hf_folder.export_run)
run_matrix = _one_error_type(execute.run_matrix)
attack_figure = _one_error_type(figures.attack_figure)
build_report = _one_error_type(report.build_report)


@_one_error_type
def load_runs(results_dir: str | Path) -> pd.DataFrame:
    """The finished runs of a matrix's results folder (the rows of runs.csv that are done), from their folders."""
    return report.load_study(results_dir).done


__all__ = ["Execution", "RunSpec", "attack_figure", "build_report", "evaluate", "export", "load_plugins", "load_runs",
           "plan", "run_matrix", "train"]
