"""Named sizes of each model with the training recipe that goes with them: each family declares its own
(``LanguageModel.presets``, in its module; the paper-scale recipe they share is ``bench.models.common.PAPER_TRAIN``);
here, the lookup.

``paper`` is the SHA-RNN of the paper; the ``paper`` LSTM and Transformer are
sized to match it in parameters (about 53.8M with a 256-symbol vocabulary).
``small`` trains on a CPU in minutes, ``tiny`` in seconds. Every field can be
overridden with ``--set KEY=VALUE`` (model fields and training fields alike).
"""

from __future__ import annotations

from bench.errors import BenchError
from tokenizers_study.named_registry import Registry

def presets_of(model: str) -> Registry[dict[str, dict]]:
    """A model family's presets by name (its ``presets``)."""
    from bench.models import MODELS

    return Registry("preset", BenchError, MODELS[model].presets.items())


def get_preset(model: str, preset: str) -> dict[str, dict]:
    entry = presets_of(model)[preset]
    return {"model": dict(entry["model"]), "train": dict(entry["train"])}
