"""A matrix config: the TOML file that describes a whole study.

Its tables and what each takes: :data:`CONFIG_TABLES` (``bench config tables`` prints them). How the grid
becomes runs is :mod:`bench.study.matrix.grid`; the matching rules are there.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.corpora import SPLITS
from bench.engine.budget import LIMITS
from bench.errors import USER_ERRORS, BenchError
from bench.fileio import read_toml
from bench.plugins import load_plugins

# Each table of a matrix config: how it is written and what it takes.
CONFIG_TABLES = {
    "matrix": ("[matrix]", 'name, description, match (default rule: "chars"), data_dir,\n'
                       'plugins = [...] (modules or .py paths, relative to the config)'),
    "axes": ("[axes]", "model = [...], tokenizer = [...], dataset = [...], seed = [...], match = [...], "
                       "<field> = [...]"),
    "budget": ("[budget]", "chars = N (match = chars), tokens = N (match = tokens), steps = N (match = steps),\n"
                           "flops = N (match = flops), epochs = x"),
    "context": ("[context]", "chars = N (match = chars or flops), tokens = N (match = tokens or steps)"),
    "shared": ("[shared]", 'preset = "tiny", and any model or training field for every run'),
    "models": ("[models.<model>]", "fields for one model"),
    "tokenizers": ('[tokenizers."<scheme>"]', "fields for one tokenization"),
    "include": ("[[include]]", "extra grids: tables of axis values (scalars or lists), added to the main grid"),
    "phases": ("[[phases]]", 'runs done one after another per cell (name, any field, init_from = "previous")'),
    "corpora": ("[corpora.<name>]", "a user corpus: train/valid/test paths (relative to the config), or\n"
                                    'prefix_of = "<corpus>" with train_bytes, valid_bytes, test_bytes'),
    "pretrained": ("[[pretrained]]", "a HuggingFace model scored beside the trained runs (bench.study.matrix.pretrained)"),
}
TABLES = tuple(CONFIG_TABLES)
BUDGET_KEYS = tuple(limit.unit for limit in LIMITS if limit.unit != "minutes")
CONTEXT_KEYS = ("chars", "tokens")
TEXT_AXES = ("model", "preset", "tokenizer", "dataset", "match")
MATRIX_KEYS = ("name", "description", "match", "data_dir", "plugins")
# Settings a matrix holds equal by its matching rule: [budget] and [context] set them, never a settings table.
RULED = ("max_steps", "max_epochs", "max_train_chars", "max_tokens", "max_train_flops", "bptt", "context_chars")


@dataclass
class MatrixConfig:
    name: str
    path: Path
    sha256: str
    description: str
    axes: dict[str, list]
    includes: list[dict[str, list]]
    budget: dict[str, Any]
    context: dict[str, Any]
    shared: dict[str, Any]
    per_model: dict[str, dict]
    per_tokenizer: dict[str, dict]
    phases: list[dict]
    data_dir: str | None
    default_match: str
    corpora: dict[str, dict] = field(default_factory=dict)
    pretrained: list[dict] = field(default_factory=list)  # [[pretrained]] entries, checked
    # every cell's (and phase's) validated spec, by cell label and phase name: filled once by grid.load_config
    cell_specs: dict[tuple[str, str | None], Any] = field(default_factory=dict, repr=False, compare=False)


def _grid(table: dict, path: Path, where: str) -> dict[str, list]:
    """Axis name -> its values (a scalar is a one-value list); every value a string or a number."""
    grid = {}
    for key, value in table.items():
        values = list(value) if isinstance(value, list) else [value]
        if not values:
            raise BenchError(f"{path}: {where} {key} is empty; give at least one value")
        for item in values:
            kind = str if key in TEXT_AXES else int if key == "seed" else (str, int, float, bool)
            if isinstance(item, bool) and kind is int or not isinstance(item, kind):
                want = {str: "a string", int: "an integer"}.get(kind, "a string or a number")
                raise BenchError(f"{path}: {where} {key} = {item!r}: each value must be {want}")
            if isinstance(item, str) and item != item.strip():
                raise BenchError(f"{path}: {where} {key} = {item!r} has spaces around it; write {item.strip()!r}")
        same = [(a, b) for i, a in enumerate(values) for b in values[i + 1:] if _same_value(a, b)]
        if same:
            raise BenchError(f"{path}: {where} {key} lists one value twice ({same[0][0]!r} and {same[0][1]!r}); list "
                             f"each value once")
        grid[key] = values
    return grid


def is_matrix_name(name: str) -> bool:
    """Letters, digits, '-' and '_', with at least one letter or digit: it names folders (results/<name>)."""
    return name.replace("-", "").replace("_", "").isalnum()


def _same_value(a, b) -> bool:
    """16, 16.0 and "16" are one setting once converted to the field's type."""
    def number(v):
        try:
            return float(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            return None
    return a == b or (number(a) is not None and number(a) == number(b))


def _table(doc: dict, key: str, path: Path) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise BenchError(f"{path}: [{key}] must be a table")
    return value


def read_config(path: str | Path, with_plugins: bool = True) -> MatrixConfig:
    """Read a matrix config and check its tables (``bench.study.matrix.grid.load_config`` checks its cells too);
    ``with_plugins=False``: its plug-ins are not imported (a copy away from the paths it names: installed ones and
    ``--plugin`` serve instead)."""
    from bench.study.matrix.pretrained import parse_entries

    path = Path(path)
    doc = read_toml(path)
    unknown = sorted(set(doc) - set(TABLES))
    if unknown:
        raise BenchError(f"{path}: unknown section(s) {unknown}; allowed: {', '.join(TABLES)}")
    meta = _table(doc, "matrix", path)
    bad = sorted(set(meta) - set(MATRIX_KEYS))
    if bad:
        raise BenchError(f"{path}: unknown [matrix] key(s) {bad}; allowed: {', '.join(MATRIX_KEYS)}")
    for key in ("description", "match", "data_dir"):
        if key in meta and not isinstance(meta[key], str):
            hint = "; several rules go in [axes] match = [...]" if key == "match" else ""
            raise BenchError(f"{path}: [matrix] {key} must be a string, not {meta[key]!r}{hint}")
    if "name" in meta and (not isinstance(meta["name"], str) or not meta["name"].strip()):
        raise BenchError(f"{path}: [matrix] name must be a non-empty string, not {meta['name']!r}; give a name or "
                         f"leave the key out (the file's name is the default)")
    name = meta.get("name") or path.stem
    if not is_matrix_name(name):
        source = "[matrix] name" if "name" in meta else "the matrix name (from the file's name)"
        raise BenchError(f"{path}: {source} {name!r} must use letters, digits, '-' and '_', with at least one letter "
                         f"or digit" + ("" if "name" in meta else "; set [matrix] name = \"...\""))
    # first: the axes and tables may name what a plug-in registers
    if with_plugins:
        load_plugins(meta.get("plugins", []), path.parent, f"{path}: [matrix] plugins")
    axes = _grid(_table(doc, "axes", path), path, "[axes]")
    for key in ("model", "tokenizer", "dataset"):
        if key not in axes:
            raise BenchError(f"{path}: [axes] needs a non-empty {key} list")
    includes = []
    for number, entry in enumerate(doc.get("include", []), 1):
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: every [[include]] must be a table of axis values")
        missing = [key for key in ("model", "tokenizer", "dataset") if key not in entry]
        if missing:
            raise BenchError(f"{path}: [[include]] {number} needs model, tokenizer and dataset (missing: "
                             f"{', '.join(missing)})")
        includes.append(_grid(entry, path, "[[include]]"))
    phases = _phases(doc, path)
    budget, context = _table(doc, "budget", path), _table(doc, "context", path)
    for table, keys, label in ((budget, BUDGET_KEYS, "budget"), (context, CONTEXT_KEYS, "context")):
        bad = sorted(set(table) - set(keys))
        if bad:
            raise BenchError(f"{path}: unknown [{label}] key(s) {bad}; allowed: {', '.join(keys)}")
    _no_ruled_settings(_table(doc, "shared", path), "[shared]", path)
    config = MatrixConfig(
        name=name, path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        description=str(meta.get("description", "")), axes=axes, includes=includes, budget=budget,
        context=context, shared=_table(doc, "shared", path), per_model=_settings_tables(doc, "models", path),
        per_tokenizer=_settings_tables(doc, "tokenizers", path), phases=phases, data_dir=meta.get("data_dir"),
        default_match=meta.get("match", "chars"), corpora=_corpora(doc, path),
        pretrained=parse_entries(doc.get("pretrained", []), path, axes["dataset"]),
    )
    _tables_match_the_grid(config)
    return config


def _tables_match_the_grid(config: MatrixConfig) -> None:
    """A [tokenizers."X"] table no cell uses is a typo (bpe:500 for bpe:512) that would apply to nothing without a
    word. ([models.X] names are checked against the models; a table for a model left out of the axes is kept.)"""
    used = {value for grid in [config.axes] + config.includes for value in grid.get("tokenizer", [])}
    for name in config.per_tokenizer:
        if name not in used:
            raise BenchError(f"{config.path}: [tokenizers.{name}] matches no tokenizer of the grid "
                             f"({', '.join(map(str, sorted(used)))}); fix its name or remove it")


def _phases(doc: dict, path: Path) -> list[dict]:
    """[[phases]]: each named, names unique, init_from only "previous" and never in the first."""
    phases = doc.get("phases", [])
    if not isinstance(phases, list) or not all(isinstance(p, dict) and p.get("name") for p in phases):
        raise BenchError(f"{path}: every [[phases]] needs a name")
    names = [p["name"] for p in phases]
    if len(set(names)) < len(names):
        raise BenchError(f"{path}: two [[phases]] are named alike ({', '.join(map(str, names))}); give each its own "
                         f"name")
    for number, phase in enumerate(phases):
        if "init_from" in phase and (phase["init_from"] != "previous" or number == 0):
            raise BenchError(f"{path}: [[phases]] {phase['name']}: init_from = \"previous\" (the phase before it) is "
                             f"the only value a phase takes, and the first phase has none before it; other weights go "
                             f"in [shared] init_from")
    return phases


def _settings_tables(doc: dict, key: str, path: Path) -> dict[str, dict]:
    """[models.<model>] or [tokenizers."<scheme>"]: settings for the runs of one model or one tokenization."""
    from bench.models import MODELS
    from tokenizers_study import parse_scheme

    tables = _table(doc, key, path)
    for name, entry in tables.items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: [{key}.{name}] must be a table of settings")
        _no_ruled_settings(entry, f"[{key}.{name}]", path)
        if "preset" in entry:
            raise BenchError(f"{path}: [{key}.{name}] preset: a preset is chosen in [shared] preset or [axes] preset = "
                             f"[...] (one model's preset: [[include]] with model and preset)")
        if key == "models" and name not in MODELS:
            raise BenchError(f"{path}: [models.{name}]: {MODELS.unknown(name)}")
        if key == "tokenizers":
            try:
                parse_scheme(name)
            except USER_ERRORS as exc:
                raise BenchError(f'{path}: [tokenizers."{name}"]: {exc}') from None
    return tables


def _no_ruled_settings(table: dict, where: str, path: Path) -> None:
    """A budget or context in a settings table would be replaced by the matching rule's without a word."""
    ruled = [key for key in table if key in RULED]
    if ruled:
        raise BenchError(f"{path}: {where} {ruled[0]} is held equal by the matching rule: a matrix's budget goes in "
                         f"[budget] (chars, tokens, steps, flops, epochs) and its context in [context] (chars, tokens)")


def _corpora(doc: dict, path: Path) -> dict[str, dict]:
    corpora = {}
    for name, entry in _table(doc, "corpora", path).items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: [corpora.{name}] must be a table")
        files = set(SPLITS)
        prefix = {"prefix_of"} | {f"{s}_bytes" for s in SPLITS}
        if set(entry) == files:
            bad = [k for k, v in entry.items() if not isinstance(v, str) or not v.strip()]
            if bad:
                raise BenchError(f"{path}: [corpora.{name}] {bad[0]} must be a file path (a string), not "
                                 f"{entry[bad[0]]!r}")
            corpora[name] = {"files": {k: str(path.parent / v) for k, v in entry.items()}}
        elif set(entry) == prefix:
            corpora[name] = {"prefix_of": entry["prefix_of"],
                             "sizes": {s: entry[f"{s}_bytes"] for s in SPLITS}}
        else:
            raise BenchError(f"{path}: [corpora.{name}] needs either train, valid, test paths or prefix_of with "
                             f"train_bytes, valid_bytes, test_bytes")
    return corpora


def register_corpora(config: MatrixConfig, data_dir: Path) -> None:
    """Install the config's own corpora in the data folder (a no-op when they are already there)."""
    from bench.data.user import add_prefix_corpus, add_user_corpus

    for name, entry in config.corpora.items():
        if "files" in entry:
            add_user_corpus(name, entry["files"], data_dir)
        else:
            add_prefix_corpus(name, entry["prefix_of"], entry["sizes"], data_dir)
