"""The one registry type of the toolkit: models, tokenization schemes, corpora and presets are each a
:class:`Registry`, a dict from name to thing whose missing name is a one-line error naming the kind, the nearest
names ("did you mean") and every known one. It lives here, in the package that stands alone, so that the
tokenizer study and the benchmark share it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(dict, Generic[T]):
    def __init__(self, kind: str, error: type[Exception], items: Iterable[tuple[str, T]] = ()):
        super().__init__()
        self.kind = kind  # "model", "corpus", ...: how the error names a thing of this registry
        self.error = error
        for name, item in items:
            self.register(name, item)

    def register(self, name: str, item: T) -> T:
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self[name] = item
        return item

    def __missing__(self, name: str) -> T:
        raise self.error(self.unknown(name))

    def unknown(self, name: str, others: Iterable[str] = (), known: str | None = None) -> str:
        """The message for a name that is not here (nor among ``others``, names known elsewhere); ``known``: how
        to write the known names, when not the list of them."""
        names = [*self, *others]
        close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
        guess = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        return f"unknown {self.kind} {name!r}; {guess}known: {known or ', '.join(names)}"
