"""``bench export RUN OUT --format hf``: a finished run as a transformers folder, read where ``bench`` cannot be
imported. In a subprocess that refuses every import of ``bench`` and ``tokenizers_study``, transformers alone loads
the folder and its ``score_text.py`` scores the test split as ``bench eval --streams 1`` does: the total NLL agrees
to 1e-6 for an SHA-RNN (byte and BPE), an LSTM (characters) and a Transformer (open-vocabulary words: the scheme's
own code); and it disagrees for a folder with a transposed weight or a shifted token id. ``bench eval-hf
--trust-remote-code`` scores the exported Transformer to the same number; ``bench eval`` and ``init_from`` read the
folder back as the run's own weights. On WikiText-2's test split the exported tokenizers give bench's ids."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")  # the dev extra (make test) installs it

from bench.data.user import add_user_corpus  # noqa: E402
from bench.engine import checkpoint  # noqa: E402
from bench.engine.run import train, weights_digest  # noqa: E402
from bench.engine.score.inference import evaluate_checkpoint, sample  # noqa: E402
from bench.engine.spec import RunSpec  # noqa: E402
from bench.errors import BenchError  # noqa: E402
from bench.export.hf_folder import export_run, write_tokenizer  # noqa: E402
from tests.test_pretrained import gpt2_like, spm_model  # noqa: E402
from tokenizers_study.registry import train_tokenizer  # noqa: E402
from tokenizers_study.text import read_text_exact  # noqa: E402

TINY_RNN = {"emsize": 16, "nhid": 64}
RUNS = {"sha-rnn-byte": ("sha-rnn", "byte", TINY_RNN), "sha-rnn-bpe": ("sha-rnn", "bpe:300", TINY_RNN),
        "lstm-char": ("lstm", "char", {"emsize": 16, "nhid": 32}),
        "transformer-word-open": ("transformer", "word-open:60", {"d_model": 16, "nheads": 2})}
SHARED = {"bptt": 16, "batch_size": 4, "max_steps": 8, "eval_every": 0, "eval_streams": 2, "eval_max_tokens": 300,
          "stop_if_not_learning": False, "final_eval_splits": "valid"}
TOLERANCE = 1e-6

# Run first in the subprocess: bench and tokenizers_study cannot be imported there, whatever sys.path holds.
WITHOUT_BENCH = '''
import sys
class NoBench:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("bench", "tokenizers_study", "cli"):
            raise ImportError(f"{name} is not importable here")
sys.meta_path.insert(0, NoBench())
try:
    import bench
    raise SystemExit("bench was importable")
except ImportError:
    pass
'''
SCORE = WITHOUT_BENCH + '''
import contextlib, io, json, re, runpy, shlex
text_file, out, *folders = sys.argv[1:]
with open(text_file, "rb") as handle:
    text = handle.read().decode("utf-8", "surrogateescape")
from transformers import AutoTokenizer
scored = {}
for folder in folders:
    script = runpy.run_path(folder + "/score_text.py")
    ids = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)(text)["input_ids"]
    with open(folder + "/README.md") as handle:
        block = re.search(r"```bash\\n(.*?)```", handle.read().split("## Results")[1], re.S).group(1)
    card = {}
    for line in block.strip().splitlines():  # the card's commands as written, FOLDER this folder
        command, comment = line.split("#")
        sys.argv = shlex.split(command.replace("FOLDER", folder))[1:]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            script["main"]()
        split, figure = re.fullmatch(r" (\\w+): ([0-9.]+) bits/byte", comment).groups()
        card[split] = {"card": float(figure), "printed": json.loads(printed.getvalue())}
    scored[folder] = {"score": script["score"](folder, text, streams=1), "ids": ids, "card": card}
with open(out, "w") as handle:
    json.dump(scored, handle)
'''
ENCODE = WITHOUT_BENCH + '''
import json, numpy
from transformers import AutoTokenizer
text_file, *folders = sys.argv[1:]
with open(text_file, "rb") as handle:
    text = handle.read().decode("utf-8", "surrogateescape")
for folder in folders:
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    ids = tokenizer(text)["input_ids"]
    numpy.save(folder + "/ids.npy", numpy.asarray(ids, dtype=numpy.int64))
    with open(folder + "/decoded.txt", "wb") as handle:
        handle.write(tokenizer.decode(ids[1:]).encode("utf-8", "surrogateescape"))
'''


def without_bench(tmp: Path, script: str, *args: str) -> None:
    """``script`` in a fresh Python where bench is not importable, with its own transformers module cache."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HOME": str(tmp / "hf-home"),
                                                                          "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, make_text):
    root = tmp_path_factory.mktemp("plain")
    paths = {split: root / f"{split}.txt" for split in ("train", "valid", "test")}
    for seed, (split, path) in enumerate(paths.items()):
        path.write_text(make_text(n_lines=200 if split == "train" else 30, seed=seed))
    add_user_corpus("plain", paths, root / "data")
    return root / "data", paths["test"]


