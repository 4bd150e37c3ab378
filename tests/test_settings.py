"""Settings are declared once (bench.settings.setting): the checks of --set and of the dataclasses themselves and
the reference (`bench config fields`) all read the declaration, so a range stated in the reference is the range
enforced, at its edges, for every field."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from bench.engine.fields import all_field_docs, field_docs
from bench.engine.spec import TrainConfig, parse_overrides
from bench.errors import BenchError
from bench.models import MODELS, config_class
from bench.settings import DROPOUT, MOST_WIDTH, POSITIVE, SIZE, Allowed, check_settings, refusal

SPECS = [(TrainConfig, "sha-rnn")] + [(config_class(model), model) for model in MODELS]


def declared_numbers():
    for cls, model in SPECS:
        for f in dataclasses.fields(cls):
            if f.metadata.get("allowed") is not None and f.name != "vocab_size":
                yield pytest.param(cls, model, f, id=f"{cls.__name__}.{f.name}")


def test_every_field_of_every_spec_is_declared_with_its_help():
    for cls, _ in SPECS:
        for f in dataclasses.fields(cls):
            assert f.metadata.get("help", "").strip(), f"{cls.__name__}.{f.name} is not made by setting()"
    assert all(d.section.startswith("training: ") for d in field_docs(TrainConfig, "training"))  # and its section


@pytest.mark.parametrize("cls,model,f", list(declared_numbers()))
def test_the_range_the_reference_states_is_the_range_set_enforces_at_its_edges(cls, model, f):
    allowed: Allowed = f.metadata["allowed"]
    doc = next(d for d in all_field_docs([model]) if d.name == f.name and d.section.startswith(
        "training" if cls is TrainConfig else "model"))
    assert doc.allowed == allowed.describe() and doc.allowed
    is_int = typing.get_type_hints(cls)[f.name] in (int, typing.Optional[int])
    step = 1 if is_int else 1e-9
    edges = []
    if allowed.low is not None:
        edges += [(allowed.low, not allowed.low_open), (allowed.low - step, False), (allowed.low + step, True)]
    if allowed.high is not None:
        edges += [(allowed.high, not allowed.high_open), (allowed.high + step, False), (allowed.high - step, True)]
    for value, accepted in edges:
        value = int(value) if step == 1 else float(value)
        if accepted:
            assert parse_overrides(model, {f.name: value})[f.name] == value
        else:
            with pytest.raises(BenchError, match=f"^{f.name}"):
                parse_overrides(model, {f.name: value})


@pytest.mark.parametrize("cls,model,f", list(declared_numbers()))
def test_a_spec_object_never_holds_a_value_its_declaration_refuses(cls, model, f):
    allowed: Allowed = f.metadata["allowed"]
    bad = allowed.low - 1 if allowed.low is not None else allowed.high + 1
    with pytest.raises(ValueError, match=f"^{f.name}"):
        cls(**{f.name: bad})


def test_the_messages_name_the_setting_and_its_range():
    field = dataclasses.fields(TrainConfig)[0]
    assert POSITIVE.refusal("lr", 0.0) == "lr must be positive, not 0.0"
    assert SIZE.refusal("emsize", 0) == "emsize must be at least 1, not 0"
    assert SIZE.refusal("emsize", MOST_WIDTH + 1) == "emsize 2,147,483,648 is beyond 2,147,483,647; lower it"
    assert DROPOUT.refusal("dropout", 1.0) == "dropout is a dropout rate and must be in [0, 1), not 1.0"
    assert Allowed(low=0).refusal("clip", -1) == "clip must not be negative, not -1"
    assert Allowed(low=0, high=1).refusal("min_lr_ratio", 2) == "min_lr_ratio must be in [0, 1], not 2"
    assert refusal(TrainConfig, field, True) == "batch_size must be a number, not True"
    assert refusal(TrainConfig, field, float("nan")) == "batch_size must be a finite number, not nan"
    assert refusal(TrainConfig, field, None) == "batch_size must be set; it cannot be none"
    max_steps = next(f for f in dataclasses.fields(TrainConfig) if f.name == "max_steps")
    assert refusal(TrainConfig, max_steps, None) is None  # an optional setting may be none


def test_a_literal_setting_is_one_of_its_values_however_it_is_made():
    with pytest.raises(ValueError, match="schedule must be one of constant, linear, cosine, not 'cosin'"):
        TrainConfig(schedule="cosin")
    with pytest.raises(BenchError, match="allowed: constant, linear, cosine"):
        parse_overrides("lstm", {"schedule": "cosin"})
    with pytest.raises(ValueError, match="positions must be one of learned, rotary"):
        config_class("transformer")(positions="alibi")
    check_settings(TrainConfig(schedule="cosine"))
