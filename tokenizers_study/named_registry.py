"""The one registry type of the toolkit: models, tokenization schemes, corpora and presets are each a
:class:`Registry`, a dict from name to thing whose missing name is a one-line error naming the kind, the nearest
names ("did you mean") and every known one. It lives here, in the package that stands alone, so that the
tokenizer study and the benchmark share it.

A registry may also offer what installed packages declare under an entry-point group (the packaging standard's
plug-ins, as pytest's): each is loaded the first time its name is asked for, or when every name is listed, and
registered under its entry point's name with the registry's own checks.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from importlib import metadata
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(dict, Generic[T]):
    def __init__(self, kind: str, error: type[Exception], items: Iterable[tuple[str, T]] = (),
                 entry_points: str | None = None):
        super().__init__()
        self.kind = kind  # "model", "corpus", ...: how the error names a thing of this registry
        self.error = error
        self.entry_points = entry_points  # the group installed plug-ins declare under; None: none
        self._offered: dict[str, metadata.EntryPoint] | None = None  # found, not yet loaded
        for name, item in items:
            self.register(name, item)
        self.shipped = frozenset(dict.keys(self))  # the toolkit's own names, which no entry point may take

    def register(self, name: str, item: T) -> T:
        if dict.__contains__(self, name):
            raise self.error(f"{self.kind} {name!r} is registered twice: a plug-in's name must be new (rename it), "
                             f"and a plug-in module is imported once, not run again")
        self[name] = item
        return item

    def adopt(self, name: str, item: T) -> T:
        """Register ``item`` unless it is registered under ``name`` already: a plug-in's module may register its
        class itself when imported, before whoever imported it does."""
        return item if dict.get(self, name) is item else self.register(name, item)

    # ---- lookups by name load the entry point of that name; listings load them all
    def __missing__(self, name: str) -> T:
        if self._load(name):
            return dict.__getitem__(self, name)
        raise self.error(self.unknown(name))

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and self._load(name))

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __iter__(self):
        self._load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._load_all()
        return dict.__len__(self)

    def keys(self):
        self._load_all()
        return dict.keys(self)

    def values(self):
        self._load_all()
        return dict.values(self)

    def items(self):
        self._load_all()
        return dict.items(self)

    def loaded(self) -> dict[str, T]:
        """What is registered so far, without loading the installed plug-ins not yet asked for (help texts, the
        toolkit's generated reference)."""
        return dict(dict.items(self))

    def _offers(self) -> dict[str, metadata.EntryPoint]:
        """The installed entry points of the group not loaded yet, found once; one named like a shipped family, or
        declared by two packages, is refused (every time: nothing is kept of a refused lookup)."""
        if self._offered is None:
            offered: dict[str, metadata.EntryPoint] = {}
            for point in metadata.entry_points(group=self.entry_points) if self.entry_points else ():
                if point.name in self.shipped:
                    raise self.error(f"{_origin(point)} declares {self.kind} {point.name!r}, a name the toolkit "
                                     f"already has; rename the entry point (or uninstall the package)")
                if point.name in offered and offered[point.name].value != point.value:
                    raise self.error(f"{_origin(point)} and {_origin(offered[point.name])} both declare {self.kind} "
                                     f"{point.name!r}; uninstall one of them")
                offered[point.name] = point
            self._offered = offered
        return self._offered

    def _load(self, name: str) -> bool:
        """Load the entry point called ``name``; whether there was one. One that fails stays offered, so that the
        next lookup says the same, not "unknown"."""
        point = self._offers().get(name)
        if point is None:
            return False
        try:
            item = point.load()
        except Exception as exc:  # any error of the plug-in's own import: one line, naming it
            raise self.error(f"{_origin(point)} cannot be imported ({type(exc).__name__}: {_one_line(exc)}); "
                             f"fix the package, or uninstall it") from None
        if dict.get(self, name, item) is not item:  # its module registered another class under the name
            raise self.error(f"{_origin(point)} names {item!r}, but its module registered {dict.get(self, name)!r} "
                             f"as {self.kind} {name!r}; make the entry point name the class its module registers")
        try:
            self.adopt(name, item)
        except self.error as exc:  # the registry's own checks (a missing trait): said with where it comes from
            raise self.error(f"{_origin(point)}: {exc}") from None
        del self._offered[name]
        return True

    def _load_all(self) -> None:
        if self.entry_points:
            for name in list(self._offers()):
                self._load(name)

    def unknown(self, name: str, others: Iterable[str] = (), known: str | None = None) -> str:
        """The message for a name that is not here (nor among ``others``, names known elsewhere); ``known``: how
        to write the known names, when not the list of them."""
        names = [*self, *others]
        close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
        guess = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        return f"unknown {self.kind} {name!r}; {guess}known: {known or ', '.join(names)}"


def _origin(point: metadata.EntryPoint) -> str:
    """'plug-in nibble_plugin.nibble:NibbleTokenizer (entry point nibble of bench.tokenizations, package X 1.0)'."""
    package = f", package {point.dist.name} {point.dist.version}" if getattr(point, "dist", None) else ""
    return f"plug-in {point.value} (entry point {point.name!r} of {point.group}{package})"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "no message"
