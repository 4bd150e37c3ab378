"""Classical compressors as baselines (bench baselines): cold and primed bits per byte, the cache, the CLI."""

import json
import shutil
import subprocess

import pytest

from bench.data import compressors
from bench.data.compressors import METHODS, compressor_baselines
from bench.data.user import add_user_corpus


@pytest.fixture()
def repeated(tmp_path, make_text):
    """A corpus whose test split is a stretch of its train split: train tells a compressor all of test."""
    train = make_text(n_lines=200, seed=1)
    paths = {"train": tmp_path / "train.txt", "valid": tmp_path / "valid.txt", "test": tmp_path / "test.txt"}
    paths["train"].write_text(train)
    paths["valid"].write_text(make_text(n_lines=40, seed=2))
    paths["test"].write_text(train[-6000:])  # within every method's reach, gzip's 32 KiB window included
    add_user_corpus("rep", paths, tmp_path / "data", allow_overlap=True)
    return tmp_path / "data"


def test_a_compressor_primed_with_train_pays_little_for_text_it_has_read(repeated):
    table = compressor_baselines("rep", ("valid", "test"), repeated)
    assert {b.method for b in table.baselines} == {m.name for m in METHODS}
    for b in table.baselines:
        assert b.split_bytes == len((repeated / "rep" / f"{b.split}.txt").read_bytes())
        assert b.bits_per_byte_cold == pytest.approx(8 * b.compressed_bytes_cold / b.split_bytes)
        if b.split == "test":
            assert b.bits_per_byte_primed < 0.5 * b.bits_per_byte_cold, b
    best = table.best_primed("test")
    assert best.bits_per_byte_primed == min(b.bits_per_byte_primed for b in table.baselines if b.split == "test")


def test_figures_are_cached_by_the_files_content(repeated, monkeypatch):
    first = compressor_baselines("rep", ("test",), repeated)
    monkeypatch.setattr(compressors, "_measure", lambda *a: pytest.fail("measured again instead of cached"))
    assert compressor_baselines("rep", ("test",), repeated) == first
    # Another test file is another key: measured, never read from the cache.
    (repeated / "rep" / "test.txt").write_text("a different test split\n" * 50)
    monkeypatch.undo()
    with pytest.raises(Exception, match="changed since it was fetched"):
        compressor_baselines("rep", ("test",), repeated)  # open_split re-hashes every file


def test_another_split_file_gives_another_cache_key(tmp_path, make_text):
    keys = []
    for i, test in enumerate(("one test split\n" * 40, "another test split\n" * 40)):
        root = tmp_path / str(i)
        root.mkdir()
        for split, text in (("train", make_text(n_lines=50)), ("valid", "v\n" * 10), ("test", test)):
            (root / f"{split}.txt").write_text(text)
        add_user_corpus("c", {s: root / f"{s}.txt" for s in ("train", "valid", "test")}, root / "data")
        table = compressor_baselines("c", ("test",), root / "data")
        keys.append((table.splits["test"]["sha256"], sorted((root / "data" / "cache" / "baselines").iterdir())[0].name))
    assert keys[0][0] != keys[1][0] and keys[0][1] != keys[1][1]


@pytest.mark.parametrize("tool,args,method,tolerance", [
    ("bzip2", ["-9", "-c"], "bzip2 -9", 0),        # the same libbz2: the same bytes
    ("xz", ["-9e", "-c"], "xz -9e", 0),            # the same liblzma preset and check: the same bytes
    ("gzip", ["-9", "-n", "-c"], "gzip -9", 0.01),  # GNU gzip's own deflate against zlib's
    ("zstd", ["--ultra", "-22", "-c", "-q", "--no-check"], "zstd -22", 0.01),
])
def test_sizes_agree_with_the_command_line_tools(repeated, tool, args, method, tolerance):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    path = repeated / "rep" / "valid.txt"
    size = len(subprocess.run([tool, *args, str(path)], capture_output=True, check=True).stdout)
    ours = next(b for b in compressor_baselines("rep", ("valid",), repeated).baselines
                if b.method == method and b.split == "valid")
    assert ours.compressed_bytes_cold == pytest.approx(size, rel=tolerance, abs=0)


def test_the_cli_prints_a_table_and_json_and_refuses_bad_input(repeated, cli, one_line_error):
    done = cli("baselines", "rep", "--splits", "test", "--data-dir", str(repeated), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["splits"]["test"]["status"] == "user" and len(data["baselines"]) == len(METHODS)
    done = cli("baselines", "rep", "--splits", "test", "--data-dir", str(repeated))
    assert done.returncode == 0 and "PPMd" in done.stdout and "primed = size(train + split)" in done.stdout
    one_line_error(cli("baselines", "rep", "--splits", "dev", "--data-dir", str(repeated)), "--splits dev")
    one_line_error(cli("baselines", "nope", "--data-dir", str(repeated)), "nope")


def test_a_report_uses_only_baselines_of_the_files_its_runs_used(repeated):
    import pandas as pd

    from bench.study.compressor_rows import flag_worse_than_compressors, study_baselines, summary

    table = compressor_baselines("rep", ("test",), repeated)
    sha = {s: table.splits[s]["sha256"] for s in ("train", "test")}
    runs = pd.DataFrame([{"dataset": "rep", "data_sha256_train": sha["train"], "data_sha256_test": sha["test"],
                          "test_bits_per_byte": b, "test_n_bytes": 100, "test_n_chars": 100, "flags": "",
                          "lossless_bool": lossless}
                         for b, lossless in ((table.best_primed().bits_per_byte_primed * 0.99, True), (9.0, True),
                                             (table.best_primed().bits_per_byte_primed * 0.5, False))])
    found = study_baselines(runs, {"rep": str(repeated)})
    assert flag_worse_than_compressors(runs, found).tolist() == ["", "✗", ""]
    # the lossy run codes another text: it does not count as beating the compressor
    assert "**1 of 2 lossless runs do not beat it (✗)**" in summary(found, runs) and "1 run with a lossy" in summary(
        found, runs)
    other = runs.assign(data_sha256_test="0" * 64)  # scored on another test file: no baselines, and why
    found = study_baselines(other, {"rep": str(repeated)})
    assert not found.tables and flag_worse_than_compressors(other, found).tolist() == ["", "", ""]
    assert "not the one these runs used" in summary(found, other)
