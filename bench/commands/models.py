"""``bench models``: model families and their presets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from bench.commands.common import (MODEL_HELP, PRESET_HELP, SET_HELP, data_dir_option, parse_pairs,
                                   sizing_dataset_option, sizing_tokenizer_option, vocab_size_option, plugin_option)

app = typer.Typer(help="Model families and their presets: sizes, parameters, FLOPs.", no_args_is_help=True,
                  rich_markup_mode=None)


@app.command("list")
def models_list(as_json: bool = typer.Option(False, "--json", help="Print JSON."),
                plugin: List[str] = plugin_option()) -> None:
    """Every model family: recurrent or windowed, its presets, the parts compile=true compiles, its figure
    marker. Its settings: `bench config fields --model MODEL`."""
    from bench.models import MODELS, family_kind
    from bench.text_tables import text_table

    rows = [{"model": name, "kind": family_kind(family),
             "presets": list(family.presets), "compiled parts": [t.__name__ for t in family.parts_to_compile],
             "marker": family.marker} for name, family in MODELS.items()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(text_table([{k: ", ".join(v) or "-" if isinstance(v, list) else v for k, v in row.items()} for row in rows],
                     list(rows[0])))


@app.command("describe")
def models_describe(
    model: str = typer.Argument(..., help=MODEL_HELP),
    preset: str = typer.Option("paper", "--preset", help=PRESET_HELP),
    tokenizer: Optional[str] = sizing_tokenizer_option(),
    dataset: Optional[str] = sizing_dataset_option(),
    vocab_size: Optional[int] = vocab_size_option(),
    settings: List[str] = typer.Option([], "--set", help=SET_HELP),
    data_dir: Optional[Path] = data_dir_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Parameters (total and non-embedding) and estimated training FLOPs per token of a model."""
    from bench.data.facts import facts_for_sizing
    from bench.engine.describe import describe_model
    from bench.engine.spec import RunSpec

    facts = facts_for_sizing(vocab_size, tokenizer, dataset, data_dir)
    info = describe_model(RunSpec(model=model, preset=preset, overrides=parse_pairs(settings, "--set")), facts)
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for key, value in info.items():
        if isinstance(value, dict):
            print(f"{key}: " + ", ".join(f"{k}={v}" for k, v in value.items()))
        elif value is not None:
            print(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")
