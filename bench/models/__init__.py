"""The model families of the study and how to build them from plain configs.

A family is a :class:`LanguageModel` subclass whose class attributes say what the rest of the toolkit needs to
know (its settings, presets, recurrent or windowed, compiled parts, figure marker; see ``LanguageModel``); adding
one is one class and one ``MODELS.register(name, family)``, or an entry point of group ``bench.models`` in an installed
package (docs/extending.md).
"""

from __future__ import annotations

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
        if missing := [trait for trait in ("config_class", "marker") if not hasattr(family, trait)]:
            raise BenchError(f"model {name!r}: {family.__name__} declares no {' and no '.join(missing)}; every "
                             f"family declares its settings dataclass and its figure marker (see LanguageModel)")
        taken = {other.marker: other_name for other_name, other in dict.items(self)}  # not items(): it loads plug-ins
        taken[PretrainedLM.marker] = "a pretrained model"
        if family.marker in taken:
            raise BenchError(f"model {name!r}: figure marker {family.marker!r} is {taken[family.marker]}'s; give "
                             f"{family.__name__} a marker of its own")
        return super().register(name, family)


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
