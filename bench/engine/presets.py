"""Named sizes of each model with the training recipe that goes with them: each family declares its own
(``LanguageModel.presets``, in its module); here, the lookup and the paper-scale recipe they share.

``paper`` is the SHA-RNN of the paper; the ``paper`` LSTM and Transformer are
sized to match it in parameters (about 53.8M with a 256-symbol vocabulary).
``small`` trains on a CPU in minutes, ``tiny`` in seconds. Every field can be
overridden with ``--set KEY=VALUE`` (model fields and training fields alike).
"""

from __future__ import annotations

from bench.errors import BenchError
from tokenizers_study.named_registry import Registry

# The `paper` recipe, the SHA-RNN's and (with their own optimizer) the others': the reference's enwik8 recipe
# (emsize 1024, nhid 4096, 4 layers, bptt 1024, dropouts 0.1, LAMB lr 2e-3 with min trust 0.25, warmup 800,
# clip 0.25, weight decay 1.2e-6). The reference README's commands use batch size 8; the recipe here uses 16 as the
# paper does.
PAPER_TRAIN = dict(
    batch_size=16, bptt=1024, seq_jitter=True, optimizer="lamb", lr=2e-3, warmup_steps=800, clip=0.25,
    weight_decay=1.2e-6, min_trust=0.25, schedule="constant", max_epochs=14.0, eval_every=2000,
    eval_max_chars=1_000_000, eval_streams=8, eval_chunk=1024, checkpoint_every=500, log_every=50,
)


def presets_of(model: str) -> Registry[dict[str, dict]]:
    """A model family's presets by name (its ``presets``)."""
    from bench.models import MODELS

    return Registry("preset", BenchError, MODELS[model].presets.items())


def get_preset(model: str, preset: str) -> dict[str, dict]:
    entry = presets_of(model)[preset]
    return {"model": dict(entry["model"]), "train": dict(entry["train"])}
