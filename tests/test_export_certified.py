"""``bench export`` exports only the weights its result scored, and the exported folder says when it is damaged.

A result records the sha256 of the scored weights' tensors; export refuses a ``best.pt`` that is not those weights
(edited since) and a result that does not record them, in one line. The folder records the sha256 too
(``config.json``): ``score_text.py`` refuses, in one line and with a non-zero exit, a folder whose weights are not
those (a tensor missing, edited, of another shape, NaN), a layout that cannot score the text and a total that is
not a number; by default it scores in the card's layout and gives the card's figures (to 1e-6 relative), with the
command the card prints. A full disk is one line; any legal OUT name is taken; the scratch folder of an export
that was killed is removed by the next export, and nothing else is."""

import contextlib
import io
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")  # the dev extra (make test) installs it

from bench.engine import checkpoint  # noqa: E402
from bench.engine.run import train, weights_digest  # noqa: E402
from bench.engine.spec import RunSpec  # noqa: E402
from bench.errors import BenchError  # noqa: E402
from bench.export.hf_folder import export_run  # noqa: E402
from bench.export.scratch import MARKER, PREFIX, scratch_folder  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.test_bad_inputs import FAST, call, expand, mounted, sandbox  # noqa: E402,F401
from tests.verdict_catalogues import WORKS, check_case  # noqa: E402

TOLERANCE = 1e-6

# score_text.py run as `python FOLDER/score_text.py ARGS` is, in the Python the catalogue runs (-c)
SCORE_TEXT = ("import runpy, sys\nsys.argv = ['score_text.py', {args}]\n"
              "runpy.run_path(sys.argv[1] + '/score_text.py', run_name='__main__')\n")


def score_text(folder: str, *options: str, text: str = "{text}") -> list[str]:
    """``python {folder}/score_text.py {folder} TEXT OPTIONS`` as a catalogue entry (``folder``: a place)."""
    return ["-c", SCORE_TEXT.format(args=", ".join(repr(a) for a in ("{" + folder + "}", text, *options)))]


CATALOGUE = [
    ("export of a run whose best.pt was edited (one tensor scaled, the run id kept)",
     ["export", "{cert_edited_run}", "{new}"], "is not the weights its result.json scored"),
    ("export of a result written before results recorded the weights' sha256",
     ["export", "{cert_unhashed_run}", "{new}"], "does not record the sha256 of the weights it scored"),
    ("score_text.py of a folder missing a tensor", score_text("cert_missing"), "lacks tensors of the model"),
    ("score_text.py of a folder with an edited tensor", score_text("cert_edited"),
     "are not those it was exported with"),
    ("score_text.py of NaN weights whose sha256 config.json records", score_text("cert_nan"),
     "total negative log-likelihood is nan"),
    ("score_text.py of a folder whose config.json says eval_chunk 0", score_text("cert_chunk0"),
     "config.json's eval_chunk is 0"),
    ("score_text.py --chunk 0", score_text("cert_hf", "--chunk", "0"), "--chunk is 0, not a positive number"),
    ("score_text.py --chunk abc", score_text("cert_hf", "--chunk", "abc"), "invalid int value: 'abc'"),
    ("score_text.py --streams 0", score_text("cert_hf", "--streams", "0"), "--streams is 0, not a positive number"),
    ("score_text.py --streams beyond the tokens", score_text("cert_hf", "--streams", "100000"),
     "more than the text's"),
    ("score_text.py of a Transformer --chunk beyond its window", score_text("cert_tf", "--chunk", "1000"),
     "longer than the model's window"),
    ("score_text.py of a truncated model.safetensors", score_text("cert_truncated"), "cannot be loaded"),
    ("score_text.py of a tensor of another shape", score_text("cert_reshaped"), "holds tensors of other shapes"),
    ("score_text.py of a tensor the model does not have", score_text("cert_extra"),
     "holds tensors the model does not have"),
    ("score_text.py of a config.json without weights_sha256", score_text("cert_unrecorded"),
     "records no weights_sha256"),
    ("score_text.py of an empty text", score_text("cert_hf", text="{empty}"), "has no tokens to score"),
    ("score_text.py of an intact folder, in the card's layout", score_text("cert_hf"), WORKS + '"bits_per_byte"'),
]


