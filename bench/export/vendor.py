"""The toolkit's own code, copied into an exported folder so that it runs where ``bench`` is not installed.

A module and every first-party module it imports (``bench.*``, ``tokenizers_study.*``) are written side by side as
flat files, ``bench.models.sharnn`` as ``bench_models_sharnn.py``, their imports of one another made relative
(``from .bench_models_common import ...``): the form transformers' ``trust_remote_code`` copies along with a model's
code. An import that cannot be made relative that way fails here, by name, never in the user's hands.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from bench.errors import BenchError

FIRST_PARTY = ("bench", "tokenizers_study")
_FROM = re.compile(r"^(?P<indent>[ \t]*)from (?P<module>(?:%s)(?:\.\w+)*) import " % "|".join(FIRST_PARTY), re.M)
_IMPORT_AS = re.compile(r"^(?P<indent>[ \t]*)import (?P<module>(?:%s)(?:\.\w+)+) as (?P<name>\w+)[ \t]*$"
                        % "|".join(FIRST_PARTY), re.M)


def flat_name(module: str) -> str:
    """The file stem a module is written under: its dotted name with underscores."""
    return module.replace(".", "_")


def _source(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise BenchError(f"cannot export: module {module} is not found")
    return Path(spec.origin)


def _first_party_imports(module: str, text: str) -> set[str]:
    """The first-party modules ``text`` imports. ``from package import submodule`` is refused: a flat file cannot
    stand for a package."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] in FIRST_PARTY)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in FIRST_PARTY:
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


def relative(module: str, text: str) -> str:
    """``text`` (the source of ``module``) with its first-party imports made relative to flat files."""
    text = _FROM.sub(lambda m: f"{m['indent']}from .{flat_name(m['module'])} import ", text)
    text = _IMPORT_AS.sub(lambda m: f"{m['indent']}from . import {flat_name(m['module'])} as {m['name']}", text)
    if left := sorted(_first_party_imports(module, text)):
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


def vendor(roots: list[str], folder: Path) -> list[str]:
    """Write ``roots`` and every first-party module they import into ``folder`` as flat files; returns the file
    names written."""
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        text = _source(module).read_text(encoding="utf-8")
        seen[module] = text
        todo += sorted(_first_party_imports(module, text) - set(seen))
    written = []
    for module, text in sorted(seen.items()):
        name = f"{flat_name(module)}.py"
        (folder / name).write_text(relative(module, text), encoding="utf-8")
        written.append(name)
    return written


def check_copied_along(folder: Path, start: str, needed: list[str]) -> None:
    """Every file of ``needed`` is one transformers copies along with ``start``: else the folder loads here, beside
    its files, and fails in a cache folder elsewhere."""
    if missing := sorted(set(needed) - _copied_along(folder, start)):
        raise BenchError(f"cannot export: {', '.join(missing)} would not be copied along with {start} by "
                         f"transformers (no `from .module import` leads to it)")
