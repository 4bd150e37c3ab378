"""The hostile catalogue re-run whole against any checkout: tests/test_bad_inputs.py's CASES, the cases of other
suites (EXTRA), the entries beside the command line (experiments/hostile_entries.py) and the verdicts'
(tests/verdict_catalogues.py),
each as `python CHECKOUT/cli.py ...` (OMP_NUM_THREADS=1, 120 s, 8 GiB of address space)
in one sandbox built by this checkout's code, classified as CLASSES by its exit, stderr and the sandbox's files
(size, mtime) before and after; a sandbox a case changed is put back from a pristine copy.

    python experiments/hostile_catalogue.py build --root ROOT               # the sandbox, with this checkout's code
    python experiments/hostile_catalogue.py run --repo ../before --label before   # a worktree of the commit before
    python experiments/hostile_catalogue.py run --repo . --label after                  # ROOT/after.tsv
    python experiments/hostile_catalogue.py ctrl-c --repo .                             # ROOT/ctrl-c.md
    python experiments/hostile_catalogue.py note --before-commit 7b6a07c --after-commit COMMIT   # the reference note"""

import argparse
import contextlib
import csv
import json
import os
import re
import resource
import shutil
import tempfile
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments"))
from hostile_entries import API, LM, RECORDS, WORKS, entry_places  # noqa: E402  (the entries beside the command line)
from tests.verdict_catalogues import cases as verdict_cases, suites as verdict_suites  # noqa: E402
CLASSES = ["clean", "works", "traceback", "data loss", "accepted-bad", "misleading", "leftover", "timeout"]
TIMEOUT, MEMORY = 120, 8 * 2 ** 30

# problems whose cases live in other suites (test_data_safety, test_train, test_baselines, ...)
EXTRA = [(f"dump onto the run's own {name}", f"eval {{run}} --dump-token-losses {{run}}/{name}",
          "was not written by this command") for name in ("best.pt", "checkpoint.pt", "result.json", "spec.json")] + [
    ("dump onto a user's file beside a loose best.pt", "eval {loose}/best.pt --dump-token-losses {loose}/other.npy",
     "was not written by this command"),
    ("train into a folder of one run's spec and another's result", "TRAIN --out {mixed}",
     "holds the files of two runs"),
    ("eval into a folder of one run's spec and another's result",
     "eval {mixed} --dump-token-losses {mixed}/losses.npy", "holds the files of two runs"),
    ("init_from b/base where the run from a/base finished", "TRAIN --out {tuned} --set init_from={sandbox}/b/base",
     "holds a run started from other weights"),
] + [(f"a report over a report {how}", f"report {{results}} --out {{report-{folder}}}",
        "the results it reports cannot be told") for how, folder in (("that lost owner.json", "noowner"),
                                                                    ("whose owner.json is corrupt", "badowner"))] + [
    ("another matrix into results that lost owner.json only",
     "run-matrix {renamed_matrix} --dry-run --data-dir {data} --results {owner-lost}", "cell.json record its sha256"),
    ("a corpus added again with other files",
     "data add toy --train {train_text} --valid {sandbox}/test.txt --test {text} --data-dir {data}", "--replace"),
    ("a tampered cached baseline", "baselines rep --splits test --data-dir {bl-data}", WORKS + "measuring again"),
    ("baselines of a 3-byte split", "baselines small --splits valid,test --data-dir {bl-data} --quiet",
     WORKS + "too small: 3 bytes"),
    ("eval-hf with more streams than tokens",
     "eval-hf {gpt2} --dataset toy --data-dir {data} --out {new} --streams 100000", "is more than the"),
    ("a million-id tokenizer", "train --model lstm --dataset toy --data-dir {data} --quiet --out {new} --set "
     "max_steps=4 --tokenizer hf:{huge.json}", "needs at least"),  # the tiny preset's evaluation: 8,192 tokens
    ("report of a matrix with hf: relative to its config, a space in it", "report {hf-results} --out {new}",
     WORKS + "report"),
    ("a report whose results folder moved", "report {moved-results} --out {moved-report}", "which does not exist"),
    ("results whose config moved and changed",
     "run-matrix {sandbox}/moved.toml --dry-run --data-dir {data} --results {moving-results}", "which does not exist"),
]
ALLOWED = ("new-run", "bl-data/cache", "data/cache", "cwd", "data/near-natural") + tuple(  # what a case expected to work may add or change
    f"tb-user/{name}" for name in ("run.lock", "log.jsonl", "checkpoint.pt", "best.pt", "result.json", "spec.json",
                                   "status.json", "tokenizer.json", "tensorboard/events.out.tfevents"))


