"""``bench config``: the settings a run or a matrix takes, without reading the source."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import List, Optional

import typer

from bench.commands.common import MODEL_HELP, plugin_option

app = typer.Typer(help="The settings a run or a matrix config takes.", no_args_is_help=True,
                  rich_markup_mode=None)


@app.command("fields")
def config_fields(
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP + " Default: every model."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of fields."),
    plugin: List[str] = plugin_option(),
) -> None:
    """Every training and model field: type, default, allowed range and meaning. Set one with --set KEY=VALUE on
    `bench train`, or in a matrix config's [shared], [models.<model>] or [tokenizers."<scheme>"] table. A preset
    (`bench models describe MODEL --preset P`) changes the defaults."""
    from bench.engine.fields import all_field_docs
    from bench.models import config_class

    if model is not None:
        config_class(model)  # an unknown model is one line naming the known ones
    docs = all_field_docs([model] if model else None)
    if as_json:
        print(json.dumps([asdict(d) for d in docs], indent=2))
        return
    width = max(len(d.name) for d in docs)
    section = None
    for doc in docs:
        if doc.section != section:
            section = doc.section
            print(f"\n[{section}]")
        allowed = f", {doc.allowed}" if doc.allowed else ""
        print(f"  {doc.name:<{width}}  {doc.kind} = {doc.shown_default}{allowed}")
        print(f"  {'':<{width}}  {doc.meaning}")


@app.command("tables")
def config_tables() -> None:
    """The tables of a matrix config (TOML) and the keys each takes; the fields of [shared], [models.<model>] and
    [tokenizers."<scheme>"] are those of `bench config fields`."""
    from bench.study.matrix.config import CONFIG_TABLES

    width = max(len(heading) for heading, _ in CONFIG_TABLES.values()) + 2
    for heading, keys in CONFIG_TABLES.values():
        lines = keys.split("\n")
        print(f"{heading:<{width}}{lines[0]}" + "".join(f"\n{'':<{width}}{line}" for line in lines[1:]))
    print('\nA minimal config: docs/study.md ("A matrix config"); configs/*.toml are complete examples.')
