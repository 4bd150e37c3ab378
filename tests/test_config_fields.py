"""`bench config fields` is generated from the spec's dataclasses: every field, its type, default and meaning."""

import json
import typing
from dataclasses import MISSING, fields

from bench.engine.spec import TrainConfig
from bench.models import MODELS, config_class
from tests.test_bad_inputs import call as run_cli


def _expected() -> list[tuple[str, str, object]]:
    out = [("training", f.name, f.default) for f in fields(TrainConfig)]
    for model in MODELS:
        out += [(model, f.name, f.default) for f in fields(config_class(model)) if f.name != "vocab_size"]
    return out


def test_config_fields_lists_every_field_of_the_spec_with_its_default_and_a_meaning():
    code, out, err = run_cli(["config", "fields", "--json"])
    assert code == 0, err
    listed = json.loads(out)
    got = [(d["section"].split(":")[0] if d["section"].startswith("training") else d["section"].split(": ")[1],
            d["name"], d["default"]) for d in listed]
    assert got == [(where, name, None if default is MISSING else default) for where, name, default in _expected()]
    blank = [d["name"] for d in listed if not d["meaning"].strip()]
    assert not blank, f"fields without a comment on their line in the dataclass: {blank}"
    by_name = {d["name"]: d for d in listed if d["section"].startswith("training")}
    assert by_name["schedule"]["kind"] == "one of constant, linear, cosine"
    assert by_name["max_steps"]["kind"] == "int or none" and by_name["max_steps"]["section"] == "training: budget"
    assert typing.get_type_hints(TrainConfig)["lr"] is float and by_name["lr"]["kind"] == "float"


def test_config_fields_as_text_and_for_one_model():
    code, out, _ = run_cli(["config", "fields", "--model", "lstm"])
    assert code == 0
    assert "[model: lstm]" in out and "[model: sha-rnn]" not in out and "wdrop" in out
    assert "[training: optimisation]" in out and "peak learning rate" in out


def test_models_describe_shows_the_presets_sizes_and_recipe():
    code, out, _ = run_cli(["models", "describe", "sha-rnn", "--preset", "tiny", "--set", "lr=0.01"])
    assert code == 0
    assert "model_settings: emsize=64, nhid=256, nlayers=2" in out
    assert "training_recipe: batch_size=16, bptt=64, optimizer=lamb, lr=0.01" in out


def test_config_tables_names_every_table_a_config_may_hold():
    from bench.study.matrix.config import TABLES

    code, out, _ = run_cli(["config", "tables"])
    assert code == 0
    assert all(f"[{table}" in out or f"[[{table}" in out for table in TABLES), out


def test_the_docs_minimal_config_is_a_valid_study_of_twelve_runs(repo, tmp_path):
    from bench.study.matrix.grid import load_config
    from bench.study.matrix.grid import cell_specs

    page = (repo / "docs" / "study.md").read_text()
    block = page.split("## A matrix config")[1].split("```toml\n")[1].split("```")[0]
    (tmp_path / "mine.toml").write_text(block)
    config = load_config(tmp_path / "mine.toml")
    assert config.name == "mine" and len(cell_specs(config)) == 12
