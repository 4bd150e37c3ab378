"""A trained run as lm-evaluation-harness's model ``bench`` (bench.engine.score.lm_eval_model): on the same text (a
local-file task, no hub), lm-eval's word_perplexity, byte_perplexity and bits_per_byte equal ``bench eval``'s with
one stream within 1e-6, for a recurrent byte model and a windowed BPE one; loglikelihood agrees with itself. The
README's command scores a run on a CPU-only machine; a device is used where asked for and refused where missing;
user errors end in one line; model_args keys it does not take are refused; a lossy tokenization is told."""

import json
import re
import logging
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch

lm_eval = pytest.importorskip("lm_eval")  # the dev extra (make test) installs it

from bench.data.user import add_user_corpus  # noqa: E402
from bench.engine.score.inference import evaluate_checkpoint  # noqa: E402
from bench.engine.score.lm_eval_model import BenchLM  # noqa: E402
from bench.engine.run import train  # noqa: E402
from bench.engine.spec import RunSpec  # noqa: E402
from bench.errors import BenchError  # noqa: E402
from tests.conftest import REPO  # noqa: E402

RUNS = {"sha-rnn-byte": ("sha-rnn", "byte", {"emsize": 16, "nhid": 64}),
        "transformer-bpe": ("transformer", "bpe:300", {"d_model": 16, "nheads": 2}),
        "sha-rnn-word": ("sha-rnn", "word:50", {"emsize": 16, "nhid": 64})}
SHARED = {"bptt": 16, "batch_size": 4, "max_steps": 8, "eval_every": 0, "eval_streams": 2, "eval_max_tokens": 300,
          "stop_if_not_learning": False, "final_eval_splits": "valid"}
# The documentation's command (docs/sharing.md, "## lm-evaluation-harness"), a local task folder included: its
# placeholders, a run folder, a task and a task folder, become this test's.
DOCS_SECTION = (REPO / "docs" / "sharing.md").read_text().split("## lm-evaluation-harness", 1)[1]
DOCS_COMMAND = re.search(r"^python -m bench\.engine.*?[^\\]$", DOCS_SECTION.replace("\\\n", "\\ "), re.M).group(0)
DOCS_COMMAND = re.sub(r" +\\ +", " ", DOCS_COMMAND).replace("runs/tiny-tf", "{run}").replace(
    "my_tasks", "{tasks}").replace("my_task", "{task}")
ROLLING = "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: text\nmetric_list:\n" \
          "  - metric: word_perplexity\n  - metric: byte_perplexity\n  - metric: bits_per_byte\n"
GENERATE = "output_type: generate_until\ndoc_to_text: '{{text[:20]}}'\ndoc_to_target: '{{text[20:30]}}'\n" \
           "generation_kwargs:\n  until: ['\\n']\nmetric_list:\n  - metric: exact_match\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, make_text):
    """A user corpus whose test text neither begins nor ends with whitespace: where the two word counts agree."""
    root = tmp_path_factory.mktemp("plain")
    paths = {split: root / f"{split}.txt" for split in ("train", "valid", "test")}
    for seed, (split, path) in enumerate(paths.items()):
        path.write_text(make_text(n_lines=200 if split == "train" else 30, seed=seed).strip())
    add_user_corpus("plain", paths, root / "data")
    return root / "data", paths["test"].read_text()


def trained(name, corpus, tmp_path_factory):
    model, scheme, sizes = RUNS[name]
    out = tmp_path_factory.mktemp(name) / "run"
    train(RunSpec(model=model, preset="tiny", tokenizer=scheme, dataset="plain", seed=0,
                  overrides={**SHARED, **sizes}, data_dir=str(corpus[0]), out_dir=str(out)), show_progress=False)
    return out


@pytest.fixture(scope="module", params=["sha-rnn-byte", "transformer-bpe"])
def run(request, corpus, tmp_path_factory):
    return trained(request.param, corpus, tmp_path_factory)


