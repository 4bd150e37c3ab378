"""Imports run downward: the tokenizers know nothing of the toolkit, the data layer nothing of the engine or the
study, the engine nothing of the study or the commands, the study's numbers (stats) nothing of its matrix and
the matrix nothing of the report, and no module imports itself back through others. Imports
inside functions count too (they hide cycles; they are for heavy or optional libraries, not for layering)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "tokenizers_study")
STUDY = ("bench.study", "bench.study.stats", "bench.study.matrix", "bench.study.report")
# A module may import from the layers listed for its own layer (and from its own layer).
MODEL_LAYERS = ("tokenizers_study", "bench.core", "bench.data", "bench.models", "bench.plugins")
BELOW = {
    "tokenizers_study": (),
    "bench.core": ("tokenizers_study",),  # errors, fileio, metrics, provenance, tables, ownership
    "bench.data": ("tokenizers_study", "bench.core"),
    "bench.models": ("tokenizers_study", "bench.core"),  # of the tokenizer package, only its Registry type
    # what plug-ins register, scheme and model families, and how they reach other processes
    "bench.plugins": ("tokenizers_study", "bench.core", "bench.models"),
    "bench.engine": MODEL_LAYERS,
    # the study's three layers: numbers, then running a matrix, then reporting on both
    "bench.study.stats": (*MODEL_LAYERS, "bench.engine"),
    "bench.study.matrix": (*MODEL_LAYERS, "bench.engine", "bench.study.stats"),
    "bench.study.report": (*MODEL_LAYERS, "bench.engine", "bench.study.stats", "bench.study.matrix"),
    "bench.study": (*MODEL_LAYERS, "bench.engine", "bench.study.stats", "bench.study.matrix", "bench.study.report"),
    # a finished run written for other tools (the engine reads such a folder back itself)
    "bench.export": (*MODEL_LAYERS, "bench.engine"),
    "bench.commands": (*MODEL_LAYERS, "bench.engine", *STUDY, "bench.export"),
    "bench.api": (*MODEL_LAYERS, "bench.engine", *STUDY, "bench.export"),
    # the documentation site's generated reference pages: the declarations they list (the command line is handed in)
    "bench.reference_pages": (*MODEL_LAYERS, "bench.engine"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module.startswith("tokenizers_study"):
        return "tokenizers_study"
    for name in ("bench.data", "bench.models", "bench.plugins", "bench.engine", "bench.study.stats",
                 "bench.study.matrix", "bench.study.report", "bench.study", "bench.export", "bench.commands",
                 "bench.api", "bench.reference_pages"):
        if module == name or module.startswith(name + "."):
            return name
    return "bench.core"


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports, at any depth of its code."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from this module's package
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) - {module_name(p)} for p in paths}


def test_every_import_goes_to_a_layer_below(graph):
    upward = sorted(f"{module} imports {target}" for module, targets in graph.items() for target in targets
                    if layer(target) != layer(module) and layer(target) not in BELOW[layer(module)])
    assert not upward, "\n".join(upward)


def test_the_engines_hardware_layer_imports_nothing_of_the_engine_above_it(graph):
    """bench.engine.hardware (device, precision, CUDA graphs, processes, memory) is what the resolver, the step and
    the scorer stand on: none of its modules imports them back."""
    upward = sorted(f"{module} imports {target}" for module, targets in graph.items() for target in targets
                    if module.startswith("bench.engine.hardware") and target.startswith("bench.engine.")
                    and not target.startswith("bench.engine.hardware"))
    assert not upward, "\n".join(upward)


def test_no_module_imports_itself_back(graph):
    cycles = set()
    for start in graph:
        stack = [(start, (start,))]
        while stack:
            module, path = stack.pop()
            for target in graph[module]:
                if target == start and len(path) > 1:
                    cycles.add(" -> ".join(path + (start,)))
                elif target not in path and target > start:  # each cycle found once, from its smallest module
                    stack.append((target, path + (target,)))
    assert not cycles, "\n".join(sorted(cycles))
