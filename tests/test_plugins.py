"""How a plug-in comes in (bench.plugins, the registries' entry points), in this process: an installed entry point is
loaded when its name is first asked for, and every one when the names are listed; one that fails to import, or is
named like a shipped family, is refused in one line; a plug-in file is imported once; and a family a new process
could not import is refused before a matrix hands it to workers."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from bench import plugins
from bench.errors import BenchError
from tokenizers_study.errors import TokenizerError
from tokenizers_study.named_registry import Registry


class Point:
    """An entry point as importlib.metadata gives it, loading ``item`` (or raising it)."""

    def __init__(self, name: str, item, group: str = "toy.colours"):
        self.name, self.value, self.group, self.dist, self.item = name, f"toy_package:{name}", group, None, item
        self.loads = 0

    def load(self):
        self.loads += 1
        if isinstance(self.item, Exception):
            raise self.item
        return self.item


@pytest.fixture
def offered(monkeypatch):
    """``offered(*points)``: the entry points of group toy.colours that importlib.metadata will report."""
    def offer(*points):
        monkeypatch.setattr(metadata, "entry_points", lambda group: [p for p in points if p.group == group])
        return points

    return offer


def test_an_entry_point_is_loaded_when_its_name_is_first_asked_for(offered):
    blue, teal = offered(Point("blue", 3), Point("teal", 4))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    assert colours["red"] == 1 and blue.loads == teal.loads == 0  # the shipped names load nothing
    assert "blue" in colours and colours["blue"] == 3 and (blue.loads, teal.loads) == (1, 0)
    assert colours.get("grey") is None and teal.loads == 0
    assert list(colours.loaded()) == ["red", "blue"]  # what help texts list: nothing loaded for them
    assert list(colours) == ["red", "blue", "teal"] and teal.loads == 1  # a listing loads every one, once
    assert dict(colours.items()) == {"red": 1, "blue": 3, "teal": 4} and (blue.loads, teal.loads) == (1, 1)


def test_an_entry_point_that_fails_or_takes_a_shipped_name_is_refused_in_one_line(offered):
    offered(Point("blue", ModuleNotFoundError("No module named 'toy_package'")))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    with pytest.raises(TokenizerError, match=r"^plug-in toy_package:blue \(entry point 'blue' of toy.colours\) "
                                             r"cannot be imported \(ModuleNotFoundError: No module named "
                                             r"'toy_package'\); fix the package, or uninstall it$"):
        colours["blue"]
    offered(Point("red", 5))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    with pytest.raises(TokenizerError, match="declares colour 'red', a name the toolkit already has; rename"):
        list(colours)


def test_a_class_its_module_registered_itself_is_adopted_not_refused(offered):
    colours = Registry("colour", TokenizerError, entry_points="toy.colours")
    item = object()
    point = Point("blue", item)
    point.load = lambda: colours.register("blue", item)  # the module registers it as it is imported
    offered(point)
    assert colours["blue"] is item
    with pytest.raises(TokenizerError, match="colour 'blue' is registered twice"):
        colours.register("blue", object())


@pytest.fixture
def plugin_file(tmp_path):
    """A plug-in file that counts its imports, and nothing of it left in this process after the test."""
    path = tmp_path / "toy_counting_plugin.py"
    path.write_text("import builtins\nbuiltins.toy_imports = getattr(builtins, 'toy_imports', 0) + 1\n")
    yield path
    sys.modules.pop("toy_counting_plugin", None)
    plugins._LOADED.pop("toy_counting_plugin", None)
    import builtins

    vars(builtins).pop("toy_imports", None)


def test_a_plugin_file_is_imported_once_and_handed_on_by_its_path(plugin_file):
    import builtins

    first = plugins.load_plugin(str(plugin_file))
    again = plugins.load_plugins([plugin_file.name], base=plugin_file.parent, where="[matrix] plugins")
    assert builtins.toy_imports == 1 and again == [first] == [plugins.Plugin("toy_counting_plugin", str(plugin_file))]
    assert first in plugins.in_use()
    del sys.modules["toy_counting_plugin"]  # as in a new process: the worker imports it from its file
    plugins.load_in_worker([first])
    assert builtins.toy_imports == 2 and "toy_counting_plugin" in sys.modules


def test_a_plugin_is_refused_in_one_line_naming_what_is_wrong(tmp_path):
    (tmp_path / "broken_toy_plugin.py").write_text("raise RuntimeError('no\\nluck')\n")
    cases = [(str(tmp_path / "missing.py"), "does not exist"), ("no_such_toy_module", "no module of that name"),
             (str(tmp_path / "broken_toy_plugin.py"), "was refused: RuntimeError: no luck"),
             ("plugins/nibble.txt", "a plug-in's file is a .py file"), ("", "a plug-in is a module's name")]
    for name, said in cases:
        with pytest.raises(BenchError, match=said) as refused:
            plugins.load_plugin(name)
        assert "\n" not in str(refused.value)
    assert "broken_toy_plugin" not in sys.modules
    with pytest.raises(BenchError, match=r"takes a list of plug-ins, not the string 'a.py': write \['a.py'\]"):
        plugins.load_plugins("a.py")


def test_a_family_defined_where_no_new_process_can_import_it_is_refused(monkeypatch):
    from bench.models import MODELS
    from bench.models.lstm import LSTMLM

    made_here = type("MadeHere", (LSTMLM,), {"__module__": "__main__", "marker": "1"})
    monkeypatch.setitem(MODELS, "made-here", made_here)
    monkeypatch.delattr(sys.modules["__main__"], "__file__", raising=False)  # a notebook's __main__
    with pytest.raises(BenchError, match=r"^model 'made-here' is defined in this session \(a notebook, python -c or "
                                         r"a prompt\), which a worker process cannot import: put it in a module"):
        plugins.for_other_processes()
    monkeypatch.setattr(sys.modules["__main__"], "__file__", "/somewhere/script.py", raising=False)
    assert all(plugin.module != "__main__" for plugin in plugins.for_other_processes())  # spawn imports the script
    with pytest.raises(BenchError, match="defined in the script being run, which a cluster job cannot import"):
        plugins.for_other_processes(cluster=True)


def test_an_installed_plugin_whose_module_registered_itself_first_is_the_same_plugin(offered):
    """Imported by --plugin (or by a worker) before the registry looked at the entry points: no collision."""
    item = object()
    offered(Point("blue", item))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    colours.register("blue", item)  # the module's own registration, first
    assert list(colours) == ["red", "blue"] and colours["blue"] is item
    offered(Point("blue", object()))
    other = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    other.register("blue", item)
    with pytest.raises(TokenizerError, match="names <object .*>, but its module registered <object .*> as colour "
                                             "'blue'; make the entry point name the class its module registers"):
        list(other)


def test_a_failed_entry_point_says_so_again_and_a_refusal_loses_no_other(offered):
    failing = Point("blue", RuntimeError("boom"))
    offered(failing, Point("teal", 4))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    for _ in range(2):
        with pytest.raises(TokenizerError, match="cannot be imported \\(RuntimeError: boom\\)"):
            colours["blue"]
    assert colours["teal"] == 4
    offered(Point("a", 1), Point("red", 2), Point("y", 3))
    colours = Registry("colour", TokenizerError, [("red", 1)], entry_points="toy.colours")
    for _ in range(2):  # refused every time, never half-read
        with pytest.raises(TokenizerError, match="a name the toolkit already has"):
            "y" in colours
    twice = (Point("blue", 1), Point("blue", 2))
    twice[1].value = "other_package:blue"
    offered(*twice)
    with pytest.raises(TokenizerError, match="both declare colour 'blue'; uninstall one of them"):
        Registry("colour", TokenizerError, entry_points="toy.colours")["blue"]


@pytest.mark.slow
def test_a_plugin_a_worker_cannot_import_fails_its_chains_with_the_reason(tmp_path, make_toy_corpus, capsys):
    """Imported here, refused in the worker (its import raises in a child process): each chain says why, in the
    matrix's own line, instead of "worker died"."""
    from bench.study.matrix.execute import Execution, run_matrix

    data = make_toy_corpus(tmp_path)
    plugin = tmp_path / "toy_parent_only_plugin.py"
    plugin.write_text("import multiprocessing\nif multiprocessing.parent_process() is not None:\n"
                      "    raise RuntimeError('not in a child')\n")
    config = tmp_path / "toy.toml"
    config.write_text('[matrix]\nname = "toy"\nplugins = ["toy_parent_only_plugin.py"]\n[axes]\nmodel = ["lstm"]\n'
                      'tokenizer = ["byte"]\ndataset = ["toy"]\nseed = [0, 1]\n[budget]\nchars = 500\n'
                      '[context]\nchars = 16\n[shared]\npreset = "tiny"\nstop_if_not_learning = false\n')
    try:
        outcome = run_matrix(config, tmp_path / "results", data, Execution(jobs=2, threads=1, show_progress=False))
    finally:
        sys.modules.pop("toy_parent_only_plugin", None)
        plugins._LOADED.pop("toy_parent_only_plugin", None)
    assert outcome.counts == {"failed": 2}
    said = capsys.readouterr().err
    assert said.count("a plug-in of the matrix") == 2 and "RuntimeError: not in a child" in said, said


