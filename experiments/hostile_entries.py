"""The entries' cases of the hostile catalogue (experiments/hostile_catalogue.py): the entries beside the command line
(the Python API, as a script calls it, a BenchError printed as the one line the CLI prints; lm-eval's model; TensorBoard
curves), run folders whose records disagree, and corpora whose held-out text is in train; and the sandbox places
they need, built by :func:`entry_places`."""

import json
import shutil
from pathlib import Path

from tests.verdict_catalogues import WORKS  # exit 0 expected, the rest found in stdout + stderr

CALL = ("import sys\nfrom bench import api\nfrom bench.errors import BenchError\ntry:\n    {call}\n"
        "except BenchError as exc:\n    sys.exit(f'error: {{exc}}')\n")
SPEC = "api.plan(api.RunSpec(model='lstm', dataset='toy', data_dir='{data}', out_dir='{new}'"
API = [(f"api: {name}", ["-c", CALL.format(call=call)], expected) for name, call, expected in [
    ("dump onto the run's best.pt", "api.evaluate('{run}', split='valid', dump='{run}/best.pt')",
     "was not written by this command"),
    ("dump onto the run's result.json", "api.evaluate('{run}', split='valid', dump='{run}/result.json')",
     "was not written by this command"),
    ("plan with seed -1", SPEC + ", seed=-1))", "seed must be an integer"),
    ("plan with seed '0'", SPEC + ", seed='0'))", "seed must be an integer"),
    ("plan with seed 0.5", SPEC + ", seed=0.5))", "seed must be an integer"),
    ("evaluate with streams=0", "api.evaluate('{run}', streams=0)", "--streams must be a whole number"),
    ("an unknown override", SPEC + ", overrides=dict(nope=1)))", "unknown setting 'nope'"),
    ("a spec given as a dict", "api.plan(dict(model='lstm', dataset='toy'))", "must be a RunSpec"),
    ("a bad tokenizer name", SPEC + ", tokenizer='bpe:x'))", "needs a vocabulary size"),
    ("train(None)", "api.train(None)", "must be a RunSpec"),
    ("evaluate(None)", "api.evaluate(None)", "must be a path"),
    ("run_matrix with an execution given as text", "api.run_matrix('{matrix}', execution='fast')",
     "execution must be an Execution"),
    ("attack figure of rows without numbers", "api.attack_figure(api.load_runs('{results}').assign("
     "test_bits_per_byte=float('nan')))", "nothing to draw"),
]]
LM_EVAL = ["-m", "bench.engine.score.lm_eval_model", "--model", "bench", "--include_path", "{tasks}", "--tasks"]
LM = [(f"lm-eval: {name}", LM_EVAL + [task, "--model_args", *args], expected) for name, task, args, expected in [
    ("the README's form on a CPU", "doc_ppl", ["run={run}"], WORKS + "no GPU on this machine"),
    ("device=cuda in model_args on a CPU", "doc_ppl", ["run={run},device=cuda"], "this machine has no cuda"),
    ("lm-eval's --device cuda on a CPU", "doc_ppl", ["run={run}", "--device", "cuda"], "this machine has no cuda"),
    ("a device in model_args and another to lm-eval", "doc_ppl", ["run={run},device=cpu", "--device", "cuda"],
     "two devices asked for"),
    ("no run there", "doc_ppl", ["run={sandbox}/nope"], "no trained model at"),
    ("a results folder", "doc_ppl", ["run={results}"], "is a results folder, not a run"),
    ("a truncated best.pt", "doc_ppl", ["run={sandbox}/truncated.pt"], "is not a readable checkpoint"),
    ("a task that generates", "doc_gen", ["run={run}"], "it only scores text"),
    ("an unknown model_args key", "doc_ppl", ["run={run},devcie=cpu"], "takes only run=RUN_FOLDER"),
    ("a closed vocabulary", "doc_ppl", ["run={word_run}"], WORKS + "is a closed vocabulary"),
]]
TB = "TRAIN --set log_to=tensorboard --out"
RECORDS = [
    ("report of a run whose cell.json names another tokenizer", "report {rec-relabelled} --out {new}",
     "names another cell than the run"),
    ("report of a finished run whose cell.json was deleted", "report {rec-uncelled} --out {new}",
     "not part of the matrix"),
    ("report of a run folder moved in from another matrix", "report {rec-foreign} --out {new}", "not this results "
     "folder's"),
    ("report of a result.json with schema_version 99", "report {rec-schema} --out {new}", "schema_version 99"),
    ("compare a folder holding another run's result", "compare {mixed} {lstm_run}", "cannot be told to be its own"),
    ("compare a folder whose result.json is a link", "compare {rec-linked} {lstm_run}", "is a link"),
    ("resume with curves beside a user's file", f"{TB} {{tb-user}}", WORKS + "test"),
    ("curves through a link to a folder", f"{TB} {{tb-link}}", "is a link"),
    ("curves through a dangling link", f"{TB} {{tb-dangling}}", "is a link"),
    ("curves where a file is", f"{TB} {{tb-file}}", "is not a folder"),
] + [(f"contamination: {name}", f"data add leak --train {train} --valid {{text}} --test {test} --data-dir {{data}}",
      f"lines the {other} file also holds") for name, train, test, other in [
    ("half of test appended to train", "{leak-half}", "{sandbox}/test.txt", "train"),
    ("every test line shuffled into train", "{leak-shuffled}", "{sandbox}/test.txt", "train"),
    ("test re-spaced inside train", "{leak-spaced}", "{sandbox}/test.txt", "train"),
    ("test = valid + test", "{train_text}", "{valid-test}", "valid")]]