@pytest.fixture(scope="module")
def byte_run(corpus, tmp_path_factory):
    return trained("sha-rnn-byte", corpus, tmp_path_factory)


@pytest.fixture(scope="module")
def tasks(corpus, tmp_path_factory):
    """A folder for --include_path: bench_plain_test scores the test text, bench_plain_generate asks for text."""
    folder = tmp_path_factory.mktemp("tasks")
    (folder / "doc.jsonl").write_text(json.dumps({"text": corpus[1]}) + "\n")
    for name, body in (("bench_plain_test", ROLLING), ("bench_plain_generate", GENERATE)):
        (folder / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / 'doc.jsonl'}\n"
            f"test_split: test\n{body}")
    return folder


@pytest.fixture()
def no_accelerator(monkeypatch):
    """This process sees no CUDA GPU and no MPS, as on a CPU-only machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def lm_eval_scores(run, tasks) -> dict:
    from lm_eval.tasks import TaskManager

    results = lm_eval.simple_evaluate(model="bench", model_args=f"run={run},device=cpu", tasks=["bench_plain_test"],
                                      task_manager=TaskManager(include_path=str(tasks), include_defaults=False))
    return {k.split(",")[0]: v for k, v in results["results"]["bench_plain_test"].items()}


@pytest.fixture()
def lm_eval_here(monkeypatch, no_accelerator, capsys):
    """A command line run by this process, on the CPU: lm-eval's task manager reads the --include_path tasks alone
    (indexing lm-eval's thousands of own tasks takes 15 s a command). Returns (exit status, stdout, stderr)."""
    from lm_eval import tasks as lm_eval_tasks

    from bench.engine.score import lm_eval_model

    class LocalTasks(lm_eval_tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "include_defaults": False})

    monkeypatch.setattr(lm_eval_tasks, "TaskManager", LocalTasks)
    # lm-eval logs to the stderr of the first command it ran: here each command's own (this test's), then none
    logger = logging.getLogger("lm_eval")
    monkeypatch.setattr(lm_eval.utils, "_LOGGING_CONFIGURED", False)
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", logger.propagate)

    def run(command: str, **fields):
        monkeypatch.setattr(sys, "argv", command.format(**fields).split()[2:])
        status = lm_eval_model.main()
        out, err = capsys.readouterr()
        return status, out, err
    return run


def lm_eval_command(repo, command: str, **fields) -> subprocess.CompletedProcess:
    """A command line run on the CPU (no GPU visible), offline; ``python`` is this interpreter."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    args = command.format(**fields).split()
    return subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, env=env, cwd=repo,
                          timeout=600)


@pytest.mark.slow
def test_lm_eval_scores_a_run_as_bench_eval_does(run, corpus, tasks):
    ours = evaluate_checkpoint(run / "best.pt", "test", corpus[0], streams=1, device="cpu").metrics
    theirs = lm_eval_scores(run, tasks)
    assert theirs["word_perplexity"] == pytest.approx(ours.word_perplexity, rel=1e-6)
    assert theirs["bits_per_byte"] == pytest.approx(ours.bits_per_byte, rel=1e-6)
    assert theirs["byte_perplexity"] == pytest.approx(2 ** ours.bits_per_byte, rel=1e-6)


def request(*args):
    return type("Request", (), {"args": args})()


@pytest.mark.slow
def test_loglikelihood_of_a_continuation_adds_up(run, corpus, capsys):
    model = BenchLM(run=str(run), device="cpu")
    text = corpus[1][:300]
    context, continuation = text[:120], text[120:]
    (whole, _), (before, _), (after, _) = model.loglikelihood(
        [request("", text), request("", context), request(context, continuation)])
    (rolling,) = model.loglikelihood_rolling([request(text)])
    assert whole == pytest.approx(rolling, rel=1e-9)  # the whole text after no context: the rolling score
    if "byte" in run.parent.name:  # bytes: the continuation's tokens are exactly those after the context's
        assert before + after == pytest.approx(whole, rel=1e-9)
    assert math.isfinite(after) and after < 0
    assert "warning" not in capsys.readouterr().err  # lossless schemes give each text back, pieces included


@pytest.mark.slow
def test_the_readme_command_scores_a_run_on_a_cpu_machine(repo, byte_run, tasks):
    """lm-eval's command line asks cuda:0 of every machine; with no GPU the CPU scores, with a note. As written, in
    its own process, lm-eval's own tasks indexed."""
    done = lm_eval_command(repo, DOCS_COMMAND, run=byte_run, task="bench_plain_test", tasks=tasks)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bits_per_byte" in done.stdout
    assert "note: no GPU on this machine: the bench model scores on the CPU" in done.stderr


