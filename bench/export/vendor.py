"""The toolkit's own code, copied into an exported folder so that it runs where ``bench`` is not installed.

A module and every first-party module it imports (``bench.*``, ``tokenizers_study.*``, and a plug-in's own
package) are written side by side as flat files, ``bench.models.sharnn`` as ``bench_models_sharnn.py``, their
imports of one another made relative (``from .bench_models_common import ...``): the form transformers'
``trust_remote_code`` copies along with a model's code. An import that cannot be made relative that way fails here,
by name, never in the user's hands.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from bench.errors import BenchError
from bench.plugins import TOOLKIT

FIRST_PARTY = TOOLKIT  # the packages a folder always carries


def _from_pattern(packages: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"^(?P<indent>[ \t]*)from (?P<module>(?:%s)(?:\.\w+)*) import " % "|".join(packages), re.M)


def _import_as_pattern(packages: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"^(?P<indent>[ \t]*)import (?P<module>(?:%s)(?:\.\w+)*) as (?P<name>\w+)[ \t]*$"
                      % "|".join(packages), re.M)


def flat_name(module: str) -> str:
    """The file stem a module is written under: its dotted name with underscores."""
    return module.replace(".", "_")


def _source(module: str) -> Path:
    if module in ("__main__", "__mp_main__"):
        raise BenchError("cannot export: a plug-in of this run is defined in the script being run (__main__), whose "
                         "code the folder cannot carry; put it in a module of its own and import that (--plugin)")
    try:
        spec = importlib.util.find_spec(module)
    except ValueError:  # a module made in memory: it has no spec
        spec = None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise BenchError(f"cannot export: module {module} has no Python source file to copy (it was made in memory, "
                         f"or compiled); put the plug-in's code in a .py module")
    return Path(spec.origin)


def _first_party_imports(module: str, text: str, packages: tuple[str, ...] = FIRST_PARTY) -> set[str]:
    """The first-party modules ``text`` imports. ``from package import submodule`` is refused: a flat file cannot
    stand for a package."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] in packages)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in packages:
            found.add(node.module)
            if submodule := next((a.name for a in node.names if _is_module(f"{node.module}.{a.name}")), None):
                raise BenchError(f"cannot export {module}: `from {node.module} import {submodule}` imports a "
                                 f"module; import what it defines (`from {node.module}.{submodule} import ...`)")
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def relative(module: str, text: str, packages: tuple[str, ...] = FIRST_PARTY) -> str:
    """``text`` (the source of ``module``) with its first-party imports made relative to flat files."""
    text = _from_pattern(packages).sub(lambda m: f"{m['indent']}from .{flat_name(m['module'])} import ", text)
    text = _import_as_pattern(packages).sub(
        lambda m: f"{m['indent']}from . import {flat_name(m['module'])} as {m['name']}", text)
    if left := sorted(_first_party_imports(module, text, packages)):
        raise BenchError(f"cannot export {module}: its import of {left[0]} cannot be made relative; import it as "
                         f"`from {left[0]} import ...`")
    return text


# How transformers finds the files a remote module needs (dynamic_module_utils.get_relative_imports)
_COPIED = (re.compile(r"^\s*import\s+\.(\S+)\s*$", re.M), re.compile(r"^\s*from\s+\.(\S+)\s+import", re.M))


def _copied_along(folder: Path, start: str) -> set[str]:
    """The files transformers copies along with ``start`` (a file name in ``folder``), itself included."""
    found, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in found or not (folder / name).is_file():
            continue
        found.add(name)
        text = (folder / name).read_text(encoding="utf-8")
        todo += [f"{stem}.py" for pattern in _COPIED for stem in pattern.findall(text)]
    return found


def vendor(roots: list[str], folder: Path, reserved: tuple[str, ...] = ()) -> list[str]:
    """Write ``roots`` and every first-party module they import into ``folder`` as flat files; returns the file
    names written. A root outside the toolkit (a plug-in) brings its own package's modules along, and those of any
    other package it imports that is written against the toolkit. Two modules written under one name, or one under
    a name of ``reserved`` (the folder's own files), are refused before anything is written."""
    packages = list(dict.fromkeys([*FIRST_PARTY, *(root.split(".")[0] for root in roots)]))
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        text = _source(module).read_text(encoding="utf-8")
        tree = ast.parse(text)
        if relative_import := next((node for node in ast.walk(tree)
                                    if isinstance(node, ast.ImportFrom) and node.level), None):
            raise BenchError(f"cannot export {module}: its relative import (from {'.' * relative_import.level}"
                             f"{relative_import.module or ''} import ...) cannot be carried into flat files; import "
                             f"by the package's name")
        if module.split(".")[0] not in FIRST_PARTY:  # a plug-in: what else of its world must come along
            packages += [name.split(".")[0] for name in _absolute_imports(tree)
                         if name.split(".")[0] not in packages and _written_against_the_toolkit(name)]
        seen[module] = text
        todo += sorted(_first_party_imports(module, text, tuple(packages)) - set(seen))
    names: dict[str, str] = {}
    for module in sorted(seen):
        name = f"{flat_name(module)}.py"
        if name in reserved:
            raise BenchError(f"cannot export: module {module} would be written as {name}, a file of the folder's own; "
                             f"rename the module")
        if name in names:
            raise BenchError(f"cannot export: modules {names[name]} and {module} would both be written as {name}; "
                             f"rename one of them")
        names[name] = module
    for name, module in names.items():
        (folder / name).write_text(relative(module, seen[module], tuple(packages)), encoding="utf-8")
    return list(names)


def _absolute_imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def declares_metrics(module: str) -> bool:
    """Whether ``module`` is a plug-in that a folder can carry and that imports the toolkit's metrics (where a
    metric's formula comes from a module of its own)."""
    if module in ("__main__", "__mp_main__") or module.split(".")[0] in FIRST_PARTY:
        return False
    return _written_against_the_toolkit(module, ("bench.metrics",))


def _written_against_the_toolkit(module: str, of: tuple[str, ...] = FIRST_PARTY) -> bool:
    """Whether ``module`` (imported by a plug-in) imports the toolkit itself: another plug-in package, which the
    folder must carry, since it works only with the toolkit's copy beside it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None or not (spec.origin or "").endswith(".py"):
        return False
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return any(name == prefix or name.startswith(prefix + ".") for name in _absolute_imports(tree) for prefix in of)


def check_copied_along(folder: Path, start: str, needed: list[str]) -> None:
    """Every file of ``needed`` is one transformers copies along with ``start``: else the folder loads here, beside
    its files, and fails in a cache folder elsewhere."""
    if missing := sorted(set(needed) - _copied_along(folder, start)):
        raise BenchError(f"cannot export: {', '.join(missing)} would not be copied along with {start} by "
                         f"transformers (no `from .module import` leads to it)")
