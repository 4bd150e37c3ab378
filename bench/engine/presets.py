"""Named sizes of each model with the training recipe that goes with them.

``paper`` is the SHA-RNN of the paper; the ``paper`` LSTM and Transformer are
sized to match it in parameters (about 53.8M with a 256-symbol vocabulary).
``small`` trains on a CPU in minutes, ``tiny`` in seconds. Every field can be
overridden with ``--set KEY=VALUE`` (model fields and training fields alike).
"""

from __future__ import annotations

from bench.errors import BenchError
from tokenizers_study.named_registry import Registry

# SHA-RNN `paper`: the reference's enwik8 recipe (emsize 1024, nhid 4096, 4 layers, bptt 1024,
# dropouts 0.1, LAMB lr 2e-3 with min trust 0.25, warmup 800, clip 0.25, weight decay 1.2e-6).
# The reference README's commands use batch size 8; the recipe here uses 16 as the paper does.
_SHARNN_PAPER_TRAIN = dict(
    batch_size=16, bptt=1024, seq_jitter=True, optimizer="lamb", lr=2e-3, warmup_steps=800, clip=0.25,
    weight_decay=1.2e-6, min_trust=0.25, schedule="constant", max_epochs=14.0, eval_every=2000,
    eval_max_chars=1_000_000, eval_streams=8, eval_chunk=1024, checkpoint_every=500, log_every=50,
)

_RECIPES: dict[str, dict[str, dict[str, dict]]] = {
    "sha-rnn": {
        "tiny": {
            "model": dict(emsize=64, nhid=256, nlayers=2, attention="second-last", dropout=0.0, dropouth=0.0,
                          dropouti=0.0, max_memory=256),
            "train": dict(batch_size=16, bptt=64, optimizer="lamb", lr=4e-3, warmup_steps=20, clip=0.25,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32, eval_chunk=128,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(emsize=256, nhid=1024, nlayers=4, attention="second-last", dropout=0.1, dropouth=0.1,
                          dropouti=0.1, max_memory=2048),
            "train": dict(batch_size=16, bptt=256, seq_jitter=True, optimizer="lamb", lr=2e-3, warmup_steps=100,
                          clip=0.25, max_steps=1500, eval_every=250, eval_max_chars=300_000, eval_streams=16,
                          eval_chunk=512, checkpoint_every=100, log_every=10),
        },
        "paper": {
            "model": dict(emsize=1024, nhid=4096, nlayers=4, attention="second-last", dropout=0.1, dropouth=0.1,
                          dropouti=0.1, max_memory=5000),
            "train": _SHARNN_PAPER_TRAIN,
        },
    },
    "lstm": {
        "tiny": {
            "model": dict(emsize=64, nhid=128, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0, init_range=0.5),
            "train": dict(batch_size=16, bptt=64, optimizer="adamw", lr=1e-2, warmup_steps=20, clip=0.25,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32, eval_chunk=256,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(emsize=256, nhid=768, nlayers=3, dropout=0.1, dropouth=0.1, dropouti=0.1, wdrop=0.1,
                          init_range=0.25),
            "train": dict(batch_size=16, bptt=256, seq_jitter=True, optimizer="adamw", lr=2e-3, warmup_steps=100,
                          clip=0.25, max_steps=1500, eval_every=250, eval_max_chars=300_000, eval_streams=16,
                          eval_chunk=512, checkpoint_every=100, log_every=10),
        },
        "paper": {
            "model": dict(emsize=1024, nhid=1712, nlayers=3, dropout=0.1, dropouth=0.1, dropouti=0.1, wdrop=0.1),
            "train": {**_SHARNN_PAPER_TRAIN, "optimizer": "adamw", "lr": 1e-3},
        },
    },
    "transformer": {
        "tiny": {
            "model": dict(d_model=64, nlayers=2, nheads=2, mlp_ratio=4.0, positions="rotary", dropout=0.0),
            "train": dict(batch_size=16, bptt=64, optimizer="adamw", lr=3e-3, warmup_steps=20, clip=1.0,
                          max_steps=150, eval_every=50, eval_max_chars=60_000, eval_streams=32,
                          checkpoint_every=50, log_every=10),
        },
        "small": {
            "model": dict(d_model=256, nlayers=4, nheads=4, mlp_ratio=4.0, positions="rotary", dropout=0.1),
            "train": dict(batch_size=16, bptt=256, optimizer="adamw", lr=1e-3, warmup_steps=100, clip=1.0,
                          schedule="cosine", min_lr_ratio=0.1, max_steps=1500, eval_every=250,
                          eval_max_chars=300_000, eval_streams=16, checkpoint_every=100, log_every=10),
        },
        "paper": {
            # d 768, 8 layers, MLP 2816 wide: 53.75M parameters with 256 symbols, like the SHA-RNN's 53.83M.
            "model": dict(d_model=768, nlayers=8, nheads=12, mlp_ratio=11 / 3, positions="rotary", dropout=0.1),
            "train": {**_SHARNN_PAPER_TRAIN, "optimizer": "adamw", "lr": 6e-4, "warmup_steps": 2000,
                      "schedule": "cosine", "min_lr_ratio": 0.1, "seq_jitter": False, "clip": 1.0,
                      "eval_chunk": None},
        },
    },
}


# Each model's presets by name.
PRESETS: Registry[Registry[dict[str, dict]]] = Registry(
    "model", BenchError,
    [(model, Registry("preset", BenchError, recipes.items())) for model, recipes in _RECIPES.items()])


def get_preset(model: str, preset: str) -> dict[str, dict]:
    entry = PRESETS[model][preset]
    return {"model": dict(entry["model"]), "train": dict(entry["train"])}
