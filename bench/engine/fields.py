"""Every setting a run takes, read from the dataclasses themselves (``bench config fields``).

The meaning of a field is the comment on its line in the dataclass, and a training field's section is the
``# --- section ---`` line above it, so the reference cannot drift from the code: a field added without a
comment fails ``tests/test_config_fields.py``.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize
import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal

SECTION = re.compile(r"#\s*-+\s*(.*?)\s*-*\s*$")
SET_BY_TOKENIZER = "vocab_size"  # a model field the tokenizer decides: never a setting


@dataclass(frozen=True)
class FieldDoc:
    name: str
    kind: str  # readable type: "int", "float or none", "one of constant, linear, cosine"
    default: Any
    meaning: str
    section: str  # "training: optimisation", "model: sha-rnn", ...


def field_docs(cls: type, section: str) -> list[FieldDoc]:
    """The fields of a config dataclass with their type, default and the comment on their line."""
    comments, sections = _line_comments(cls)
    hints = typing.get_type_hints(cls)
    docs = []
    current = section
    lines = {node.target.id: node.lineno for node in ast.parse(_source(cls)).body[0].body
             if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    for f in fields(cls):
        if f.name == SET_BY_TOKENIZER:
            continue
        line = lines[f.name]
        above = [title for at, title in sections if at < line]
        if above:
            current = f"{section}: {above[-1]}"
        default = f.default if f.default is not MISSING else None
        docs.append(FieldDoc(f.name, readable_type(hints[f.name]), default, comments.get(line, ""), current))
    return docs


def all_field_docs(models: typing.Iterable[str] | None = None) -> list[FieldDoc]:
    """Training fields, then each model's fields (``vocab_size`` left out: the tokenizer sets it)."""
    from bench.engine.spec import TrainConfig
    from bench.models import MODELS, config_class

    docs = field_docs(TrainConfig, "training")
    for model in models or MODELS:
        docs += field_docs(config_class(model), f"model: {model}")
    return docs


def readable_type(kind: Any) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return readable_type(next(a for a in args if a is not type(None))) + " or none"
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    return getattr(kind, "__name__", str(kind))


def _source(cls: type) -> str:
    return textwrap.dedent(inspect.getsource(cls))


def _line_comments(cls: type) -> tuple[dict[int, str], list[tuple[int, str]]]:
    """Comments after code on a line (line -> text) and section lines (``# --- title ---``), by line."""
    comments, sections, code_lines = {}, [], set()
    for token in tokenize.generate_tokens(io.StringIO(_source(cls)).readline):
        line = token.start[0]
        if token.type == tokenize.COMMENT:
            text = token.string
            if line in code_lines:
                comments[line] = text.lstrip("#").strip()
            elif SECTION.match(text):
                sections.append((line, SECTION.match(text).group(1)))
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.add(line)
    return comments, sections