@pytest.mark.slow
def test_a_device_in_model_args_is_not_a_second_value_for_lm_evals_own(byte_run, tasks, lm_eval_here):
    status, out, err = lm_eval_here(DOCS_COMMAND, run=f"{byte_run},device=cpu", task="bench_plain_test", tasks=tasks)
    assert status == 0, err[-3000:]
    assert "bits_per_byte" in out and "note: no GPU" not in err


@pytest.mark.slow
@pytest.mark.parametrize("device", ["", "device: cpu\n"], ids=["no device", "device cpu"])
def test_a_config_file_scores_a_run_on_a_cpu(byte_run, tasks, tmp_path, device, lm_eval_here):
    """lm-eval's --config: a device it does not give is nobody's choice, as on the command line."""
    config = tmp_path / "config.yaml"
    config.write_text(f"model: bench\nmodel_args:\n  run: {byte_run}\ntasks: [bench_plain_test]\n"
                      f"include_path: {tasks}\n{device}")
    status, out, err = lm_eval_here("python -m bench.engine.score.lm_eval_model --config {config}", config=config)
    assert status == 0, err[-3000:]
    assert ("note: no GPU on this machine" in err) == (device == "")


@pytest.mark.slow
@pytest.mark.parametrize("run_and_more, task, fragment", [
    ("{missing}", "bench_plain_test", "no trained model at"),
    ("{truncated}", "bench_plain_test", "truncated/best.pt is not a readable checkpoint"),
    ("{run}", "bench_plain_generate", "it only scores text: choose loglikelihood or loglikelihood_rolling"),
    ("{run},devcie=cpu", "bench_plain_test", "model_args devcie: the bench model takes only run="),
], ids=["missing run", "truncated best.pt", "generate task", "unknown key"])
def test_a_user_error_ends_in_one_line(byte_run, tasks, tmp_path, run_and_more, task, fragment, lm_eval_here):
    """At load, while lm-eval evaluates, and where lm-eval once took any key."""
    copy = shutil.copytree(byte_run, tmp_path / "truncated")
    (copy / "best.pt").write_bytes((byte_run / "best.pt").read_bytes()[:1000])
    run = run_and_more.format(missing=tmp_path / "no-such-run", truncated=copy, run=byte_run)
    status, _, err = lm_eval_here(DOCS_COMMAND, run=run, task=task, tasks=tasks)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert status == 1 and "Traceback" not in err, err[-3000:]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]) and fragment in errors[0]


@pytest.mark.slow
def test_a_results_folder_is_refused_with_one_of_its_runs(byte_run):
    with pytest.raises(BenchError, match="^[^\n]*$") as refused:
        BenchLM(run=str(byte_run.parent), device="cpu")
    assert f"is a results folder, not a run: give one of its runs, e.g. run={byte_run}" in str(refused.value)


