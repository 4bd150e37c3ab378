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
