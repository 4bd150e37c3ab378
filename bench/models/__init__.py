"""The model families of the study and how to build them from plain configs.

A family is a :class:`LanguageModel` subclass whose class attributes say what the rest of the toolkit needs to
know (its settings, presets, recurrent or windowed, compiled parts, figure marker; see ``LanguageModel``); adding
one is one class and one ``MODELS.register(name, family)``, or an entry point of group ``bench.models`` in an installed
package (docs/extending.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict

from bench.errors import BenchError
from bench.models.common import LanguageModel
from bench.models.lstm import LSTMLM
from bench.models.pretrained import PretrainedLM
from bench.models.recurrent import follow_rnn_rule
from bench.models.sharnn import SHARNN
from bench.models.transformer import TransformerLM
from tokenizers_study.named_registry import Registry


class ModelRegistry(Registry[type[LanguageModel]]):
    """The families by name; a family is checked as it is registered, so a mistake fails at import, in one line."""

    def register(self, name: str, family: type[LanguageModel]) -> type[LanguageModel]:
        if dict.__contains__(self, name):
            return super().register(name, family)  # refused: a name taken is said first
        if problem := family_problem(family):
            raise BenchError(f"model {name!r}: {getattr(family, '__name__', family)} {problem}")
        taken = {other.marker: other_name for other_name, other in dict.items(self)}  # not items(): it loads plug-ins
        taken[PretrainedLM.marker] = "a pretrained model"
        if family.marker in taken:
            raise BenchError(f"model {name!r}: figure marker {family.marker!r} is {taken[family.marker]}'s; give "
                             f"{family.__name__} a marker of its own")
        return super().register(name, family)


def family_problem(family) -> str | None:
    """What a model family leaves out of the contract (LanguageModel's traits and methods), or None: found when it
    is registered, not when a run first builds, sizes or draws it."""
    if not (isinstance(family, type) and issubclass(family, LanguageModel)):
        return "is not a subclass of bench.models.common.LanguageModel"
    if missing := [trait for trait in ("config_class", "marker") if not hasattr(family, trait)]:
        return (f"declares no {' and no '.join(missing)}; every family declares its settings dataclass and its "
                f"figure marker (see LanguageModel)")
    if not (dataclasses.is_dataclass(family.config_class) and isinstance(family.config_class, type)):
        return f"has a config_class, {family.config_class!r}, that is not a dataclass (its fields are the settings)"
    names = {f.name for f in dataclasses.fields(family.config_class)}
    if "vocab_size" not in names:
        return (f"has a config_class, {family.config_class.__name__}, without a vocab_size field (set from the "
                f"tokenizer)")
    if family.window_setting is not None and family.window_setting not in names:
        return f"names window_setting {family.window_setting!r}, which is no field of {family.config_class.__name__}"
    if missing := [method for method in ("forward", "flops_per_token")
                   if getattr(family, method) is getattr(LanguageModel, method)]:
        return (f"does not implement {' and '.join(missing)}; every family implements forward(tokens, state) and "
                f"flops_per_token(segment) (see LanguageModel)")
    return None


ENTRY_POINTS = "bench.models"  # the entry-point group of model families that installed packages declare
MODELS = ModelRegistry("model", BenchError, [("sha-rnn", SHARNN), ("lstm", LSTMLM), ("transformer", TransformerLM)],
                       entry_points=ENTRY_POINTS)


def family_kind(family: type[LanguageModel]) -> str:
    """Recurrent, or windowed by the setting that is its window: "windowed (context)"."""
    return f"windowed ({family.window_setting})" if family.window_setting else "recurrent"


def config_class(name: str) -> type:
    return MODELS[name].config_class


def make_config(name: str, values: dict):
    cls = config_class(name)
    try:
        return cls(**values)
    except ValueError as exc:
        raise BenchError(f"bad {name} configuration: {exc}") from None


def build_model(name: str, config) -> LanguageModel:
    if isinstance(config, dict):
        config = make_config(name, config)
    return follow_rnn_rule(MODELS[name](config))  # once, here: the precision plan's rule for recurrent layers


__all__ = ["MODELS", "LanguageModel", "asdict", "build_model", "config_class", "family_kind", "make_config"]