def cases() -> list[tuple[str, list[str], str]]:
    from tests.test_bad_inputs import CASES, TRAIN

    train = " ".join(TRAIN).replace(" --out {new}", "")
    return list(CASES) + [(name, args.replace("TRAIN", train).split(), fragment)
                          for name, args, fragment in EXTRA + RECORDS] + API + LM + verdict_cases()


def factory(root: Path) -> SimpleNamespace:  # pytest's tmp_path_factory, as far as the catalogue's fixtures use it
    return SimpleNamespace(mktemp=lambda name: (root / name).mkdir(parents=True) or root / name)


def build(root: Path) -> None:
    """The catalogue's sandbox (its own builders, as pytest would call them) and the places EXTRA needs."""
    os.environ["OMP_NUM_THREADS"] = "1"
    from tests import conftest, test_bad_inputs

    make_toy_corpus = conftest.make_toy_corpus._get_wrapped_function()()
    places = test_bad_inputs.sandbox._get_wrapped_function()(factory(root), make_toy_corpus)
    box = Path(places["sandbox"])
    places.update({k: str(v) for k, v in extra_places(box, {k: Path(v) for k, v in places.items()}).items()})
    for suite in verdict_suites():  # each verdict's places in a folder of its own under the sandbox
        folder = box / suite.__name__.rpartition(".")[2]
        folder.mkdir()
        places.update({k: str(v) for k, v in suite.places(folder, dict(places)).items()})
    (box / "cwd").mkdir()
    (root / "places.json").write_text(json.dumps(places, indent=1))
    shutil.copytree(box, root / "pristine", symlinks=True)


