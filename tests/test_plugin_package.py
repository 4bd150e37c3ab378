"""The example plug-in package (examples/plugin: the tokenization ``nibble`` and the model family ``causal-conv``)
as a user has it, in processes of their own so that this one never registers it.

- Named by a matrix config's ``plugins`` list (the package importable, not installed): a 2 models x 2
  tokenizations x 2 seeds matrix trains with ``--jobs 2``, its workers importing what the matrix's process knew.
- Installed by pip into a folder of its own: ``bench`` finds it through its entry points, with no option, in
  ``report``, ``reproduce``, ``eval`` and ``export``; the exported folder carries the plug-in's code (and the
  package's metric, named by ``--plugin``), and in a Python where bench cannot be imported, transformers alone
  scores the test split to ``bench eval``'s bits per byte, with the metric in the model card and the output.
- A plug-in that cannot be imported or takes a toolkit's name is refused in one line before any folder is made.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("transformers")

from tests.test_export_hf import WITHOUT_BENCH, without_bench  # noqa: E402

PACKAGE = REPO / "examples" / "plugin"
MODELS, SCHEMES, SEEDS = ("lstm", "causal-conv"), ("byte", "nibble"), (0, 1)
CONFIG = """
[matrix]
name = "toy-plugin"
match = "chars"
plugins = ["bench_toy_plugin.nibble", "bench_toy_plugin.conv"]

[axes]
model = ["lstm", "causal-conv"]
tokenizer = ["byte", "nibble"]
dataset = ["toy"]
seed = [0, 1]

[budget]
chars = 3_000

[context]
chars = 32

[shared]
preset = "tiny"
stop_if_not_learning = false
batch_size = 4
eval_every = 0
eval_max_chars = 1_500
dump_token_losses = true
"""
SCORE = WITHOUT_BENCH + '''
import json, runpy
folder, text_file, out = sys.argv[1:]
script = runpy.run_path(folder + "/score_text.py")
with open(text_file, "rb") as handle:
    text = handle.read().decode("utf-8", "surrogateescape")
with open(out, "w") as handle:
    json.dump(script["score"](folder, text, streams=1), handle)
'''


def bench(*args, env: dict, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(REPO / "cli.py"), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    if ok:
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def environment(path: Path, data: Path) -> dict:
    """This process's environment with ``path`` first on Python's path, the toolkit's data folder ``data``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(REPO)]), "BENCH_DATA_DIR": str(data)}


@pytest.fixture(scope="module")
def package(tmp_path_factory, make_toy_corpus) -> dict[str, Path]:
    """The package's source (importable, not installed), the same installed by pip into a folder of its own, and a
    data folder with the toy corpus. The source is copied first: a build leaves nothing in the repository."""
    root = tmp_path_factory.mktemp("plugin")
    for copy in ("source", "build"):  # pip's build writes its metadata beside the source it builds: not this one
        shutil.copytree(PACKAGE, root / copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "--target", str(root / "site"), str(root / "build")], check=True, capture_output=True)
    assert (root / "site" / "bench_toy_plugin").is_dir() and not list((root / "source").glob("*-info"))
    return {"root": root, "source": root / "source", "site": root / "site", "data": make_toy_corpus(root)}


@pytest.fixture(scope="module")
def matrix(package) -> tuple[Path, subprocess.CompletedProcess]:
    """The 2 x 2 x 2 matrix trained by two workers, the plug-in named by the config alone: its results folder."""
    root = package["root"]
    (root / "toy-plugin.toml").write_text(CONFIG)
    done = bench("run-matrix", root / "toy-plugin.toml", "--jobs", "2", "--quiet",
                 env=environment(package["source"], package["data"]), cwd=root)
    return root / "results" / "toy-plugin", done


def run_folder(results: Path, model: str, scheme: str, seed: int = 0) -> Path:
    [folder] = results.glob(f"{model}-tiny-{scheme}-toy-s{seed}-*")
    return folder


