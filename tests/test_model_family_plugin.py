"""A model family is declared in one place: a class with its traits, registered in bench.models.MODELS. Declared
in tests/toy_family.py (a tiny GRU language model), it trains in a matrix, is drawn in the report with its own
marker, and is listed by `bench models list` and `bench config fields`; a family whose setting is also a training
setting is refused."""

import json
import re
from dataclasses import dataclass

import matplotlib.axes
import pytest
import torch
import torch.nn as nn

from bench.errors import BenchError
from bench.models import MODELS
from bench.models.common import LanguageModel
from tests.toy_family import ToyGRU, ToyGRUConfig

CONFIG = """
[matrix]
name = "gru"
match = "chars"

[corpora.toy]
train = "train.txt"
valid = "valid.txt"
test = "test.txt"

[axes]
model = ["toy-gru"]
tokenizer = ["byte", "word-open:60"]
dataset = ["toy"]
seed = [0]

[budget]
chars = 2_000

[context]
chars = 32

[shared]
preset = "tiny"
stop_if_not_learning = false
eval_every = 5
eval_max_tokens = 200
eval_chunk = 32
checkpoint_every = 5
"""


def test_a_family_declared_once_trains_in_a_matrix_and_is_drawn_with_its_own_marker(toy_gru, tmp_path, make_text,
                                                                                    monkeypatch):
    from bench.study.matrix.execute import Execution, run_matrix
    from bench.study.report.report import build_report

    for i, split in enumerate(("train", "valid", "test")):
        (tmp_path / f"{split}.txt").write_text(make_text(n_lines=150 if split == "train" else 25, seed=i))
    (tmp_path / "gru.toml").write_text(CONFIG)
    results = tmp_path / "results"
    outcome = run_matrix(tmp_path / "gru.toml", results, data_dir=tmp_path / "data",
                         execution=Execution(show_progress=False))
    assert outcome.counts == {"done": 2}

    drawn = []  # every legend entry of the report's figures: (label, marker)
    legend = matplotlib.axes.Axes.legend

    def recording_legend(ax, *args, handles=(), **kwargs):
        drawn.extend((h.get_label(), h.get_marker()) for h in handles if hasattr(h, "get_marker"))
        return legend(ax, *args, handles=handles, **kwargs) if handles else legend(ax, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", recording_legend)
    build_report(results, tmp_path / "report")
    assert ("toy-gru", "v") in drawn


def test_a_family_is_listed_with_its_settings(toy_gru, cli_here):
    listed = json.loads(cli_here("models", "list", "--json").stdout)
    assert {"model": "toy-gru", "kind": "recurrent", "presets": ["tiny"], "compiled parts": [],
            "marker": "v"} in listed
    fields = json.loads(cli_here("config", "fields", "--model", "toy-gru", "--json").stdout)
    assert {f["name"] for f in fields if f["section"] == "model: toy-gru"} == {"width"}
    assert "model: toy-gru" in cli_here("config", "fields").stdout


def test_a_family_whose_setting_is_a_training_setting_is_refused_where_its_settings_are_read():
    @dataclass
    class ClashingConfig(ToyGRUConfig):
        clip: float = 1.0  # the gradient-clipping setting's name: `--set clip=...` could not say which

    class Clashing(ToyGRU):
        config_class = ClashingConfig
        marker = "P"

    from bench.engine.spec import RunSpec, validate_spec

    MODELS.register("clashing", Clashing)
    try:
        with pytest.raises(BenchError, match=r"^model 'clashing': its setting\(s\) clip are also training settings"):
            validate_spec(RunSpec(model="clashing", preset="tiny", overrides={"clip": 0.5}))
    finally:
        del MODELS["clashing"]


def test_its_gru_is_a_cudnn_rnn_to_the_precision_policy_and_the_device(monkeypatch):
    from bench.engine.hardware.device import flatten_rnns
    from bench.engine.hardware.precision import plan_precision
    from bench.models.recurrent import has_rnn

    model = ToyGRU(ToyGRUConfig(vocab_size=8, width=4))
    assert has_rnn(model)
    assert plan_precision("auto", "auto", torch.device("cuda"), has_rnn(model)).name == "float16 autocast, loss scaling"
    flattened = []
    monkeypatch.setattr(nn.GRU, "flatten_parameters", lambda module: flattened.append(module))
    flatten_rnns(model)
    assert flattened == [model.gru]


def test_a_family_without_a_marker_of_its_own_is_refused():
    class Diamond(ToyGRU):
        marker = "D"

    with pytest.raises(BenchError, match=r"^model 'diamond': figure marker 'D' is a pretrained model's"):
        MODELS.register("diamond", Diamond)

    class Unmarked(LanguageModel):
        config_class = ToyGRUConfig

    with pytest.raises(BenchError, match=r"^model 'unmarked': Unmarked declares no marker"):
        MODELS.register("unmarked", Unmarked)
    assert "diamond" not in MODELS and "unmarked" not in MODELS


@dataclass
class NoVocabulary:
    width: int = 4


@pytest.mark.parametrize("change, said", [
    ({"forward": LanguageModel.forward}, "does not implement forward; every family implements forward(tokens, state)"),
    ({"flops_per_token": LanguageModel.flops_per_token}, "does not implement flops_per_token"),
    ({"config_class": dict}, "has a config_class, <class 'dict'>, that is not a dataclass"),
    ({"config_class": NoVocabulary}, "has a config_class, NoVocabulary, without a vocab_size field"),
    ({"window_setting": "context"}, "names window_setting 'context', which is no field of ToyGRUConfig"),
], ids=["forward", "flops", "not a dataclass", "no vocab_size", "window"])
def test_a_family_that_breaks_its_contract_is_refused_at_registration_in_one_line(change, said):
    broken = type("Broken", (ToyGRU,), {"marker": "X", **change})
    with pytest.raises(BenchError, match=f"^model 'broken': Broken {re.escape(said)}") as refused:
        MODELS.register("broken", broken)
    assert "\n" not in str(refused.value) and "broken" not in MODELS
    with pytest.raises(BenchError, match="is not a subclass of bench.models.common.LanguageModel"):
        MODELS.register("broken", object)
