"""The settings a run takes, declared once: each field of a spec dataclass (``TrainConfig``, each model's config)
is made with :func:`setting`, which puts its help, its allowed range and its section in the field's metadata.

Everything that checks or lists a setting reads this one table: :func:`check_settings` (each dataclass's own
check, so that no object holds a value outside its range), ``--set`` and a matrix config's tables
(``bench.engine.spec.parse_overrides``, which refuses a value before any run is resolved) and the reference
``bench config fields`` (``bench.engine.fields``). A setting's type and default are the dataclass field's own.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal

MOST_WIDTH = 2**31 - 1  # the largest size of one tensor dimension this toolkit accepts


@dataclass(frozen=True)
class Allowed:
    """The values a numeric setting may take: from ``low`` to ``high`` (a bound of none: no bound), each bound
    itself refused when ``*_open``. ``what`` names the kind of number, for the message ("a dropout rate")."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    what: str = ""

    def describe(self) -> str:
        """As the reference lists it: "> 0", ">= 1", "in [0, 1)"."""
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        return f"{'<' if self.high_open else '<='} {high}" if self.high is not None else "any"

    def refusal(self, name: str, value: float) -> str | None:
        """Why ``value`` is not allowed for ``name`` (one line), or None when it is."""
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if not (too_low or too_high):
            return None
        # a fraction (a rate, a decay) is named by its interval; a size's upper bound is a limit of tensors, told apart
        if self.low is not None and self.high is not None and self.high <= 1:
            kind = f" is {self.what} and" if self.what else ""
            return f"{name}{kind} must be {self.describe()}, not {value}"
        if too_high:
            return f"{name} {_number(value)} is beyond {_number(self.high)}; lower it"
        if self.low == 0:
            return f"{name} must {'be positive' if self.low_open else 'not be negative'}, not {value}"
        return f"{name} must be {'above' if self.low_open else 'at least'} {_number(self.low)}, not {value}"


POSITIVE = Allowed(low=0, low_open=True)
NOT_NEGATIVE = Allowed(low=0)
AT_LEAST_1 = Allowed(low=1)
SIZE = Allowed(low=1, high=MOST_WIDTH)  # a width, a count of layers, a window: one tensor dimension
BELOW_1 = Allowed(low=0, high=1, high_open=True)  # a decay rate, a floor of a ratio
FRACTION = Allowed(low=0, high=1)
DROPOUT = Allowed(low=0, high=1, high_open=True, what="a dropout rate")


def _number(x: float | None) -> str:
    return "" if x is None else f"{x:,}" if isinstance(x, int) else f"{x:g}"


def setting(default: Any, help: str, allowed: Allowed | None = None, section: str = "") -> Any:
    """A dataclass field with its default, its help (one line, what it is and its unit), its range and the
    section of the reference it is listed under."""
    return dataclasses.field(default=default, metadata={"help": help, "allowed": allowed, "section": section})


def section(title: str) -> Callable[..., Any]:
    """``setting`` for the fields of one section: ``budget = section("budget")``, then ``budget(None, "...")``."""
    return functools.partial(setting, section=title)


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The resolved type of each field of a settings dataclass (read once per class)."""
    return typing.get_type_hints(cls)


def check_settings(obj: Any) -> None:
    """Raise ValueError naming the first field of ``obj`` whose value its declaration refuses."""
    for f in fields(obj):
        if problem := refusal(type(obj), f, getattr(obj, f.name)):
            raise ValueError(problem)


def refusal(cls: type, f: dataclasses.Field, value: Any) -> str | None:
    """Why field ``f`` of ``cls`` refuses ``value`` (one line), or None: none where its type does not admit it, a
    float that is not finite, a value not among its Literal's, a number outside its range."""
    if value is None:
        return None if unwrap_optional(field_types(cls)[f.name])[1] else f"{f.name} must be set; it cannot be none"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{f.name} must be a finite number, not {value}"
    choices = literal_choices(field_types(cls)[f.name])
    if choices and value not in choices:
        return f"{f.name} must be one of {', '.join(map(str, choices))}, not {value!r}"
    allowed = f.metadata.get("allowed")
    if allowed is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{f.name} must be a number, not {value!r}"
    return allowed.refusal(f.name, value)


def unwrap_optional(kind: Any) -> tuple[Any, bool]:
    """The type inside ``Optional[...]`` and True, or ``kind`` itself and False."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return kind, False


def literal_choices(kind: Any) -> tuple:
    """The values a ``Literal`` (or an optional one) allows; () for any other type."""
    inner, _ = unwrap_optional(kind)
    return typing.get_args(inner) if typing.get_origin(inner) is Literal else ()