def extra_places(box: Path, places: dict) -> dict:
    """The places of EXTRA's cases, each a file or folder under the sandbox named as its placeholder."""
    import numpy as np
    from tokenizers import Tokenizer, models, pre_tokenizers

    from bench.data.compressors import compressor_baselines
    from bench.data.facts import load_data_facts
    from bench.data.user import add_user_corpus
    from bench.engine.run import train
    from bench.engine.spec import RunSpec
    from bench.errors import BenchError
    from bench.study.matrix.execute import Execution, run_matrix
    from tests.conftest import run_cli_here, synthetic_text
    from tests.test_bad_inputs import FAST, MATRIX
    from tests.test_hf_eval import tiny_gpt2
    from tests.test_pretrained import gpt2_like

    data, run, quiet = places["data"], places["run"], Execution(show_progress=False)
    shutil.copytree(run, box / "loose", ignore=lambda _, names: set(names) - {"best.pt"})  # a checkpoint alone,
    np.save(box / "loose" / "other.npy", np.arange(5))  # and a user's file beside it
    shutil.copytree(run, box / "mixed")  # one run's spec.json, another run's result.json
    shutil.copy(places["lstm_run"] / "result.json", box / "mixed" / "result.json")
    spec = dict(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", data_dir=str(data))
    for side, lr in (("a", 1e-3), ("b", 5e-3)):  # two bases whose paths end alike; a run from a/base
        train(RunSpec(**spec, overrides={**FAST, "lr": lr}, out_dir=str(box / side / "base")), show_progress=False)
    train(RunSpec(**spec, overrides={**FAST, "init_from": str(box / "a" / "base")}, out_dir=str(box / "tuned")),
          show_progress=False)
    shutil.copytree(places["results"], box / "moved-src")  # a report of it, then the results folder moved
    assert run_cli_here("report", str(box / "moved-src"), "--out", str(box / "moved-report")).returncode == 0
    for name, damage in (("report-noowner", Path.unlink), ("report-badowner", lambda p: p.write_text("{garbage"))):
        shutil.copytree(box / "moved-report", box / name)
        damage(box / name / "owner.json")
    (box / "moved-src").rename(box / "moved-results")
    shutil.copytree(places["results"], box / "owner-lost")
    (box / "owner-lost" / "owner.json").unlink()
    (box / "moving.toml").write_text(MATRIX.replace('name = "toy"', 'name = "moving"'))  # run, then moved and edited
    run_matrix(box / "moving.toml", box / "moving-results", data_dir=data, execution=quiet)
    (box / "moving.toml").rename(box / "moved.toml")
    (box / "moved.toml").write_text((box / "moved.toml").read_text() + "# edited\n")
    texts = {s: box / f"rep-{s}.txt" for s in ("train", "valid", "test")}
    for i, (split, path) in enumerate(texts.items()):
        path.write_text(synthetic_text(n_lines=300 if split == "train" else 120, seed=10 + i))
    add_user_corpus("rep", texts, box / "bl-data")
    compressor_baselines("rep", ("test",), box / "bl-data")
    cache = next((box / "bl-data" / "cache" / "baselines").glob("rep-*.json"))
    stored = json.loads(cache.read_text())
    stored["baselines"][0]["bits_per_byte_cold"] = 0.001  # an edit to a figure no compressor reaches
    cache.write_text(json.dumps(stored))
    (box / "small-valid.txt").write_text("ab\n")
    add_user_corpus("small", {**texts, "valid": box / "small-valid.txt"}, box / "bl-data")
    tiny_gpt2._get_wrapped_function()(factory(box), synthetic_text())
    words = sorted(set(texts["train"].read_text().split())) + ["[UNK]"]  # hf_huge_vocab: 1,000,000 ids
    huge = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words + [f"w{i}" for i in range(
        1_000_000 - len(words))])}, unk_token="[UNK]"))
    huge.pre_tokenizer = pre_tokenizers.Whitespace()
    huge.save(str(box / "huge.json"))
    with contextlib.suppress(BenchError):  # its encoded splits cached, so that a refusal after it writes nothing
        load_data_facts("toy", f"hf:{box / 'huge.json'}", data)
    gpt2_like(box / "hfrel" / "my tok ✓", synthetic_text())  # relative to the config, with a space
    (box / "hfrel" / "m.toml").write_text(MATRIX.replace('name = "toy"', 'name = "pt"').replace(
        'tokenizer = ["byte"]', 'tokenizer = ["hf:my tok ✓", "byte"]'))
    run_matrix(box / "hfrel" / "m.toml", box / "hf-results", data_dir=data, execution=quiet)
    names = ("loose", "mixed", "tuned", "report-noowner", "report-badowner", "moved-results", "moved-report",
             "owner-lost", "moving-results", "bl-data", "gpt2", "huge.json", "hf-results")
    return {**{name: box / name for name in names}, **entry_places(box, places)}


def snapshot(box: Path) -> dict:  # each path under BOX: None for a folder, else (size, mtime)
    return {str(p.relative_to(box)): None if p.is_dir() and not p.is_symlink() else
            (p.lstat().st_size, p.lstat().st_mtime_ns) for p in box.rglob("*")}


def run_one(repo: Path, argv: list[str], box: Path) -> tuple[int | None, str, str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    start = time.monotonic()
    command = argv if argv[0] in ("-c", "-m") else [str(repo / "cli.py"), *argv]  # python -c/-m: the other entries
    process = subprocess.Popen([sys.executable, *command], cwd=box / "cwd", env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY)))
    try:
        out, err, code = *process.communicate(timeout=TIMEOUT), process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err, code = *process.communicate(), None
    return code, out, err, time.monotonic() - start


# lm-eval's own log (progress, notes on a task's YAML), its progress bars and our one-line notes, before a refusal
PROGRESS_LOG = re.compile(r"\d{4}-\d\d-\d\d:\d\d:\d\d:\d\d (INFO|WARNING) |\s*\d+%\|.*it/s\]|note: ")