@pytest.mark.slow
def test_the_workers_train_every_run_of_the_plugin_named_by_the_config(matrix):
    results, done = matrix
    assert "8 to run (2 at a time" in done.stderr
    rows = [json.loads(path.read_text()) for path in results.glob("*/result.json")]
    assert sorted((r["spec"]["model"], r["spec"]["tokenizer"], r["spec"]["seed"]) for r in rows) == sorted(
        (m, t, s) for m in MODELS for t in SCHEMES for s in SEEDS)
    assert all(r["status"] == "done" and r["comparable"] for r in rows)
    tests = {(r["spec"]["model"], r["spec"]["tokenizer"]): r["metrics"]["test"] for r in rows}
    assert len({test["n_bytes"] for test in tests.values()}) == 1  # one text, whatever the tokens
    assert all(tests[m, "nibble"]["n_tokens"] == 2 * tests[m, "byte"]["n_tokens"] for m in MODELS)


@pytest.mark.slow
def test_installed_it_is_found_by_its_entry_points_in_report_reproduce_eval_and_export(matrix, package):
    results, _ = matrix
    root, env = package["root"], environment(package["site"], package["data"])
    bench("report", results, "--out", root / "report", env=env, cwd=root)
    page = (root / "report" / "report.md").read_text()
    assert "causal-conv" in page and "| causal-conv | tiny | toy | chars | byte | nibble |" in page
    pieces = page.partition("## 3. Teacher forcing inside words")[2].partition("\n## ")[0]
    per_word = {row.split("|")[1].strip(): float(row.split("|")[2]) for row in pieces.splitlines()
                if row.startswith("| ") and row.split("|")[1].strip().endswith(SCHEMES)}
    for model in MODELS:  # every token counted in its word, the low halves (no byte of their own) too
        assert per_word[f"{model} nibble"] == pytest.approx(2 * per_word[f"{model} byte"], abs=2e-3), per_word

    run = run_folder(results, "causal-conv", "nibble")
    reproduced = bench("reproduce", results, "--run", run.name.rsplit("-", 1)[1], "--out", root / "again",
                       "--brief", env=env, cwd=root)
    assert "1 run" in reproduced.stdout, reproduced.stdout

    evaluated = json.loads(bench("eval", run, "--streams", "1", "--json", env=env, cwd=root).stdout)["metrics"]
    # the metric plug-in is not installed: named, as a module, it reaches the model card and score_text.py
    bench("export", run, root / "exported", "--plugin", "bench_toy_plugin.lines", env=env, cwd=root)
    assert (root / "exported" / "bench_toy_plugin_nibble.py").is_file()
    assert (root / "exported" / "bench_toy_plugin_conv.py").is_file()
    card = (root / "exported" / "README.md").read_text()
    header = next(line for line in card.splitlines() if line.startswith("| split |"))
    assert header.split(" | ")[1:3] == ["bits/byte", "bits/char"] and " | bits/line | tokens |" in header, header
    without_bench(root, SCORE, str(root / "exported"), str(root / "test.txt"), str(root / "scored.json"))
    scored = json.loads((root / "scored.json").read_text())
    assert scored["bits_per_byte"] == pytest.approx(evaluated["bits_per_byte"], rel=1e-6)
    assert scored["bits_per_line"] == pytest.approx(scored["total_nll_nats"] / math.log(2) / scored["lines"])


@pytest.mark.slow
def test_a_plugin_that_cannot_be_imported_or_takes_a_name_is_refused_before_any_folder(package):
    root = package["root"]
    env = environment(package["source"], package["data"])
    (root / "taken.py").write_text("from bench.models import MODELS\nfrom bench_toy_plugin.conv import CausalConvLM\n"
                                   "MODELS.register('lstm', CausalConvLM)\n")
    (root / "spanless.py").write_text(  # the nibble with its byte spans left out
        "from bench_toy_plugin.nibble import NibbleTokenizer\nfrom tokenizers_study import FAMILIES, Tokenizer\n"
        "class Spanless(NibbleTokenizer):\n    family = 'spanless'\n    _id_byte_lengths = Tokenizer._id_byte_lengths\n"
        "FAMILIES.register('spanless', Spanless)\n")
    for plugin, said in (("no_such_module", "no module of that name is importable here"),
                         ("taken.py", "model 'lstm' is registered twice"),
                         ("spanless.py", "Spanless says nowhere how many bytes each id decodes to")):
        (root / "refused.toml").write_text(CONFIG.replace('"bench_toy_plugin.conv"]', f'"{plugin}"]'))
        done = bench("run-matrix", root / "refused.toml", "--results", root / "refused", env=env, cwd=root, ok=False)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 1 and len(lines) == 1 and said in lines[0], done.stderr
        assert not (root / "refused").exists()