def entry_places(box: Path, places: dict) -> dict:
    return {**record_places(box, places), **curve_places(box, places), **leak_places(box, places),
            **lm_eval_places(box, places)}


def lm_eval_places(box: Path, places: dict) -> dict:
    """lm-eval's local tasks (one document scored whole; one that generates) and a closed-vocabulary run."""
    from bench.engine.run import train
    from bench.engine.spec import RunSpec
    from tests.test_bad_inputs import FAST

    tasks = box / "tasks"
    tasks.mkdir()
    (tasks / "doc.jsonl").write_text(json.dumps({"text": "the cat sat on the mat"}) + "\n")
    for task, kind in (("doc_ppl", "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: text\n"
                                   "metric_list:\n  - metric: bits_per_byte\n"),
                       ("doc_gen", "output_type: generate_until\ndoc_to_text: text\ndoc_to_target: text\n"
                                   "metric_list:\n  - metric: exact_match\n")):
        (tasks / f"{task}.yaml").write_text(f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
                                            f"    test: {tasks / 'doc.jsonl'}\ntest_split: test\n{kind}")
    train(RunSpec(model="sha-rnn", tokenizer="word:50", dataset="toy", overrides=FAST, data_dir=str(places["data"]),
                  out_dir=str(box / "word-run")), show_progress=False)
    return {"tasks": tasks, "word_run": box / "word-run"}


def leak_places(box: Path, places: dict) -> dict:
    """Contaminated corpora, from the toy corpus's own files."""
    import random

    train, valid = Path(places["train_text"]).read_text(), Path(places["text"]).read_text()
    test = (box / "test.txt").read_text()
    lines = test.splitlines(keepends=True)
    shuffled = train.splitlines(keepends=True) + lines
    random.Random(0).shuffle(shuffled)
    texts = {"leak-half": train + "".join(lines[:len(lines) // 2]), "leak-shuffled": "".join(shuffled),
             "leak-spaced": train + "".join(line.rstrip("\n") + "   \n" for line in lines), "valid-test": valid + test}
    for name, text in texts.items():
        (box / f"{name}.txt").write_text(text)
    return {name: box / f"{name}.txt" for name in texts}


def record_places(box: Path, places: dict) -> dict:
    """Run folders whose records disagree: copies of the sandbox's matrix results, each damaged once."""
    edits = {"rec-relabelled": lambda run: _edit_json(run / "cell.json",
                                                      lambda r: r["cell"].update(tokenizer="bpe:300")),
             "rec-uncelled": lambda run: (run / "cell.json").unlink(),
             "rec-foreign": lambda run: _edit_json(run / "cell.json", lambda r: r.update(matrix="other",
                                                                                         config_sha256="0" * 64)),
             "rec-schema": lambda run: _edit_json(run / "result.json", lambda r: r.update(schema_version=99))}
    for name, edit in edits.items():
        shutil.copytree(places["results"], box / name)
        edit(next((box / name).glob("*/cell.json")).parent)
    shutil.copytree(places["run"], box / "rec-linked")
    (box / "rec-linked" / "result.json").unlink()
    (box / "rec-linked" / "result.json").symlink_to(Path(places["lstm_run"]) / "result.json")
    return {name: box / name for name in [*edits, "rec-linked"]}


def curve_places(box: Path, places: dict) -> dict:
    """Runs with log_to=tensorboard stopped after a checkpoint (result.json gone), each with something at
    RUN/tensorboard: a user's file inside, a link to a folder holding a user's file, a dangling link, a file."""
    from tests.test_bad_inputs import TRAIN
    from tests.conftest import run_cli_here

    argv = [a.replace("{data}", str(places["data"])) for a in TRAIN if a != "{new}"]
    argv = argv[:argv.index("--out")] + argv[argv.index("--out") + 1:] + ["--set", "log_to=tensorboard"]
    assert run_cli_here(*argv, "--out", str(box / "tb-run")).returncode == 0
    (box / "elsewhere").mkdir()
    (box / "elsewhere" / "mine.txt").write_text("a user's file\n")
    prepare = {"tb-user": lambda tb: (tb / "notes.txt").write_text("a user's notes\n"),
               "tb-link": lambda tb: shutil.rmtree(tb) or tb.symlink_to(box / "elsewhere"),
               "tb-dangling": lambda tb: shutil.rmtree(tb) or tb.symlink_to(box / "nowhere"),
               "tb-file": lambda tb: shutil.rmtree(tb) or tb.write_text("a user's file\n")}
    for name, damage in prepare.items():
        shutil.copytree(box / "tb-run", box / name)
        (box / name / "result.json").unlink()
        damage(box / name / "tensorboard")
    return {name: box / name for name in prepare}


def _edit_json(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))
