"""How long a run trains: the first of its limits reached.

Every limit is one row of :data:`LIMITS`: the :class:`~bench.engine.spec.TrainConfig`
field that sets it (``--set max_train_chars=...``) and its unit, which is also the key
of a matrix config's ``[budget]`` table (``chars = ...``). The trainer stops when
:meth:`Budget.fraction_used` reaches 1, counting the characters of the tokens it has
actually consumed; the planner and ``bench speed`` read the same object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.engine.spec import TrainConfig


@dataclass(frozen=True)
class Limit:
    field: str  # the TrainConfig field
    unit: str  # what it counts: a Usage attribute and a [budget] key


LIMITS = (
    Limit("max_steps", "steps"),
    Limit("max_epochs", "epochs"),
    Limit("max_train_chars", "chars"),
    Limit("max_tokens", "tokens"),
    Limit("max_minutes", "minutes"),
    Limit("max_train_flops", "flops"),
)


def limit_for(unit: str) -> Limit:
    return next(limit for limit in LIMITS if limit.unit == unit)


@dataclass(frozen=True)
class Usage:
    """How much of each unit a run has used so far."""

    steps: int
    epochs: float
    chars: float
    tokens: int
    minutes: float
    flops: float


@dataclass(frozen=True)
class Budget:
    limits: dict[str, float]  # unit -> limit, for the limits that are set

    @classmethod
    def of(cls, config: TrainConfig) -> "Budget":
        return cls({limit.unit: getattr(config, limit.field) for limit in LIMITS
                    if getattr(config, limit.field) is not None})

    def is_set(self) -> bool:
        return bool(self.limits)

    def fraction_used(self, usage: Usage) -> float:
        """The largest share of any limit used: training stops at 1."""
        return max(getattr(usage, unit) / limit for unit, limit in self.limits.items())

    def planned_tokens(self, chars_per_token: float | None, epoch_tokens: int | None, step_tokens: float,
                       flops_per_token: float | None = None) -> float | None:
        """Training tokens the budget allows: None for a time budget alone, or where a limit needs what is not
        given (characters per token, the size of an epoch, the model's training FLOPs per token)."""
        tokens = []
        for unit, limit in self.limits.items():
            if unit == "chars" and chars_per_token is not None:
                tokens.append(limit / chars_per_token)
            elif unit == "flops" and flops_per_token:
                tokens.append(limit / flops_per_token)
            elif unit == "epochs" and epoch_tokens is not None:
                tokens.append(limit * epoch_tokens)
            elif unit in ("tokens", "steps"):
                tokens.append(limit * (step_tokens if unit == "steps" else 1))
            elif unit != "minutes":
                return None
        return min(tokens) if tokens else None

    def planned_steps(self, chars_per_token: float | None, epoch_tokens: int | None, step_tokens: float,
                      flops_per_token: float | None = None) -> int | None:
        tokens = self.planned_tokens(chars_per_token, epoch_tokens, step_tokens, flops_per_token)
        return None if tokens is None else steps_for(tokens, step_tokens)


def steps_for(tokens: float, step_tokens: float) -> int:
    """The optimizer steps that train ``tokens`` tokens, ``step_tokens`` a step (the last one may be short)."""
    return math.ceil(tokens / step_tokens - 1e-9)


def mean_step_tokens(config: TrainConfig) -> float:
    """Tokens per optimizer step on average (with ``seq_jitter`` 5% of the segments are half as long)."""
    return config.batch_size * config.bptt * (0.975 if config.seq_jitter else 1.0)


def epoch_tokens(train_tokens: int, batch_size: int) -> int:
    """Tokens in one pass over the train split laid out as ``batch_size`` equal streams."""
    return (train_tokens // batch_size) * batch_size
