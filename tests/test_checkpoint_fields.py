"""A checkpoint whose recorded fields were edited or damaged, or whose weights are not finite: one line that names
the field or the tensors, never a traceback, and nothing written (a run started from it leaves no folder)."""

import math
from pathlib import Path

import pytest
import torch

from bench.engine.run import train
from bench.engine.spec import RunSpec
from tests.test_bad_inputs import FAST, TRAIN


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make_toy_corpus) -> Path:
    root = tmp_path_factory.mktemp("fields")
    make_toy_corpus(root)
    train(RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", overrides=FAST,
                  data_dir=str(root / "data"), out_dir=str(root / "run")), show_progress=False)
    return root


def _edited(root: Path, name: str, edit) -> Path:
    """A copy of the run's best.pt with ``edit(payload)`` applied, as a user's torch.load / torch.save would."""
    payload = torch.load(root / "run" / "best.pt", weights_only=True)
    edit(payload)
    (root / name).mkdir()
    torch.save(payload, root / name / "best.pt")
    return root / name / "best.pt"


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def edit(payload):
        node = payload
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return edit


FIELDS = [
    ("precision", _set("resolved", "train", "precision", "float17"),
     "its recorded train config: precision must be one of auto, float32, bfloat16, float16, not 'float17'"),
    ("a width as text", _set("resolved", "train", "bptt", "16"), "its recorded train config: bptt is '16', not int"),
    ("a flag as text", _set("resolved", "train", "seq_jitter", "yes"), "seq_jitter is 'yes', not bool"),
    ("a setting of no version", _set("resolved", "train", "bogus", 1), "unexpected keyword argument 'bogus'"),
    ("a model size", _set("resolved", "model", "nhid", -3), "its recorded model config: bad sha-rnn configuration"),
    ("a spec that is no table", _set("resolved", "spec", "x"), "its recorded spec: 'x' is not a dict"),
    ("a corpus name as a number", _set("resolved", "spec", "dataset", 5), "dataset is 5, not str"),
    ("a damaged tokenizer", _set("tokenizer", "{not json"), "its recorded tokenizer: "),
    ("a tokenizer of another size", _set("resolved", "model", "vocab_size", 10), "byte has 257 tokens, the model 10"),
    ("a split's record", _set("data", "test", "sha256", 5), "its recorded data of test: sha256 is 5, not str"),
    ("a tensor that is none", _set("model", "embedding.weight", 3), "its recorded weights embedding.weight"),
]


@pytest.mark.parametrize("name, edit, fragment", FIELDS, ids=[case[0] for case in FIELDS])
def test_eval_of_a_checkpoint_with_an_unreadable_field_is_one_line(trained, name, edit, fragment, cli_here,
                                                                   one_line_error):
    path = _edited(trained, name.replace(" ", "-"), edit)
    one_line_error(cli_here("eval", str(path), "--data-dir", str(trained / "data")),
                   f"{path} is not a readable checkpoint (", fragment)


def test_a_checkpoint_naming_a_model_not_registered_here_names_a_plug_in_and_an_edit(trained, cli_here,
                                                                                       one_line_error):
    """A plug-in's run read where its module is not imported is intact: "damaged, train it again" would be wrong."""
    path = _edited(trained, "unregistered", _set("resolved", "spec", "model", "unregistered-family"))
    one_line_error(cli_here("eval", str(path), "--data-dir", str(trained / "data")),
                   f"{path} names model 'unregistered-family', which is not registered here: if a plug-in declares it, "
                   f"install its package or name it with --plugin", "the checkpoint was edited: restore it")


def test_every_reader_refuses_an_unreadable_field(trained, cli_here, one_line_error):
    """sample, and training from it (init_from read the spec with .get: AttributeError), refuse alike."""
    path = _edited(trained, "readers", _set("resolved", "spec", "x"))
    one_line_error(cli_here("sample", str(path)), "its recorded spec: 'x' is not a dict")
    args = [a.format(data=trained / "data", new=trained / "from-edited") for a in TRAIN]
    one_line_error(cli_here(*args, "--set", f"init_from={path}"), "its recorded spec: 'x' is not a dict")
    assert not (trained / "from-edited").exists()


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_weights_that_are_not_finite_are_refused_by_name_before_anything_is_written(trained, bad, cli_here,
                                                                                    one_line_error):
    """Training from them said "training loss became nan at step 1; try a lower lr" and left a run folder."""
    def poison(payload):
        payload["model"]["embedding.weight"][0, 0] = bad
        payload["model"]["output_bias"][3] = bad

    path = _edited(trained, f"poisoned-{bad}", poison)
    out = trained / f"from-poisoned-{bad}"
    args = [a.format(data=trained / "data", new=out) for a in TRAIN]
    one_line_error(cli_here(*args, "--set", f"init_from={path.parent}"), f"{path} holds weights that are not finite",
                   "in output_bias, embedding.weight)", "use another checkpoint")
    assert not out.exists()
    one_line_error(cli_here("eval", str(path)), "holds weights that are not finite")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has the GPU the run recorded")
def test_a_run_trained_on_a_gpu_is_evaluated_on_a_machine_without_one(trained, cli_here):
    """``device=cuda`` recorded by a GPU run: on a CPU-only machine, eval's auto device is the CPU, not a refusal
    that advises a --set eval does not have."""
    gpu_run = _edited(trained, "gpu-run", _set("resolved", "train", "device", "cuda"))
    done = cli_here("eval", str(gpu_run), "--split", "valid", "--data-dir", str(trained / "data"))
    assert done.returncode == 0, done.stderr
    assert "sha-rnn / byte on toy valid" in done.stdout
