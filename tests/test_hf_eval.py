"""Any HuggingFace causal LM scored like a trained run: a tiny GPT-2 built here (random weights, a tokenizer
trained here, nothing downloaded), checked against a direct computation and against lm-evaluation-harness."""

import json
import socket

import pytest
import torch

from bench.engine.score.hf_eval import HFEvalSettings, evaluate_pretrained, load_pretrained

pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No hub access at any point: any connection fails the test."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory, corpus_text):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("gpt2")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus_text.splitlines(), trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=2048, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("hf-data"))


def scored(model, ids: list[int], start: int, window: int, stride: int, streams: int = 1,
           autocast: torch.dtype | None = None) -> float:
    """The total NLL bench eval-hf's scorer gives (the tests of bench.engine.score.evaluation check it token by token
    against a plain loop, a pretrained model included)."""
    import numpy as np

    from bench.engine.score.evaluation import EvalLayout, Scorer
    from bench.engine.hardware.precision import FLOAT32, Precision
    from bench.models.pretrained import PretrainedLM

    layout = EvalLayout(streams=streams, chunk=stride, window=window)
    precision = FLOAT32 if autocast is None else Precision(autocast, False, False)
    return Scorer(PretrainedLM(model, window), start, layout, torch.device("cpu"), precision).score(
        np.asarray(ids)).total_nll_nats


