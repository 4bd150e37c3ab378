"""Classical compressors as baselines (bench baselines): cold and primed bits per byte, the cache, the CLI."""

import json
import shutil
import subprocess
from dataclasses import replace

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
    paths["valid"].write_text(make_text(n_lines=120, seed=2))  # above MIN_SPLIT_BYTES: it gets figures
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

    from bench.study.report.compressor_rows import flag_worse_than_compressors, study_baselines, summary

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


def test_a_tampered_cached_figure_is_measured_again(repeated, capsys):
    table = compressor_baselines("rep", ("test",), repeated)
    cache = next((repeated / "cache" / "baselines").glob("rep-*.json"))
    stored = json.loads(cache.read_text())
    stored["baselines"][0]["bits_per_byte_cold"] = 0.001  # the edit: a figure no compressor reaches
    cache.write_text(json.dumps(stored))
    capsys.readouterr()
    assert compressor_baselines("rep", ("test",), repeated) == table
    assert "measuring again" in capsys.readouterr().err
    # a size edited together with its figure: consistent, but not what was written with the entry's digest
    stored = json.loads(cache.read_text())
    row = stored["baselines"][0]
    row.update(compressed_bytes_cold=1, bits_per_byte_cold=8 / row["split_bytes"])
    cache.write_text(json.dumps(stored))
    assert compressor_baselines("rep", ("test",), repeated) == table
    assert "measuring again" in capsys.readouterr().err
    # a figure edited and the digest written again: the figure does not follow from the entry's sizes
    stored = json.loads(cache.read_text())
    stored.pop("sha256")
    stored["baselines"][0]["bits_per_byte_cold"] = 0.001
    cache.write_text(json.dumps({**stored, "sha256": compressors._digest(stored)}))
    assert compressor_baselines("rep", ("test",), repeated) == table
    assert "do not follow from its compressed sizes" in capsys.readouterr().err


def test_a_split_too_small_for_a_compressor_gets_a_label_not_a_figure(tmp_path, make_text, cli_here):
    paths = {"train": tmp_path / "train.txt", "valid": tmp_path / "valid.txt", "test": tmp_path / "test.txt"}
    paths["train"].write_text(make_text(n_lines=200, seed=1))
    paths["valid"].write_text("ab\n")  # 3 bytes: a container's header alone is 20 to 60 bytes
    paths["test"].write_text(make_text(n_lines=150, seed=2))
    add_user_corpus("small", paths, tmp_path / "data")
    table = compressor_baselines("small", ("valid", "test"), tmp_path / "data")
    for b in table.baselines:
        small = b.split == "valid"
        assert (b.bits_per_byte_cold is None) == small and (b.bits_per_byte_primed is None) == small, b
        assert b.compressed_bytes_cold > 0  # the size is kept; only the rate is withheld
    done = cli_here("baselines", "small", "--splits", "valid,test", "--data-dir", str(tmp_path / "data"), "--quiet")
    valid = [line for line in done.stdout.splitlines() if line.startswith("valid")]
    assert done.returncode == 0 and len(valid) == len(METHODS), done.stdout
    assert all(line.count("too small: 3 bytes") == 2 for line in valid), done.stdout


def _half_written_then_full(monkeypatch):
    """Every Path.write_bytes from now on writes half its bytes, then fails as a full disk does."""
    import errno
    import os
    from pathlib import Path

    real = Path.write_bytes

    def full(self, data):
        real(self, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", full)


def test_a_cache_that_cannot_be_written_still_gives_every_figure_and_says_so(repeated, monkeypatch, cli_here):
    import pandas as pd

    from bench.study.report.compressor_rows import study_baselines

    _half_written_then_full(monkeypatch)
    done = cli_here("baselines", "rep", "--splits", "test", "--data-dir", str(repeated))
    assert done.returncode == 0, done.stderr
    assert sum(line.startswith("test ") for line in done.stdout.splitlines()) == len(METHODS), done.stdout
    assert "not cached" in done.stdout + done.stderr and "cached afterwards" not in done.stderr
    assert not (repeated / "cache").exists()  # neither a half-written entry nor the folders made for it
    table = compressor_baselines("rep", ("test",), repeated)
    sha = {s: table.splits[s]["sha256"] for s in ("train", "test")}
    runs = pd.DataFrame([{"dataset": "rep", "data_sha256_train": sha["train"], "data_sha256_test": sha["test"]}])
    found = study_baselines(runs, {"rep": str(repeated)})  # a report on this folder keeps its compressor rows
    assert list(found.tables) == ["rep"] and not found.missing


def test_a_read_only_data_folder_gives_every_figure_and_says_it_was_not_cached(repeated, tmp_path, cli_here):
    from tests.test_bad_inputs import mounted

    with mounted(tmp_path / "ro", "--bind", "-o", "ro", str(repeated)) as ro:
        done = cli_here("baselines", "rep", "--splits", "valid,test", "--data-dir", str(ro))
    assert done.returncode == 0, done.stderr
    assert sum(line.startswith(("valid ", "test ")) for line in done.stdout.splitlines()) == 2 * len(METHODS)
    assert "not cached" in done.stdout + done.stderr and "cached afterwards" not in done.stderr
    assert "Read-only file system" in done.stdout + done.stderr  # why


def test_the_longest_compressions_start_first_so_that_no_core_waits_alone_at_the_end(repeated, monkeypatch):
    started = []

    def recording(method):
        def compress(data):
            started.append((method.name, len(data), method.seconds_per_mb * len(data)))
            return method.compress(data)
        return replace(method, compress=compress)

    monkeypatch.setattr(compressors, "METHODS", tuple(recording(m) for m in METHODS))
    monkeypatch.setattr(compressors.os, "cpu_count", lambda: 1)  # one worker: the order of submission
    compressor_baselines("rep", ("test",), repeated)
    assert len(started) == 3 * len(METHODS)
    assert [s for _, _, s in started] == sorted((s for _, _, s in started), reverse=True)
    slowest = max(METHODS, key=lambda m: m.seconds_per_mb)
    assert started[0][0] == slowest.name and started[0][1] == max(n for _, n, _ in started)  # train + test