@pytest.mark.slow
def test_what_lm_eval_passes_every_model_is_taken(byte_run, no_accelerator, capsys):
    """Its batch sizes (requests are scored one at a time) and its device: none asked for is the CPU here."""
    for config in ({"batch_size": "auto", "max_batch_size": 64, "device": None}, {"batch_size": 8, "device": "auto"}):
        model = BenchLM.create_from_arg_string(f"run={byte_run}", config)
        assert model.loaded.device.type == "cpu"
    assert capsys.readouterr().err.count("note: no GPU on this machine") == 2


@pytest.mark.slow
@pytest.mark.parametrize("model_args, config, fragment", [
    ({"device": "cuda"}, {"device": "auto"}, "device cuda was asked for but this machine has no cuda"),
    ({}, {"device": "cuda:0"}, "device cuda:0 was asked for"),  # simple_evaluate(device=...) is asked for
    ({"device": "cpu"}, {"device": "cuda"}, "two devices asked for: device=cpu in model_args and cuda"),
    ({"device": "cpu", "batch_size": 8}, {}, "model_args batch_size: the bench model takes only run="),
    ({"run": None}, {}, "model_args gives no run: give --model_args run=RUN_FOLDER"),
    ({"plugins": "no_such_toy_module"}, {}, "model_args plugins no_such_toy_module: no module of that name"),
], ids=["absent device in model_args", "absent device to lm-eval", "two devices", "unknown key", "no run",
        "plug-in"])
def test_model_args_are_checked(byte_run, no_accelerator, model_args, config, fragment):
    """A plug-in named by model_args is imported before the run is loaded: one that cannot be is refused."""
    with pytest.raises(BenchError, match="^[^\n]*$") as refused:
        BenchLM.create_from_arg_obj({"run": str(byte_run), **model_args}, config)
    assert fragment in str(refused.value)


@pytest.mark.slow
def test_a_gpu_this_machine_lacks_is_refused(byte_run, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # one GPU: cuda:0, never reached here
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BenchError, match="device cuda:1 was asked for but this machine has no cuda:1"):
        BenchLM.create_from_arg_obj({"run": str(byte_run), "device": "cuda:1"}, {"device": "auto"})


@pytest.mark.slow
def test_a_closed_vocabulary_is_told_at_load(corpus, tmp_path_factory, capsys):
    BenchLM(run=str(trained("sha-rnn-word", corpus, tmp_path_factory)), device="cpu")
    told = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(told) == 1 and "word:50 is a closed vocabulary" in told[0] and "not comparable" in told[0]


@pytest.mark.slow
def test_a_text_the_tokenizer_does_not_give_back_is_told_once(byte_run, corpus, monkeypatch, capsys):
    """As a pretrained scheme that normalises (lossless by its class) does on some texts: told once, at the first."""
    model = BenchLM(run=str(byte_run), device="cpu")
    model.loglikelihood_rolling([request(corpus[1][:50])])
    assert "warning" not in capsys.readouterr().err
    decode = model.loaded.tokenizer.decode
    monkeypatch.setattr(model.loaded.tokenizer, "decode", lambda ids: decode(ids).lower())
    model.loglikelihood_rolling([request("Upper Case"), request("More Upper Case")])
    told = capsys.readouterr().err.splitlines()
    assert len(told) == 1 and told[0].startswith("warning: byte does not give back a text lm-eval scored")


@pytest.mark.parametrize("text, fragment", [
    (None, "No such file or directory; give the YAML file of lm-eval's settings"),
    ("model: bench\nmodel_args: [unclosed\n", "is not valid YAML (expected ',' or ']'"),
    ("- model\n", "holds no settings (a YAML mapping such as 'model: bench')"),
], ids=["missing", "not yaml", "a list"])
def test_a_config_file_that_cannot_be_read_is_one_line(tmp_path, lm_eval_here, text, fragment):
    config = tmp_path / "config.yaml"
    if text is not None:
        config.write_text(text)
    status, _, err = lm_eval_here("python -m bench.engine.score.lm_eval_model --config {config}", config=config)
    assert (status, err.count("\n"), err.startswith("error: --config "), fragment in err) == (1, 1, True, True), err