def test_one_window_equals_a_direct_computation_and_overlaps_are_not_projected(tiny_gpt2, data_dir):
    model, tokenizer = load_pretrained(tiny_gpt2, torch.device("cpu"))
    text = (data_dir / "toy" / "test.txt").read_text()[:3000]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) + 1 <= 2048
    sequence = torch.tensor([[tokenizer.bos_token_id] + ids])
    with torch.no_grad():
        logits = model(sequence).logits[0, :-1].double()
    direct = torch.nn.functional.cross_entropy(logits, sequence[0, 1:], reduction="sum").item()
    assert scored(model, ids, tokenizer.bos_token_id, 2048, len(ids)) == pytest.approx(direct, rel=1e-6)
    projected = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, out: projected.append(out.shape[1]))
    strided = scored(model, ids, tokenizer.bos_token_id, 64, 16)
    # the positions of a window that overlap the previous chunk are not projected (the last chunk is the rest)
    assert projected[:-1] == [16] * (len(ids) // 16) and projected[-1] == (len(ids) % 16 or 16)
    assert strided == pytest.approx(direct, rel=0.05) and strided != pytest.approx(direct, rel=1e-9)

    class WithoutKeep(torch.nn.Module):  # a model that cannot skip positions: the same numbers
        def forward(self, inputs):
            return model(inputs)

    assert scored(WithoutKeep(), ids, tokenizer.bos_token_id, 64, 16) == pytest.approx(strided, rel=1e-6)


def test_eval_hf_writes_a_result_of_the_trained_runs_schema(tiny_gpt2, data_dir, tmp_path, cli):
    out = tmp_path / "hf"
    done = cli("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--window", "64", "--stride", "32",
               "--data-dir", str(data_dir), "--out", str(out), "--json", env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["training"] is None and result["status"] == "done" and result["schema_version"] == 3
    test = result["metrics"]["test"]
    assert test["n_bytes"] == len((data_dir / "toy" / "test.txt").read_bytes()) and test["lossless"] is True
    assert result["evaluation"]["layout"]["window"] == 64
    again = cli("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--window", "64", "--stride", "16",
                "--data-dir", str(data_dir), "--out", str(out), env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert again.returncode == 1 and "holds another run" in again.stderr


def test_a_pretrained_result_is_its_own_kind_with_no_training_spec(tiny_gpt2, data_dir, tmp_path):
    """A pretrained model's result records its model folder and scored split, not a training spec with sentinel
    values (preset "pretrained", no seed) that validate_spec would refuse; one written as a trained run's (schema
    version 2) reads as the same result."""
    from bench.engine.result import RunResult

    out = tmp_path / "hf"
    evaluate_pretrained(HFEvalSettings(str(tiny_gpt2), "toy", window=64, stride=32, data_dir=str(data_dir),
                                       out_dir=str(out)))
    written = json.loads((out / "result.json").read_text())
    assert written.get("kind") == "pretrained" and written["spec"] is None and written["resolved"] == {}
    assert written["training"] is None and written["model"]["train_flops_per_token"] is None
    source = written["pretrained"]
    assert (source["model_dir"], source["dataset"], source["split"]) == (str(tiny_gpt2), "toy", "test")
    result = RunResult.read(out / "result.json")
    assert result.kind == "pretrained" and result.spec is None and result.pretrained.out_dir == str(out)
    sentinel_spec = {"model": f"hf:{tiny_gpt2.name}", "preset": "pretrained", "tokenizer": f"hf:{tiny_gpt2}",
                     "dataset": "toy", "seed": 0, "overrides": {"split": "test", **written["evaluation"]["layout"]},
                     "data_dir": str(data_dir), "out_dir": str(out)}
    version_2 = {**{k: v for k, v in written.items() if k not in ("kind", "pretrained")}, "schema_version": 2,
                 "spec": sentinel_spec,
                 "resolved": {"model": {"model_dir": source["model_dir"], "model_type": source["model_type"],
                                        "weights_sha256": source["weights_sha256"]}, "train": {}}}
    (out / "result.json").write_text(json.dumps(version_2))
    assert RunResult.read(out / "result.json") == result


def test_lm_eval_conventions_match_the_harness(tiny_gpt2, data_dir):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks.wikitext.preprocess_wikitext import wikitext_detokenizer

    from bench.data.documents import document_pages

    text = "".join(f" = Article {k} = \n \n The game was a season , with <unk> @-@ 3 . \n \n" for k in range(3))
    (data_dir / "wiki.txt").write_text(text)
    model, tokenizer = load_pretrained(tiny_gpt2, torch.device("cpu"))
    from bench.engine.score.hf_eval import lm_eval_numbers

    widths = []
    model.register_forward_pre_hook(lambda module, args: widths.append(args[0].shape[1]))
    ours = lm_eval_numbers(model, tokenizer, text, 16, torch.device("cpu"))
    assert max(widths) == 16 and len(widths) > 3  # full windows, never beyond the model's window
    harness = HFLM(pretrained=str(tiny_gpt2), device="cpu", batch_size=1, max_length=16)
    requests = [Instance("loglikelihood_rolling", {}, (wikitext_detokenizer({"page": page}),), k)
                for k, page in enumerate(document_pages(text))]
    theirs = harness.loglikelihood_rolling(requests, disable_tqdm=True)
    assert ours["documents"] == 3
    assert ours["document_log_likelihoods"] == pytest.approx(theirs, abs=1e-4)


MATRIX = """
[matrix]
name = "with-gpt2"
[corpora.toy]
train = "train.txt"
valid = "valid.txt"
test = "test.txt"
[axes]
model = ["lstm"]
tokenizer = ["byte"]
dataset = ["toy"]
[budget]
chars = 2_000
[context]
chars = 32
[shared]
preset = "tiny"
batch_size = 4
emsize = 16
nhid = 16
eval_max_chars = 400
[[pretrained]]
model = "{model}"
name = "gpt2-tiny"
window = 64
stride = 32
"""


def test_a_matrix_scores_pretrained_models_beside_its_runs_and_reports_them(tiny_gpt2, tmp_path, make_text):
    import csv

    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.report.report import build_report

    for k, split in enumerate(("train", "valid", "test")):
        (tmp_path / f"{split}.txt").write_text(make_text(n_lines=60 if split == "train" else 15, seed=k))
    config = tmp_path / "m.toml"
    config.write_text(MATRIX.format(model=tiny_gpt2))
    results, data = tmp_path / "results", tmp_path / "data"
    planned = run_matrix(config, results, dry_run=True, data_dir=data, execution=Execution(show_progress=False))
    assert [r.status.value for r in planned.pretrained] == ["new"] and not results.exists()
    outcome = run_matrix(config, results, data_dir=data, execution=Execution(show_progress=False))
    assert outcome.counts == {"done": 2}
    rows = list(csv.DictReader(open(outcome.csv_path)))
    gpt2 = next(r for r in rows if r["model"] == "hf:gpt2-tiny")
    assert gpt2["match"] == "pretrained" and gpt2["seed"] == "" and gpt2["status"] == "done"
    direct = evaluate_pretrained(HFEvalSettings(str(tiny_gpt2), "toy", "test", stride=32, window=64,
                                                data_dir=str(data)))
    assert float(gpt2["test_bits_per_byte"]) == pytest.approx(direct.metrics["test"].bits_per_byte, rel=1e-9)
    result = results / gpt2["run_dir"] / "result.json"
    written = result.stat().st_mtime_ns
    again = run_matrix(config, results, data_dir=data, execution=Execution(show_progress=False))
    assert again.counts == {"done": 2} and result.stat().st_mtime_ns == written  # skipped, not scored again
    report = build_report(results, tmp_path / "report").read_text()
    line = next(line for line in report.splitlines() if line.startswith("| hf:gpt2-tiny"))
    assert f"{direct.metrics['test'].bits_per_byte:.4f}" in line and "◊" in line
    assert "◊ pretrained elsewhere" in report


def test_under_bf16_autocast_the_output_projection_stays_float32(tiny_gpt2, data_dir):
    model, tokenizer = load_pretrained(tiny_gpt2, torch.device("cpu"))
    ids = tokenizer((data_dir / "toy" / "test.txt").read_text()[:2000], add_special_tokens=False)["input_ids"]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(torch.tensor([ids[:32]])).logits.dtype == torch.float32
    exact = scored(model, ids, tokenizer.bos_token_id, 64, 32, streams=4)
    mixed = scored(model, ids, tokenizer.bos_token_id, 64, 32, streams=4, autocast=torch.bfloat16)
    assert mixed == pytest.approx(exact, rel=1e-2) and mixed != exact


@pytest.mark.parametrize("args, fragments", [
    (["--window", "64", "--stride", "64"], ["--stride", "less than the window"]),
    (["--window", "4096"], ["--window 4096", "longer than the model's context (2048)"]),
    (["--window", "0"], ["--window must be at least 2, not 0"]),
    (["--window", "1"], ["--window must be at least 2, not 1"]),  # no --stride given: the message is the window's
    (["--stride", "0"], ["--stride must be at least 1, not 0"]),
    (["--conventions", "harness"], ["--conventions", "lm-eval"]),
    (["--precision", "fp8"], ["--precision"]),
    (["--streams", "0"], ["--streams"]),
    (["--streams", "100000"], ["--streams 100,000 is more than the", "tokens of test"]),  # was: one-token streams
    (["--split", "dev"], ["--split"]),
])
def test_eval_hf_refuses_bad_settings_in_one_line_and_writes_nothing(tiny_gpt2, data_dir, tmp_path, cli_here,
                                                                      one_line_error, args, fragments):
    out = tmp_path / "out"
    done = cli_here("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--data-dir", str(data_dir), "--out", str(out),
                    *args)
    one_line_error(done, *fragments)
    assert not out.exists()


def test_eval_hf_and_a_matrix_refuse_a_folder_that_is_no_model(tmp_path, data_dir, cli_here, one_line_error):
    one_line_error(cli_here("eval-hf", str(tmp_path / "nothing"), "--dataset", "toy", "--data-dir", str(data_dir)),
                   "not a model folder")
    config = tmp_path / "m.toml"
    config.write_text(MATRIX.format(model="nothing").replace("[corpora.toy]\ntrain = \"train.txt\"\n"
                                                            "valid = \"valid.txt\"\ntest = \"test.txt\"\n", ""))
    one_line_error(cli_here("run-matrix", str(config), "--dry-run", "--data-dir", str(data_dir)),
                   "[[pretrained]] model", "not a model folder")


def test_eval_hf_names_its_default_folder_by_run_id(tiny_gpt2, data_dir, tmp_path, cli_here, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default folder is runs/ in the current folder
    for stride in ("16", "32", "16"):
        done = cli_here("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--window", "64", "--stride", stride,
                        "--data-dir", str(data_dir))
        assert done.returncode == 0, done.stderr
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 2 and all(f.startswith(f"hf-{tiny_gpt2.name}-toy-test-") for f in folders)


def test_eval_hf_refuses_damaged_or_mismatched_model_folders(tiny_gpt2, data_dir, tmp_path, cli_here, one_line_error):
    import shutil

    from transformers import GPT2Config, GPT2LMHeadModel

    def variant(name, change):
        folder = tmp_path / name
        shutil.copytree(tiny_gpt2, folder)
        change(folder)
        return folder

    cases = {
        "holds no tokenizer": variant("no-tokenizer", lambda f: [(f / n).unlink() for n in ("tokenizer.json",
                                                                                           "tokenizer_config.json")]),
        "could not be loaded": variant("corrupt", lambda f: (f / "model.safetensors").write_bytes(b"garbage")),
        "save the model's own tokenizer": variant("only-spm", lambda f: [  # a tokenizer.model that is no model
            (f / n).unlink() for n in ("tokenizer.json", "tokenizer_config.json")] + [
            (f / "tokenizer.model").write_bytes(b"not a sentencepiece model")]),
        "is not the model's": variant("small-vocab", lambda f: GPT2LMHeadModel(GPT2Config(
            vocab_size=50, n_positions=64, n_embd=8, n_layer=1, n_head=1)).save_pretrained(f)),
    }
    for fragment, folder in cases.items():
        out = tmp_path / f"out-{folder.name}"
        one_line_error(cli_here("eval-hf", str(folder), "--dataset", "toy", "--data-dir", str(data_dir), "--out",
                           str(out)), fragment)
        assert not out.exists()


def test_eval_hf_never_writes_into_a_training_run_or_a_matrix(tiny_gpt2, data_dir, tmp_path, cli_here, one_line_error):
    for name, content in (("spec.json", '{"run_id": "0123456789abcdef"}'), ("checkpoint.pt", "x"),
                          ("runs.csv", "model\n")):
        out = tmp_path / name.replace(".", "-")
        out.mkdir()
        (out / name).write_text(content)
        one_line_error(cli_here("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--data-dir", str(data_dir), "--out",
                           str(out)), str(out))
        assert sorted(p.name for p in out.iterdir()) == [name]


def test_a_split_without_tokens_is_not_scored(tiny_gpt2):
    from bench.engine.score.hf_eval import check_ids
    from bench.errors import BenchError

    model, _ = load_pretrained(tiny_gpt2, torch.device("cpu"))
    with pytest.raises(BenchError, match="no tokens"):
        check_ids([], 0, model, "test")


def test_a_matrix_checks_pretrained_windows_against_the_model_before_running(tiny_gpt2, tmp_path, cli_here,
                                                                             one_line_error, data_dir):
    config = tmp_path / "m.toml"
    for bad, fragment in (("window = 100000", "window 100000 is longer than the model's context (2048)"),
                          ("stride = 4096", "stride must be less than the window (2048)")):
        config.write_text(MATRIX.format(model=tiny_gpt2).replace("window = 64\nstride = 32", bad))
        one_line_error(cli_here("run-matrix", str(config), "--dry-run", "--data-dir", str(data_dir)), str(config),
                       fragment)
    # a mistyped dataset: refused at --dry-run (it was listed as 'no data', exit 0, and failed after training)
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text(f"some text for the {split} split of the toy corpus\n" * 200)
    config.write_text(MATRIX.format(model=tiny_gpt2).replace('name = "gpt2-tiny"', 'name = "gpt2-tiny"\n'
                                                             'dataset = "wikitext-3"'))
    # its own data folder: the shared one holds a corpus 'toy' of other files, which the config may not replace
    one_line_error(cli_here("run-matrix", str(config), "--dry-run", "--data-dir", str(tmp_path / "data")),
                   "[[pretrained]] gpt2-tiny: unknown corpus 'wikitext-3'")


def test_a_model_with_nan_weights_gives_no_result(tiny_gpt2, data_dir, tmp_path, cli_here, one_line_error):
    import shutil

    from transformers import GPT2LMHeadModel

    broken = tmp_path / "nan-gpt2"
    shutil.copytree(tiny_gpt2, broken)
    model = GPT2LMHeadModel.from_pretrained(broken)
    with torch.no_grad():
        model.transformer.h[0].mlp.c_fc.weight.fill_(float("nan"))
    model.save_pretrained(broken)
    out = tmp_path / "out"
    one_line_error(cli_here("eval-hf", str(broken), "--dataset", "toy", "--data-dir", str(data_dir), "--out", str(out)),
                   "non-finite losses")
    assert not (out / "result.json").exists()


def test_eval_hf_on_a_full_disk_leaves_no_folder(tiny_gpt2, data_dir, tmp_path, cli):
    from tests.test_bad_inputs import mounted

    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", "size=64k", "tmpfs") as full:
        filler = full / "filler"
        try:  # fill the disk: a folder still fits (no data block on tmpfs), result.json does not
            with open(filler, "wb") as f:
                while True:
                    f.write(b"x" * 4096)
                    f.flush()
        except OSError:
            pass
        done = cli("eval-hf", str(tiny_gpt2), "--dataset", "toy", "--data-dir", str(data_dir), "--window", "64",
                   "--out", str(full / "out"))
        assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: "), done.stderr
        assert [p.name for p in full.iterdir()] == ["filler"]
