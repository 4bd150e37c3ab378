"""The toolkit from Python (a notebook, a script): the functions the command line calls, under short names.

    from bench import api
    api.plan(spec)            # the run resolved once: run id, model size, planned tokens (bench train --dry-run)
    api.train(spec)           # train, resume or return the finished result (bench train)
    api.evaluate(run_folder)  # every metric of a split from its total NLL (bench eval)
    api.run_matrix(config)    # a whole study (bench run-matrix)
    api.load_runs(results)    # its finished runs, one row each, read from the run folders (a pandas DataFrame)
    api.attack_figure(runs)   # a report's figure, from those rows (matplotlib)
    api.build_report(results) # the whole report (bench report)

The README's "Python API" section runs in the tests as written (tests/test_api.py).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.engine.inference import evaluate_checkpoint as evaluate
from bench.engine.run import plan_run as plan
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.study.execute import Execution, run_matrix
from bench.study.figures import attack_figure
from bench.study.report import build_report, load_study


def load_runs(results_dir: str | Path) -> pd.DataFrame:
    """The finished runs of a matrix's results folder (the rows of runs.csv that are done), from their folders."""
    return load_study(Path(results_dir)).done


__all__ = ["Execution", "RunSpec", "attack_figure", "build_report", "evaluate", "load_runs", "plan", "run_matrix",
           "train"]
