"""Plug-ins: tokenization families, model families and metrics declared outside the toolkit, and how every process
a command starts comes to know them.

Two ways in:

- An installed package declares entry points, group ``bench.tokenizations`` or ``bench.models``, each naming a
  class. The registries load one the first time its name is asked for (``tokenizers_study.named_registry``), so
  every process, a worker's or a cluster job's too, finds it by itself.
- A module or a ``.py`` file named by ``--plugin``, a matrix config's ``[matrix] plugins`` or ``bench.api``'s
  ``plugins=``, imported here at once: it registers what it declares when imported (``FAMILIES.register``,
  ``MODELS.register``, ``METRICS.register``).

What this process knows beyond the toolkit (:func:`in_use`) is handed to every process it starts for runs, a matrix's
workers and cluster jobs, which import it before their first run (:func:`load_in_worker`). A plug-in that cannot be
imported, or that registers a name already taken, is refused in one line before anything runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.errors import USER_ERRORS, BenchError

TOOLKIT = ("bench", "tokenizers_study")  # the packages whose modules are never plug-ins
PLUGIN_HELP = ("A plug-in to import first: a module's name or a .py file's path, registering a tokenization, model "
               "family or metric (repeat for several). Installed packages' plug-ins need no option.")


@dataclass(frozen=True)
class Plugin:
    module: str  # its name in sys.modules
    file: str | None = None  # the file it was imported from, where its name alone would not find it (a path given)


_LOADED: dict[str, Plugin] = {}  # what load_plugin imported, by module name, in order


def load_plugins(names: Iterable[str], base: Path | None = None, where: str = "--plugin") -> list[Plugin]:
    """Import each plug-in of ``names`` (module names, or file paths relative to ``base``)."""
    if isinstance(names, str):
        raise BenchError(f"{where} takes a list of plug-ins, not the string {names!r}: write [{names!r}]")
    return [load_plugin(name, base, where) for name in names]


def load_plugin(name: str, base: Path | None = None, where: str = "--plugin") -> Plugin:
    """Import one plug-in once; a second request for the same module or file is answered by the first import."""
    if not isinstance(name, str) or not name.strip():
        raise BenchError(f"{where}: a plug-in is a module's name or a .py file's path, not {name!r}")
    if name.endswith(".py") or "/" in name or "\\" in name:
        return _record(_import_file(_plugin_path(name, base, where), where))
    if name in _LOADED:
        return _LOADED[name]
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise BenchError(f"{where} {name}: no module of that name is importable here; install its package, or "
                             f"give the path of its .py file") from None
        raise _refusal(name, where, exc) from None
    except Exception as exc:  # the registries' refusals included
        raise _refusal(name, where, exc) from None
    return _record(Plugin(name))


def _plugin_path(name: str, base: Path | None, where: str) -> Path:
    path = Path(name).expanduser()
    path = (base / path if base is not None and not path.is_absolute() else path).resolve()
    if path.suffix != ".py":
        raise BenchError(f"{where} {name}: a plug-in's file is a .py file; give one, or its module's name")
    if not path.is_file():
        raise BenchError(f"{where} {name}: {path} does not exist; give the path of the plug-in's .py file")
    if not path.stem.isidentifier():
        raise BenchError(f"{where} {name}: {path.name} cannot be a module's name (letters, digits and _, not first "
                         f"a digit); rename the file")
    return path


def _import_file(path: Path, where: str) -> Plugin:
    module = path.stem
    there = sys.modules.get(module)
    if there is not None:
        if Path(getattr(there, "__file__", "") or "").resolve() == path:
            return Plugin(module, str(path))
        raise BenchError(f"{where} {path}: a module named {module} is already imported here (from "
                         f"{getattr(there, '__file__', None) or 'built in'}); rename the plug-in's file")
    spec = importlib.util.spec_from_file_location(module, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded  # as an import does: the module's classes are found by name (pickle, dataclasses)
    try:
        spec.loader.exec_module(loaded)
    except Exception as exc:  # the registries' refusals included
        del sys.modules[module]
        raise _refusal(str(path), where, exc) from None
    return Plugin(module, str(path))


def _refusal(name: str, where: str, exc: BaseException) -> BenchError:
    """A plug-in's failed import in one line: the registries' own refusals (a name taken, a missing trait) as they
    are, anything else with its type."""
    message = " ".join(str(exc).split()) or "no message"
    if not isinstance(exc, USER_ERRORS):
        message = f"{type(exc).__name__}: {message}"
    return BenchError(f"{where} {name} was refused: {message}")


def _record(plugin: Plugin) -> Plugin:
    _LOADED.setdefault(plugin.module, plugin)
    return plugin


def _registries() -> list[tuple[str, dict]]:
    from bench.models import MODELS
    from tokenizers_study import FAMILIES

    return [("model", MODELS), ("tokenization scheme", FAMILIES)]


def in_use() -> list[Plugin]:
    """The plug-ins this process knows: those imported by :func:`load_plugin`, then the modules of every registered
    model or tokenization family and of every metric that are not the toolkit's (a notebook's import, an entry point
    already loaded)."""
    from bench.metrics import METRICS

    found = dict(_LOADED)
    modules = [getattr(item, "__module__", "") for _, registry in _registries() for item in dict.values(registry)]
    modules += [metric.formula.__module__ for metric in METRICS.values()]  # as registered so far: no loading
    for module in modules:
        if module.split(".")[0] not in TOOLKIT and module not in ("__main__", "__mp_main__"):
            found.setdefault(module, Plugin(module))
    return list(found.values())


def for_other_processes(cluster: bool = False) -> list[Plugin]:
    """:func:`in_use`, once checked that a new process can import each. A family defined in the script being run
    reaches a worker (the spawn start method imports that script again), but not a cluster job; one defined in a
    notebook, ``python -c`` or an interactive session reaches neither."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    for kind, registry in _registries():
        for name, item in dict.items(registry):
            if getattr(item, "__module__", "") == "__main__" and (cluster or main_file is None):
                where = "the script being run" if main_file else "this session (a notebook, python -c or a prompt)"
                to = "a cluster job" if cluster else "a worker process"
                raise BenchError(f"{kind} {name!r} is defined in {where}, which {to} cannot import: put it in a "
                                 f"module and name that with --plugin (or plugins=), or run the matrix with one job")
    return in_use()


def load_in_worker(plugins: Iterable[Plugin]) -> None:
    """In a process a matrix started: import what the matrix's process knew, by name or from its file."""
    for plugin in plugins:
        if plugin.module in sys.modules:
            continue
        if plugin.file:
            _record(_import_file(Path(plugin.file), "a plug-in of the matrix"))
        else:
            load_plugin(plugin.module, where="a plug-in of the matrix")