def classify(expected: str, code, err: str, out: str, before: dict, after: dict) -> tuple[str, str, str]:
    """(class, the refusal's line or what went wrong, the paths written) of one case."""
    lost = sorted(p for p, v in before.items() if after.get(p, "gone") != v and not (v is None and p in after))
    added = sorted(p for p in after if p not in before)
    works = expected.startswith(WORKS)
    if works:  # its outputs, and a cache it measures again
        added, lost = [p for p in added if not p.startswith(ALLOWED)], [p for p in lost if not p.startswith(ALLOWED)]
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("training ", "encoding "))
             and not PROGRESS_LOG.match(line)]
    message = lines[-1] if lines else (out.strip().splitlines() or [""])[-1]
    paths = " ".join([f"-{p}" for p in lost] + [f"+{p}" for p in added])[:400]
    refused = code not in (0, 130) and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    order = [("timeout", code is None), ("data loss", lost), ("traceback", "Traceback" in err)] + (
        [("misleading", code != 0), ("accepted-bad", expected[len(WORKS):] not in out + err), ("leftover", added),
         ("works", True)] if works else
        [("accepted-bad", code == 0), ("leftover", added), ("misleading", not refused), ("clean", True)])
    kind = next(kind for kind, hit in order if hit)
    return kind, (f"[{len(lines)} line(s)] " if kind == "misleading" else "") + message, paths


def run(root: Path, repo: Path, label: str, only: str | None, verdicts: bool = False) -> None:
    from tests import test_bad_inputs
    places = json.loads((root / "places.json").read_text())
    box, rows = Path(places["sandbox"]), []
    chosen = verdict_cases() if verdicts else cases()
    for name, args, expected in [case for case in chosen if not only or only in case[0]]:
        argv = [test_bad_inputs.expand(arg, places) for arg in args]
        before = snapshot(box)
        code, out, err, seconds = run_one(repo.resolve(), argv, box)
        after = snapshot(box)
        kind, message, paths = classify(expected, code, err, out, before, after)
        if after != before:  # put the sandbox back as it was built
            shutil.rmtree(box)
            shutil.copytree(root / "pristine", box, symlinks=True)
        rows.append({"case": name, "class": kind, "exit": code, "seconds": f"{seconds:.1f}", "expected": expected,
                     "message": message, "paths": paths})
        print(f"{kind:13} {code!s:>4} {seconds:5.1f}s  {name}", flush=True)
    with open(root / f"{label}.tsv", "w", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t").writeheader()
        csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t").writerows(rows)


def ctrl_c(root: Path, repo: Path, delays: list[float]) -> None:
    """Ctrl-C: tests/test_matrix.py's `run-matrix --jobs 2 --threads 1` of six long toy runs, SIGINT to
    its process group DELAY s after start; then the same command again, stopped once a run has trained on."""
    from tests.conftest import synthetic_text
    from tests.test_matrix import _parallel_matrix, toy

    signal.signal(signal.SIGINT, signal.default_int_handler)  # started in the background, its children ignore it
    lines = ["## Ctrl-C of `run-matrix --jobs 2 --threads 1` (AFTER)", "", "| delay (s) | exit | s to exit | traceback "
             "| runs.csv then | checkpoints | second invocation's plan | a run trained on | its exit | traceback |",
             "| ---: | ---: | ---: | --- | --- | ---: | --- | --- | ---: | --- |"]
    for delay in delays:
        shutil.rmtree(root / f"ctrl-c-{delay:g}", ignore_errors=True)  # the texts; the config, results, data:
        places = toy._get_wrapped_function()(factory(root).mktemp(f"ctrl-c-{delay:g}"), synthetic_text)
        results, logs = places[1], {}
        trained_on = lambda: any(p.stat().st_size > logs.get(p, 0) for p in results.glob("*/log.jsonl"))  # noqa
        code, err, took = interrupt(_parallel_matrix(places, repo), delay)
        logs.update({p: p.stat().st_size for p in results.glob("*/log.jsonl")})
        rows = list(csv.DictReader(open(results / "runs.csv"))) if (results / "runs.csv").is_file() else []
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r["status"] for r in rows).items())) or "none"
        checkpoints = len(list(results.glob("*/checkpoint.pt")))
        again, err2, _ = interrupt(_parallel_matrix(places, repo), 90, trained_on)
        plan = next((line.split(": ", 1)[-1] for line in err2.splitlines() if "runs planned" in line), "none")
        lines.append(f"| {delay:g} | {code} | {took:.1f} | {'Traceback' in err} | {statuses} | {checkpoints} | "
                     f"{_cell(plan)} | {trained_on()} | {again} | {'Traceback' in err2} |")
    (root / "ctrl-c.md").write_text("\n".join(lines) + "\n")


