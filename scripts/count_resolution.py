"""A run is resolved once: count, in one process, how often a 2-cell matrix on WikiText-2 (fetched) and its report
validate a spec, parse overrides, compute a run id, hash each split file and look up the data folder.
``python scripts/count_resolution.py`` (tests/test_resolved_once.py asserts the same on a toy corpus)."""
import collections
import sys
import tempfile
from pathlib import Path

import bench.data.paths as paths
import bench.data.store as store
import bench.engine.spec as spec_module
from bench.engine.resolve import ResolvedRun
from bench.study.matrix.execute import Execution, run_matrix
from bench.study.report.report import build_report

counts = collections.Counter()
phase = ["matrix"]


def counting(label, function):
    def wrapper(*args, **kwargs):
        counts[(phase[0], label)] += 1
        return function(*args, **kwargs)
    return wrapper


def split_hash(path):
    counts[(phase[0], f"sha256 {Path(path).name}")] += 1
    return original_hash(path)


original_hash = store.sha256_file
store.sha256_file = split_hash
ResolvedRun._hash = counting("run id (ResolvedRun._hash)", ResolvedRun._hash)
# every module's own name for these functions, wherever it was imported from
for original in (spec_module.validate_spec, spec_module.parse_overrides, paths.resolve_data_dir):
    counted = counting(original.__name__, original)
    for name, module in list(sys.modules.items()):
        if name.startswith(("bench", "tokenizers_study")) and getattr(module, original.__name__, None) is original:
            setattr(module, original.__name__, counted)

CONFIG = """[matrix]
name = "count"
match = "tokens"
[axes]
model = ["lstm"]
tokenizer = ["byte", "char"]
dataset = ["wikitext-2"]
seed = [0]
[budget]
tokens = 2000
[context]
tokens = 32
[shared]
preset = "tiny"
emsize = 16
nhid = 16
batch_size = 4
eval_every = 0
eval_max_tokens = 4000
final_eval_splits = "valid,test"
"""
out = Path(tempfile.mkdtemp())
(out / "count.toml").write_text(CONFIG)
outcome = run_matrix(out / "count.toml", out / "results", execution=Execution(show_progress=False))
print("runs:", sum(len(c) for c in outcome.chains), dict(outcome.counts))
phase[0] = "report"
build_report(out / "results", out / "report")
for (ph, label), n in sorted(counts.items()):
    print(f"{ph:7s} {label:28s} {n}")
