"""The command-line reference: every command and sub-command of ``bench`` with its arguments and options, walked
from the Typer app's click group (what ``bench COMMAND --help`` prints, as tables)."""

from __future__ import annotations

from typing import Any

import typer

from bench.reference_pages.markdown import code, generated_from, heading, paragraphs, table, text


def cli_page(group: Any) -> str:
    """The page for the command line ``group`` (``typer.main.get_command(cli.app)``)."""
    context = typer.Context(group, info_name="bench")
    parts = ["# Command line", generated_from("the command line's own declarations (the Typer app of `cli.py`)"),
             paragraphs(group.help or ""), *_commands(group, context, level=2)]
    return "\n\n".join(parts) + "\n"


def _commands(group: Any, parent: Any, level: int) -> list[str]:
    """The sections of ``group``'s visible sub-commands, in the order ``--help`` lists them, each group's own
    sub-commands one heading level below it."""
    parts = []
    for name in group.list_commands(parent):
        command = group.commands[name]
        if command.hidden:
            continue
        context = typer.Context(command, info_name=name, parent=parent)
        parts += [heading(level, context.command_path), paragraphs(command.help or ""),
                  f"```text\n{command.get_usage(context).removeprefix('Usage: ')}\n```"]
        arguments = [p for p in command.params if p.param_type_name == "argument" and not p.hidden]
        options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
        if arguments:
            parts.append(table(["Argument", "Type", "Default", "Meaning"],
                               [[code(p.metavar or p.name), _kind(p, context), _default(p), text(p.help or "")]
                                for p in arguments]))
        if options:
            parts.append(table(["Option", "Type", "Default", "Meaning"],
                               [[", ".join(map(code, p.opts + p.secondary_opts)), _kind(p, context), _default(p),
                                 text(p.help or "")] for p in options]))
        if hasattr(command, "commands"):
            parts += _commands(command, context, level + 1)
    return parts


def _kind(param: Any, context: Any) -> str:
    """What a parameter takes, as ``--help`` writes it without its brackets (``int``, ``path``); a flag takes
    nothing; the range where it has one, a repeatable option said so."""
    if getattr(param, "is_flag", False):
        return "flag"
    kind = param.type_descriptor.annotation.__name__ if param.type_descriptor.is_ranged \
        else param.display_type(context).strip("<>")
    if param.multiple:
        kind = kind.removeprefix("list[").removesuffix("]") + ", repeatable"
    bounds = [f">= {param.min}"] if param.min is not None else []
    bounds += [f"<= {param.max}"] if param.max is not None else []
    return text(", ".join([kind, *bounds]))


def _default(param: Any) -> str:
    """The default as inline code; "required" for a parameter that has none and must be given, else nothing."""
    if param.required:
        return "required"
    if param.default is None or param.default == [] or (getattr(param, "is_flag", False) and not param.default):
        return ""
    return code('""' if param.default == "" else param.default)