def interrupt(process: subprocess.Popen, wait: float, ready=lambda: False) -> tuple:
    """SIGINT to the process's group after WAIT s (or once READY()): its exit code, stderr, seconds to exit."""
    start = time.monotonic()
    while time.monotonic() - start < wait and process.poll() is None and not ready():
        time.sleep(0.05)
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
        return process.returncode, err, time.monotonic() - sent
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return "killed after 60 s", process.communicate()[1], time.monotonic() - sent


def note(root: Path, out: Path, change: str, before_commit: str, after_commit: str) -> None:
    before, after = ({r["case"]: r for r in csv.DictReader(open(root / f"{label}.tsv"), delimiter="\t")}
                     for label in ("before", "after"))
    lines = [f"# The hostile catalogue, before and after {change}", "",
             "`experiments/hostile_catalogue.py`: tests/test_bad_inputs.py's CASES, the cases of other suites, the "
             "entries beside the command line and the verdicts' suites (tests/verdict_catalogues.py), "
             f"{len(after)} in all, each as `python CHECKOUT/cli.py` (or, for cases of the "
             "Python API and the exported score_text.py, `python -c`) in one sandbox built by AFTER's code. "
             f"BEFORE = {before_commit}, AFTER = {after_commit}." + (
                 f" BEFORE ran {len(before)} of them (`run --verdicts`: the verdicts' cases)."
                 if len(before) < len(after) else ""), "",
             "| class | before | after, the same cases | after, every case |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {kind} | {sum(r['class'] == kind for r in before.values())} | "
              f"{sum(r['class'] == kind for n, r in after.items() if n in before)} | "
              f"{sum(r['class'] == kind for r in after.values())} |" for kind in CLASSES]
    lines += ["", "## Cases whose class changed", "", "| case | before | after | BEFORE's last line |",
              "| --- | --- | --- | --- |"]
    lines += [f"| {n} | {before[n]['class']} | {r['class']} | {_cell(before[n]['message'])[:200]} |"
              for n, r in after.items() if n in before and before[n]["class"] != r["class"]]
    lines += ["", "## AFTER: each case not clean or works", "", "| case | class | message |", "| --- | --- | --- |"]
    lines += [f"| {n} | {r['class']} | {_cell(r['message'])} (expected: {_cell(r['expected'])}) {_cell(r['paths'])} |"
              for n, r in after.items() if r["class"] not in ("clean", "works")] or ["| (none) | | |"]
    for extra in [root / "notes.md", *sorted(root.glob("ctrl-c*.md"))]:  # a reader's notes; the Ctrl-C tables
        lines += ["", extra.read_text().rstrip()] if extra.is_file() else []
    out.write_text("\n".join(lines) + "\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["build", "run", "ctrl-c", "note"])
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "hostile")
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--label", default="after")
    parser.add_argument("--only", help="run: only the cases whose name holds this")
    parser.add_argument("--verdicts", action="store_true", help="run: only the verdicts' cases")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "reference" / "hostile-catalogue.md")
    parser.add_argument("--delays", default="1,2,3,4,5,7,10", help="ctrl-c: seconds after start")
    parser.add_argument("--change", default="a change", help="note: what the catalogue is re-run for (its heading)")
    parser.add_argument("--before-commit", default="7b6a07c", help="note: the commit BEFORE ran")
    parser.add_argument("--after-commit", default="main", help="note: the commit AFTER ran")
    o = parser.parse_args()
    {"build": lambda: build(o.root), "run": lambda: run(o.root, o.repo, o.label, o.only, o.verdicts), "note": lambda: note(
        o.root, o.out, o.change, o.before_commit, o.after_commit),
     "ctrl-c": lambda: ctrl_c(o.root, o.repo, [float(d) for d in o.delays.split(",")])}[o.mode]()