def places(box: Path, sandbox_places: dict) -> dict:
    """Runs whose best.pt or result.json changed since the run, and exported folders, intact and damaged."""
    from safetensors.torch import load_file, save_file

    run = Path(sandbox_places["run"])
    out = {"cert_edited_run": box / "cert-edited-run", "cert_unhashed_run": box / "cert-unhashed-run"}
    for folder in out.values():
        shutil.copytree(run, folder)
    best = torch.load(out["cert_edited_run"] / "best.pt", weights_only=True)
    name = sorted(best["model"])[0]
    best["model"][name] = best["model"][name] * 3  # finite, the same run id: only its sha256 tells
    torch.save(best, out["cert_edited_run"] / "best.pt")
    result = json.loads((out["cert_unhashed_run"] / "result.json").read_text())
    result["evaluation"].pop("weights_sha256", None)  # as results were written before they recorded it
    (out["cert_unhashed_run"] / "result.json").write_text(json.dumps(result))
    out["cert_hf"] = export_run(run, box / "cert-hf")
    out["cert_tf"] = export_run(sandbox_places["transformer_run"], box / "cert-tf")
    weights = load_file(str(out["cert_hf"] / "model.safetensors"))
    first = sorted(weights)[0]
    damaged = {"cert_missing": {k: v for k, v in weights.items() if k != first},
               "cert_edited": weights | {first: weights[first] * 1.01},
               "cert_nan": weights | {first: torch.full_like(weights[first], float("nan"))},
               "cert_reshaped": weights | {first: torch.zeros(3)},
               "cert_extra": weights | {"model.extra": torch.zeros(3)},
               "cert_chunk0": weights, "cert_truncated": weights, "cert_unrecorded": weights}
    for place, tensors in damaged.items():
        folder = out[place] = box / place.replace("_", "-")
        shutil.copytree(out["cert_hf"], folder)
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        config = json.loads((folder / "config.json").read_text())
        if place == "cert_nan":  # the sha256 recorded for these weights: only the total tells
            config["weights_sha256"] = weights_digest({k.removeprefix("model."): v for k, v in tensors.items()})
        config |= {"eval_chunk": 0} if place == "cert_chunk0" else {}
        config.pop("weights_sha256", None) if place == "cert_unrecorded" else None
        (folder / "config.json").write_text(json.dumps(config))
    data = (out["cert_truncated"] / "model.safetensors").read_bytes()
    (out["cert_truncated"] / "model.safetensors").write_bytes(data[:len(data) // 2])
    return {k: str(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def box(sandbox, tmp_path_factory) -> dict:
    return {**sandbox, **places(tmp_path_factory.mktemp("certified"), sandbox)}


def run_entry(argv: list[str]) -> tuple[int, str, str]:
    """A catalogue entry in this process: the command line, or ``-c CODE`` as Python runs it (a SystemExit's
    message printed to stderr), transformers' logging settings as found."""
    if argv[0] != "-c":
        return call(argv)
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(argv[1], "<-c>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            code = exc.code if isinstance(exc.code, int) else 1 if exc.code is not None else 0
    logging.set_verbosity(verbosity)
    (logging.enable_progress_bar if bars else logging.disable_progress_bar)()
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CATALOGUE],
                         ids=[name for name, _, _ in CATALOGUE])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(box, args, fragment):
    check_case(Path(box["sandbox"]), [expand(a, box) for a in args], fragment, run_entry, fresh=Path(box["new"]))


def test_a_result_records_the_sha256_of_the_weights_it_scored(box):
    result = json.loads((Path(box["run"]) / "result.json").read_text())
    assert result["evaluation"]["weights_sha256"] == weights_digest(checkpoint.load(box["run"])["model"])
    config = json.loads((Path(box["cert_hf"]) / "config.json").read_text())
    card = (Path(box["cert_hf"]) / "README.md").read_text()
    assert config["weights_sha256"] == result["evaluation"]["weights_sha256"]
    assert f"sha256 of its tensors `{config['weights_sha256']}`" in card


def test_score_text_gives_the_cards_figures_with_the_cards_commands(box):
    """Each line of the card's command block, run as written (FOLDER the folder), prints that split's bits per byte
    as the card and result.json give it, within 1e-6 relative; the card's layout is config.json's defaults."""
    folder = Path(box["cert_hf"])
    result = json.loads((Path(box["run"]) / "result.json").read_text())
    block = re.search(r"```bash\n(.*?)```", (folder / "README.md").read_text().split("## Results")[1], re.S).group(1)
    lines = block.strip().splitlines()
    assert len(lines) == len(result["metrics"]) == 2
    layout = result["evaluation"]["layout"]
    config = json.loads((folder / "config.json").read_text())
    assert (config["eval_streams"], config["eval_chunk"]) == (layout["streams"], layout["chunk"]) and \
        layout["streams"] > 1  # not one stream: the figure needs the card's layout
    for line in lines:
        command, comment = line.split("#")
        split, card_figure = re.fullmatch(r" (\w+): ([0-9.]+) bits/byte", comment).groups()
        argv = shlex.split(command.replace("FOLDER", str(folder)))
        assert argv[:2] == ["python", f"{folder}/score_text.py"] and argv[4:] == [
            "--streams", str(layout["streams"]), "--chunk", str(layout["chunk"])]
        for args in (argv[2:], argv[2:4]):  # as written, and with the defaults
            status, out, err = run_entry(["-c", SCORE_TEXT.format(args=", ".join(map(repr, args)))])
            assert status == 0, err
            mine = json.loads(out)["bits_per_byte"]
            assert abs(mine - float(card_figure)) <= TOLERANCE * float(card_figure), (split, args)
            assert abs(mine - result["metrics"][split]["bits_per_byte"]) <= TOLERANCE * mine, (split, args)


def test_score_texts_sha256_is_benchs():
    """score_text.py cannot import bench: its copy of the weights' sha256 must stay the one results record."""
    mine = runpy.run_path(str(REPO / "bench" / "export" / "templates" / "score_text.py"))["weights_digest"]
    tensors = {"b": torch.arange(6, dtype=torch.float32).view(2, 3).t(), "a": torch.ones(2, dtype=torch.bfloat16),
               "empty": torch.zeros(0), "ids": torch.tensor([1, 2], dtype=torch.int64)}
    assert mine(tensors) == weights_digest(tensors)
    assert mine(tensors | {"a": torch.ones(2, dtype=torch.float16)}) != weights_digest(tensors)


def test_a_full_disk_is_one_line_and_leaves_nothing(box, tmp_path):
    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", "size=32k", "tmpfs") as full:  # less than the weights
        code, _, err = call(["export", box["run"], str(full / "hf")])
        assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"error: {full / 'hf'}: ") and "the disk is full" in err
        assert list(full.iterdir()) == []


def test_any_name_the_file_system_allows_is_a_name_for_out(box, tmp_path):
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    out = export_run(box["run"], tmp_path / ("x" * longest))
    assert (out / "model.safetensors").is_file() and sorted(p.name for p in tmp_path.iterdir()) == [out.name]


KILLED = """
import sys, time
from bench.export import hf_folder
write = hf_folder.write_folder
def write_then_wait(*args):
    write(*args)
    print("written", flush=True)
    time.sleep(600)
hf_folder.write_folder = write_then_wait
hf_folder.export_run(sys.argv[1], sys.argv[2])
"""


def test_a_killed_exports_scratch_folder_is_removed_by_the_next_export_and_nothing_else(box, tmp_path):
    killed = subprocess.Popen([sys.executable, "-c", KILLED, box["run"], str(tmp_path / "killed")], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert killed.stdout.readline() == "written\n"
    finally:
        killed.kill()
        killed.wait()
    left = [p for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].name.startswith(PREFIX) and (left[0] / MARKER).is_file()
    (tmp_path / f"{PREFIX}mine").mkdir()  # the user's, by its name alone: no marker
    (tmp_path / f"{PREFIX}mine" / "notes.txt").write_text("mine")
    with scratch_folder(tmp_path) as live:  # an export writing now
        export_run(box["run"], tmp_path / "again")
        assert live.is_dir() and (live / MARKER).is_file()
    assert not left[0].exists() and (tmp_path / f"{PREFIX}mine" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, f"{PREFIX}mine", "again"])


def test_an_old_results_refusal_tells_a_fix_that_works(box, tmp_path):
    """The fix the refusal names: move result.json aside and run the run again; it only scores, and records."""
    run = Path(shutil.copytree(box["cert_unhashed_run"], tmp_path / "old"))
    with pytest.raises(BenchError, match="move result.json aside and run the run again with the same settings"):
        export_run(run, tmp_path / "hf")
    steps = json.loads((run / "result.json").read_text())["training"]["steps"]
    (run / "result.json").rename(tmp_path / "old-result.json")
    again = train(RunSpec(model="sha-rnn", preset="tiny", tokenizer="byte", dataset="toy", overrides=FAST,
                          data_dir=box["data"], out_dir=str(run)), show_progress=False)
    assert again.training.steps == steps and again.evaluation.weights_sha256 == \
        weights_digest(checkpoint.load(run)["model"])
    assert (export_run(run, tmp_path / "hf") / "model.safetensors").is_file()
