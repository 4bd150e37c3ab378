"""Every setting a run takes, as the reference lists it (``bench config fields``): read from the settings declared
on the spec's dataclasses (``bench.settings.setting``: type and default from the field, help, range and section
from its metadata), so the reference cannot drift from the checks.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any

from bench.settings import field_types, literal_choices, unwrap_optional

SET_BY_TOKENIZER = "vocab_size"  # a model field the tokenizer decides: never a setting


@dataclass(frozen=True)
class FieldDoc:
    name: str
    kind: str  # readable type: "int", "float or none", "one of constant, linear, cosine"
    default: Any
    meaning: str
    section: str  # "training: optimisation", "model: sha-rnn", ...
    allowed: str  # its range: "> 0", ">= 1", "in [0, 1)"; "" where the type says it all

    @property
    def shown_default(self) -> str:
        """The default as the references write it: none, true or false, else the value."""
        if self.default is None:
            return "none"
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


def field_docs(cls: type, section: str) -> list[FieldDoc]:
    """The settings of a config dataclass with their type, default, help, range and section."""
    hints = field_types(cls)
    docs = []
    for f in fields(cls):
        if f.name == SET_BY_TOKENIZER:
            continue
        meta = f.metadata
        allowed = meta.get("allowed")
        docs.append(FieldDoc(f.name, readable_type(hints[f.name]), None if f.default is MISSING else f.default,
                             meta.get("help", ""), f"{section}: {meta['section']}" if meta.get("section") else section,
                             allowed.describe() if allowed else ""))
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
    inner, optional = unwrap_optional(kind)
    if optional:
        return readable_type(inner) + " or none"
    if choices := literal_choices(kind):
        return "one of " + ", ".join(map(str, choices))
    return getattr(kind, "__name__", str(kind))