@pytest.fixture(scope="module")
def exported(corpus, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Each run of RUNS trained and exported: name -> (run folder, exported folder)."""
    out = {}
    for name, (model, scheme, sizes) in RUNS.items():
        root = tmp_path_factory.mktemp(name)
        train(RunSpec(model=model, preset="tiny", tokenizer=scheme, dataset="plain", seed=0,
                      overrides={**SHARED, **sizes}, data_dir=str(corpus[0]), out_dir=str(root / "run")),
              show_progress=False)
        out[name] = root / "run", export_run(root / "run", root / "hf")
    return out


@pytest.fixture(scope="module")
def scored(exported, corpus, tmp_path_factory) -> dict[str, dict]:
    """Each exported folder, and two broken copies of the byte SHA-RNN's, scored on the test split by score_text.py
    in one Python without bench, beside bench eval's number: name -> {score, ids, bench}."""
    from safetensors.torch import load_file, save_file

    tmp = tmp_path_factory.mktemp("scored")
    folders = {name: folder for name, (_, folder) in exported.items()}
    folders |= {"transposed": tmp / "transposed", "shifted": tmp / "shifted"}
    for broken in ("transposed", "shifted"):
        shutil.copytree(exported["sha-rnn-byte"][1], folders[broken])
    weights = load_file(str(folders["transposed"] / "model.safetensors"))  # a square weight transposed
    square = next(name for name, w in weights.items() if w.dim() == 2 and w.shape[0] == w.shape[1])
    transposed = weights | {square: weights[square].t().contiguous()}
    save_file(transposed, str(folders["transposed"] / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((folders["transposed"] / "config.json").read_text())  # its sha256 recorded: only the number
    config["weights_sha256"] = weights_digest({k.removeprefix("model."): v for k, v in transposed.items()})  # tells
    (folders["transposed"] / "config.json").write_text(json.dumps(config))
    tokenizer = json.loads((folders["shifted"] / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["e"], vocab["t"] = vocab["t"], vocab["e"]  # two of the text's most frequent bytes trade ids
    (folders["shifted"] / "tokenizer.json").write_text(json.dumps(tokenizer))
    without_bench(tmp, SCORE, str(corpus[1]), str(tmp / "scored.json"), *map(str, folders.values()))
    found = json.loads((tmp / "scored.json").read_text())
    out = {name: found[str(folder)] for name, folder in folders.items()}
    for name, (run, _) in exported.items():
        out[name]["bench"] = evaluate_checkpoint(run, split="test", streams=1)
    return out


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_transformers_alone_scores_the_split_as_bench_eval_does(scored, exported, name):
    mine, theirs = scored[name]["score"], scored[name]["bench"].metrics
    assert mine["tokens"] == theirs.n_tokens and mine["bytes"] == theirs.n_bytes and mine["chars"] == theirs.n_chars
    assert relative(mine["total_nll_nats"], theirs.total_nll_nats) <= TOLERANCE
    assert relative(mine["bits_per_byte"], theirs.bits_per_byte) <= TOLERANCE
    tokenizer = checkpoint.load(exported[name][0])["tokenizer"]
    from tokenizers_study import tokenizer_from_bytes
    bench_tokenizer = tokenizer_from_bytes(tokenizer.encode("ascii"))
    text = read_text_exact(scored[name]["bench"].data.file)
    assert scored[name]["ids"] == [bench_tokenizer.bos_id] + bench_tokenizer.encode(text).tolist()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_the_cards_commands_give_its_figures_with_transformers_alone(scored, exported, name):
    """Each figure of the card, in the run's layout (not one stream), by the card's own command."""
    result = json.loads((exported[name][0] / "result.json").read_text())
    card = scored[name]["card"]
    assert sorted(card) == sorted(result["metrics"]) and result["evaluation"]["layout"]["streams"] > 1
    for split, figures in card.items():
        printed = figures["printed"]
        assert relative(printed["bits_per_byte"], figures["card"]) <= TOLERANCE, split
        assert relative(printed["bits_per_byte"], result["metrics"][split]["bits_per_byte"]) <= TOLERANCE, split
        assert printed["layout"] == {k: result["evaluation"]["layout"][k] for k in ("streams", "chunk")}


@pytest.mark.slow
def test_the_folder_holds_what_the_field_expects(exported):
    from safetensors.torch import load_file

    run, folder = exported["sha-rnn-bpe"]
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_bench.BenchForCausalLM"
    payload = checkpoint.load(run)
    assert config["family"] == "sha-rnn" and config["window"] is None
    assert config["eval_chunk"] == payload["resolved"]["train"]["eval_chunk"]  # as bench eval feeds it
    assert config["eval_streams"] == payload["resolved"]["train"]["eval_streams"]
    assert config["weights_sha256"] == weights_digest(payload["model"])
    weights = load_file(str(folder / "model.safetensors"))
    best = payload["model"]
    assert sorted(weights) == sorted(f"model.{name}" for name in best)
    assert all(torch.equal(weights[f"model.{name}"], tensor) for name, tensor in best.items())
    assert (folder / "tokenizer.json").is_file() and not (folder / "tokenization_bench.py").exists()
    assert (exported["transformer-word-open"][1] / "tokenization_bench.py").is_file()
    card = (folder / "README.md").read_text()
    result = json.loads((run / "result.json").read_text())
    for fact in (result["run_id"], result["data"]["splits"]["train"]["sha256"], f"{result['model']['params_total']:,}",
                 f"{result['metrics']['valid']['bits_per_byte']:.4f}", result["provenance"]["git"]["commit"],
                 "bits/byte", "word ppl", "licence of the text"):
        assert fact in card
    provenance = json.loads((folder / "bench_run.json").read_text())
    assert provenance["run_id"] == result["run_id"] and provenance["data"]["test"]["sha256"]
    assert not list(folder.parent.glob(".*.tmp"))  # the scratch folder became OUT


@pytest.mark.slow
def test_a_wrong_export_is_caught(scored):
    """A transposed weight and a shifted token id each change the number transformers gives."""
    bench = scored["sha-rnn-byte"]["bench"].metrics.total_nll_nats
    for broken in ("transposed", "shifted"):
        assert relative(scored[broken]["score"]["total_nll_nats"], bench) > TOLERANCE, broken
    assert scored["transposed"]["ids"] == scored["sha-rnn-byte"]["ids"]
    assert scored["shifted"]["ids"] != scored["sha-rnn-byte"]["ids"]


@pytest.mark.slow
def test_eval_hf_scores_the_exported_transformer_to_the_same_number(exported, scored, corpus, tmp_path, cli):
    run, folder = exported["transformer-word-open"]
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home")}
    args = ["eval-hf", str(folder), "--dataset", "plain", "--split", "test", "--streams", "1", "--data-dir",
            str(corpus[0]), "--json"]
    from bench.engine.score.hf_eval import HFEvalSettings, identify

    with pytest.raises(BenchError, match="give --trust-remote-code"):  # before anything is loaded or written
        identify(HFEvalSettings(str(folder), "plain", data_dir=str(corpus[0])))
    done = cli(*args, "--trust-remote-code", "--out", str(tmp_path / "hf"), env=env)
    assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)["metrics"]["test"]["total_nll_nats"]
    assert relative(total, scored["transformer-word-open"]["bench"].metrics.total_nll_nats) <= TOLERANCE
    recurrent = cli("eval-hf", str(exported["sha-rnn-bpe"][1]), *args[2:], "--trust-remote-code", "--out",
                    str(tmp_path / "rnn"), env=env)
    assert recurrent.returncode == 1 and "eval-hf scores windows without its state" in recurrent.stderr


def with_export(model: Path) -> str:
    """test_hf_eval's matrix, its [[pretrained]] entry the exported folder scored in one stream."""
    from tests.test_hf_eval import MATRIX

    entry = 'name = "gpt2-tiny"\nwindow = 64\nstride = 32\n'
    assert entry in MATRIX
    return MATRIX.format(model=model).replace(entry, 'name = "exported"\nstreams = 1\n')


@pytest.mark.slow
def test_a_matrix_scores_an_exported_transformer_it_is_told_to_trust(exported, scored, corpus, tmp_path,
                                                                     cli_here, one_line_error):
    import csv

    from bench.study.matrix.execute import Execution, run_matrix

    for split in ("train", "valid", "test"):
        shutil.copyfile(corpus[0].parent / f"{split}.txt", tmp_path / f"{split}.txt")
    config, results, data = tmp_path / "m.toml", tmp_path / "results", tmp_path / "data"
    transformer, recurrent = exported["transformer-word-open"][1], exported["sha-rnn-bpe"][1]
    for model, extra, fragment in (
            (transformer, "", "give trust_remote_code = true in its [[pretrained]] entry to run it"),
            (recurrent, "trust_remote_code = true\n", "eval-hf scores windows without its state"),
            (transformer, "trust_remote_code = 1\n", "trust_remote_code must be true or false, not 1")):
        config.write_text(with_export(model) + extra)
        one_line_error(cli_here("run-matrix", str(config), "--results", str(results), "--data-dir", str(data),
                                "--dry-run"), fragment)
        assert not results.exists()
    config.write_text(with_export(transformer) + "trust_remote_code = true\n")
    outcome = run_matrix(config, results, data_dir=data, execution=Execution(show_progress=False))
    assert outcome.counts == {"done": 2}
    row = next(r for r in csv.DictReader(open(outcome.csv_path)) if r["model"] == "hf:exported")
    ours = scored["transformer-word-open"]["bench"].metrics
    assert relative(float(row["test_bits_per_byte"]), ours.bits_per_byte) <= TOLERANCE


@pytest.mark.slow
def test_bench_eval_and_init_from_read_the_exported_folder(exported, scored, corpus, tmp_path):
    run, folder = exported["sha-rnn-bpe"]
    again = evaluate_checkpoint(folder, split="test", streams=1)
    assert again.metrics.total_nll_nats == scored["sha-rnn-bpe"]["bench"].metrics.total_nll_nats
    assert again.verified == scored["sha-rnn-bpe"]["bench"].verified
    best = checkpoint.load(run)
    result = train(RunSpec(model="sha-rnn", preset="tiny", tokenizer="bpe:300", dataset="plain", seed=1,
                           overrides={**SHARED, **TINY_RNN, "max_steps": 2, "init_from": str(folder)},
                           data_dir=str(corpus[0]), out_dir=str(tmp_path / "more")), show_progress=False)
    assert result.training.started_from == {"run_id": best["run_id"], "weights_sha256": weights_digest(best["model"])}
    other = {split: tmp_path / f"{split}.txt" for split in ("train", "valid", "test")}  # the same corpus name,
    for split, path in other.items():                                                  # another test text
        shutil.copyfile(corpus[0].parent / f"{split}.txt", path)
    other["test"].write_text(other["test"].read_text() + "one more line\n")
    add_user_corpus("plain", other, tmp_path / "other-data")
    with pytest.raises(BenchError, match="is not the file this run recorded"):  # the folder's records, checked
        evaluate_checkpoint(folder, split="test", data_dir=tmp_path / "other-data")
    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged)
    (damaged / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(BenchError, match="is not the file bench_run.json records"):
        evaluate_checkpoint(damaged, split="test", streams=1)


@pytest.mark.parametrize("name", ["sha-rnn-bpe", "transformer-word-open"])
def test_bench_sample_and_lm_evals_bench_model_take_the_exported_folder(exported, corpus, name):
    from lm_eval.api.instance import Instance

    from bench.engine.score.lm_eval_model import BenchLM

    run, folder = exported[name]
    assert sample(folder, "the ", max_tokens=12, seed=3) == sample(run, "the ", max_tokens=12, seed=3)
    text = corpus[1].read_text()[:400]
    rolling, continued = (Instance("loglikelihood_rolling", {}, (text,), 0),
                          Instance("loglikelihood", {}, (text[:99], text[99:]), 1))
    scored = [(model.loglikelihood_rolling([rolling]), model.loglikelihood([continued]))
              for model in (BenchLM(run=str(run), device="cpu"), BenchLM(run=str(folder), device="cpu"))]
    assert scored[0] == scored[1] and np.isfinite(scored[0][0][0])


def test_an_export_never_writes_beside_a_run_or_over_a_folder(tmp_path):
    with pytest.raises(BenchError, match="is not a run folder"):
        export_run(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


SPM_LOSSLESS = {"vocab_size": 1024, "normalization_rule_name": "identity", "byte_fallback": True,
                "add_dummy_prefix": False, "remove_extra_whitespaces": False}


@pytest.mark.slow
@pytest.mark.mirror
def test_the_exported_tokenizers_give_bench_ids_on_wikitext2_test(wt2_data_dir, tmp_path):
    """Every trained scheme and both kinds of file: tokenizer.json (byte, char, BPE, hf:) or the scheme's own code (the
    rest, an spm: file's included); ids equal
    bench's on the whole test split, and the text comes back wherever the scheme is lossless."""
    train_text = read_text_exact(wt2_data_dir / "wikitext-2" / "wiki.train.tokens")[:1_000_000]
    test_file = wt2_data_dir / "wikitext-2" / "wiki.test.tokens"
    test = read_text_exact(test_file)
    schemes = ["byte", "char", "bpe:1024", "word-open:2048", "word:2048", "sp-unigram:1024", "sp-bpe:1024",
               f"hf:{gpt2_like(tmp_path / 'gpt2', train_text)}",
               f"spm:{spm_model(tmp_path / 'spm.model', train_text, **SPM_LOSSLESS)}"]
    folders, tokenizers = [], {}
    for scheme in schemes:
        tokenizer = train_tokenizer(scheme, train_text)
        folder = tmp_path / scheme.split("/")[0].replace(":", "-")
        folder.mkdir()
        write_tokenizer(folder, tokenizer, tokenizer.to_bytes().decode("ascii"))
        folders.append(str(folder))
        tokenizers[str(folder)] = tokenizer
    without_bench(tmp_path, ENCODE, str(test_file), *folders)
    for folder, tokenizer in tokenizers.items():
        ids = np.load(Path(folder) / "ids.npy")
        assert ids[0] == tokenizer.bos_id, folder
        assert np.array_equal(ids[1:], tokenizer.encode(test)), folder
        decoded = read_text_exact(Path(folder) / "decoded.txt")
        assert (decoded == test) == tokenizer.loss_report(test).lossless, folder


def test_tokenizer_json_gives_the_scheme_ids_on_awkward_text(adversarial_texts, corpus_text, tmp_path):
    """The library's file of each scheme that has one, on texts of blank lines, runs of spaces, tabs, CRLF and
    characters unseen in training (not undecodable bytes or a literal <bos>, which it cannot take)."""
    from tokenizers import Tokenizer as HFTokenizer

    texts = [t for t in adversarial_texts if "<bos>" not in t and "\u2581" not in t
             and not any(0xDC80 <= ord(c) <= 0xDCFF for c in t)]
    texts += [" = Title = \n \n The text . \n \n \n", "a \n\n\n  b \n \t\n", "\n \n \n",  # WikiText's blank lines
              "a <|endoftext|> in the text"]  # a pretrained file's special token, which the scheme reads as text
    for scheme in ("byte", "char", "bpe:300", f"hf:{gpt2_like(tmp_path / 'gpt2', corpus_text)}", "sp-bpe:300"):
        tokenizer = train_tokenizer(scheme, corpus_text.replace("\n", " \n \n "))  # merges across line breaks
        library = HFTokenizer.from_str(tokenizer.hf_tokenizer_json())
        for text in texts:
            assert library.encode(text).ids == [tokenizer.bos_id] + tokenizer.encode(text).tolist(), (scheme, text)
            assert library.decode(library.encode(text).ids[1:], skip_special_tokens=False) == text, (scheme, text)


@pytest.mark.slow
def test_the_docs_commands_as_written(exported, scored, tmp_path, cli):
    """docs/sharing.md's "bench export" section: its bench export and bench eval lines, and its Python, without
    bench; the page's run folder and exported folder are this test's."""
    from tests.conftest import REPO

    section = (REPO / "docs" / "sharing.md").read_text().split("## A Hugging Face folder", 1)[1].split("\n## ", 1)[0]
    shell = "".join(re.findall(r"```bash\n(.*?)```", section, re.S))
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    lines = {line.split("#")[0].split()[1]: line.split("#")[0].split() for line in shell.splitlines()
             if line.startswith("bench ")}
    run, out = exported["lstm-char"][0], tmp_path / "shared"
    places = {"runs/tiny-tf": str(run), "tiny-tf-hf": str(out)}
    for command in ("export", "eval"):
        argv = [places.get(arg, arg) for arg in lines[command][1:]]
        done = cli(*argv, *(["--json"] if command == "eval" else []))
        assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)["metrics"]["total_nll_nats"]
    assert total == scored["lstm-char"]["bench"].metrics.total_nll_nats
    without_bench(tmp_path, WITHOUT_BENCH + python.replace('"tiny-tf-hf"', repr(str(out))) + GREEDY)


GREEDY = """
assert out.logits.shape[1] == ids.shape[1] and ids[0, 0] == tokenizer.bos_token_id
import torch
greedy = ids
for _ in range(4):  # the most likely next token, by hand: what generate() must give
    greedy = torch.cat([greedy, model(greedy).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
assert model.generate(ids, max_new_tokens=4, do_sample=False).tolist() == greedy.tolist()
"""


def test_vendoring_makes_imports_relative_and_refuses_what_a_flat_file_cannot_be(tmp_path):
    """The family's code is copied with its first-party imports made relative; an import that would need a package
    (or a plain `import bench...`) fails at export, by name, never in the user's hands."""
    from bench.export.vendor import _first_party_imports, check_copied_along, relative, vendor

    assert relative("m", "from bench.models.common import LanguageModel\n") == \
        "from .bench_models_common import LanguageModel\n"
    assert relative("m", "def f():\n    import tokenizers_study.text as text_module\n") == \
        "def f():\n    from . import tokenizers_study_text as text_module\n"
    with pytest.raises(BenchError, match="import of bench.models.common cannot be made relative"):
        relative("m", "import bench.models.common\n")
    with pytest.raises(BenchError, match="`from bench import models` imports a module"):
        _first_party_imports("m", "from bench import models\n")
    written = vendor(["bench.models.lstm"], tmp_path)
    assert sorted(written) == ["bench_models_common.py", "bench_models_lstm.py", "bench_settings.py"]
    (tmp_path / "root.py").write_text("from .bench_models_lstm import LSTMLM\n")
    check_copied_along(tmp_path, "root.py", written)
    (tmp_path / "root.py").write_text("from . import bench_models_lstm\n")  # transformers would copy nothing
    with pytest.raises(BenchError, match="would not be copied along with root.py"):
        check_copied_along(tmp_path, "root.py", written)
