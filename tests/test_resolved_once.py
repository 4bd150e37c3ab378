"""A run is resolved once: in a matrix run here (one process), each run's spec is validated once, its overrides
and its scheme name parsed once, its run id computed once, and each split file hashed once in all (a hash is
checked again only in another process, where the file is opened anew)."""

from __future__ import annotations

import collections
import sys

import pytest

import bench.data.cache as cache
import bench.data.store as store
import bench.engine.spec as spec_module
from bench.engine.resolve import ResolvedRun
from bench.study.matrix.execute import Execution, run_matrix

CONFIG = """[matrix]
name = "twice"
match = "tokens"
[axes]
model = ["lstm"]
tokenizer = ["byte", "char"]
dataset = ["toy"]
seed = [0, 1]
[budget]
tokens = 128
[context]
tokens = 16
[shared]
preset = "tiny"
emsize = 8
nhid = 8
batch_size = 4
eval_every = 0
final_eval_splits = "test"
"""


@pytest.fixture()
def counted(monkeypatch):
    counts = collections.Counter()

    def counting(label, function):
        def wrapper(*args, **kwargs):
            counts[label] += 1
            return function(*args, **kwargs)
        return wrapper

    # every module's own name for each function, wherever it was imported from (a module that called it under
    # its own name would otherwise go uncounted)
    for original in (spec_module.validate_spec, spec_module.parse_overrides):
        counted = counting(original.__name__, original)
        for name, module in list(sys.modules.items()):
            if name.startswith("bench") and getattr(module, original.__name__, None) is original:
                monkeypatch.setattr(module, original.__name__, counted)
    monkeypatch.setattr(cache, "parse_scheme", counting("scheme parsed by the data layer", cache.parse_scheme))
    monkeypatch.setattr(ResolvedRun, "_hash", counting("run id", ResolvedRun._hash))
    original = store.sha256_file

    def split_hash(path):
        counts[f"hash {path.name}"] += 1
        return original(path)

    monkeypatch.setattr(store, "sha256_file", split_hash)
    monkeypatch.setattr(store, "_HASHED", {})
    return counts


def test_a_matrix_resolves_each_run_once(tmp_path, make_toy_corpus, counted):
    data_dir = make_toy_corpus(tmp_path)
    config = tmp_path / "twice.toml"
    config.write_text(CONFIG)
    outcome = run_matrix(config, tmp_path / "results", data_dir=data_dir, execution=Execution(show_progress=False))
    runs = sum(len(chain) for chain in outcome.chains)
    assert runs == 4 and outcome.counts.get("done") == 4
    assert counted["validate_spec"] == counted["parse_overrides"] == counted["run id"] == runs
    # a run's scheme name is parsed where its spec is (validate_spec, RunSpec.scheme): the data layer is handed
    # the parsed spec, never the name to parse again
    assert counted["scheme parsed by the data layer"] == 0
    assert {k: v for k, v in counted.items() if k.startswith("hash")} == {
        "hash train.txt": 1, "hash valid.txt": 1, "hash test.txt": 1}