@pytest.fixture
def plugin_packages(tmp_path, monkeypatch):
    """Two plug-in packages on the path: ``toy_base`` (written against the toolkit) and ``toy_user``, whose module
    imports it; and a module named like a file of the exported folder's own."""
    for package, text in (("toy_base", "from tokenizers_study import Tokenizer\nBASE = Tokenizer\n"),
                          ("toy_user", "import numpy\nfrom toy_base.core import BASE\nUSER = BASE\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "core.py").write_text(text)
    (tmp_path / "bench_plugins.py").write_text("from bench.metrics import METRICS\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("toy_base", "toy_user", "bench_plugins")]:
        del sys.modules[name]


def test_the_export_carries_a_plugins_other_plugin_package_and_refuses_a_name_it_needs(plugin_packages, tmp_path):
    from bench.export.hf_folder import RESERVED
    from bench.export.vendor import declares_metrics, vendor

    folder = tmp_path / "exported"
    folder.mkdir()
    written = vendor(["toy_user.core"], folder, RESERVED)
    assert {"toy_user_core.py", "toy_base_core.py", "tokenizers_study.py"} <= set(written)  # numpy stays outside
    assert "from .toy_base_core import BASE" in (folder / "toy_user_core.py").read_text()
    with pytest.raises(BenchError, match="module bench_plugins would be written as bench_plugins.py, a file of the "
                                         "folder's own; rename the module"):
        vendor(["bench_plugins"], tmp_path / "other", RESERVED)
    assert not (tmp_path / "other").exists()
    assert declares_metrics("bench_plugins") and not declares_metrics("__main__")
    assert not declares_metrics("toy_user.core") and not declares_metrics("functools")
