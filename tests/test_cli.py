"""The command line: help, one-line errors, and the documented commands."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def bench(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], capture_output=True, text=True,
                          env=env, cwd=cwd or REPO, timeout=600)


def assert_one_line_error(result, *fragments, code=None):
    assert result.returncode != 0
    if code is not None:
        assert result.returncode == code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("args", [[], ["--help"], ["data", "--help"], ["data", "fetch", "--help"],
                                  ["data", "list", "--help"], ["data", "verify", "--help"], ["data", "add", "--help"],
                                  ["tokenize", "stats", "--help"]])
def test_help_explains_itself(args):
    result = bench(*args)
    assert result.returncode == 0
    assert "Usage" in result.stdout


def test_help_does_not_import_torch():
    code = "import sys, cli; cli.main(['--help']) if False else None; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_unknown_corpus(tmp_path):
    assert_one_line_error(bench("data", "fetch", "nope", "--data-dir", str(tmp_path)),
                          "unknown corpus 'nope'", "wikitext-2", code=1)


def test_unknown_scheme(tmp_path):
    assert_one_line_error(bench("tokenize", "stats", "--dataset", "wikitext-2", "--schemes", "byte,bpe",
                                "--data-dir", str(tmp_path)), "needs a vocabulary size", "bpe:N")


def test_missing_argument_is_one_line(tmp_path):
    assert_one_line_error(bench("data", "fetch"), "Missing argument", "--help", code=2)
    assert_one_line_error(bench("data", "fetch", "enwik8", "--bogus"), "No such option", code=2)


def test_unfetched_corpus_says_how_to_fetch(tmp_path):
    assert_one_line_error(bench("tokenize", "stats", "--dataset", "wikitext-103", "--data-dir", str(tmp_path)),
                          "bench data fetch wikitext-103")


def test_bad_file_option(tmp_path):
    assert_one_line_error(bench("data", "fetch", "wikitext-2", "--file", "train", "--data-dir", str(tmp_path)),
                          "KEY=VALUE")


def test_missing_mirror_folder(tmp_path):
    assert_one_line_error(bench("data", "fetch", "wikitext-2", "--mirror", str(tmp_path / "nowhere"),
                                "--data-dir", str(tmp_path)), "does not exist")


def test_user_corpus_from_config(tmp_path):
    for s in ("train", "valid", "test"):
        (tmp_path / f"{s}.txt").write_text(f"some {s} words here\n" * 20)
    config = tmp_path / "corpora.toml"
    config.write_text('[corpora.mine]\ntrain = "train.txt"\nvalid = "valid.txt"\ntest = "test.txt"\n')
    data_dir = tmp_path / "data"
    assert bench("data", "add", "--config", str(config), "--data-dir", str(data_dir)).returncode == 0
    listed = json.loads(bench("data", "list", "--json", "--data-dir", str(data_dir)).stdout)
    mine = [r for r in listed if r["corpus"] == "mine"]
    assert len(mine) == 3 and all(r["present"] and r["status"] == "user" for r in mine)
    out = bench("tokenize", "stats", "--dataset", "mine", "--schemes", "byte,word:10", "--json",
                "--data-dir", str(data_dir))
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert {r["scheme"] for r in records} == {"byte", "word:10"}
    byte_valid = next(r for r in records if r["scheme"] == "byte" and r["split"] == "valid")
    assert byte_valid["tokens"] == len(("some valid words here\n" * 20).encode())


@pytest.mark.mirror
@pytest.mark.slow
def test_fetch_and_stats_on_wikitext2(tmp_path, mirror):
    data_dir = str(tmp_path / "data")
    refused = bench("data", "fetch", "wikitext-2", "--mirror", str(mirror), "--data-dir", data_dir)
    assert_one_line_error(refused, "wiki.train.tokens not found in mirror")
    partial = mirror / "wikitext-2" / "wiki.train.first565.tokens"
    fetched = bench("data", "fetch", "wikitext-2", "--mirror", str(mirror), "--data-dir", data_dir,
                    "--file", f"train={partial}", "--allow-unverified")
    assert fetched.returncode == 0, fetched.stderr
    assert "WARNING" in fetched.stderr and "not the official file" in fetched.stderr
    out = bench("tokenize", "stats", "--dataset", "wikitext-2", "--schemes", "byte,word:33278,word-open:33278",
                "--splits", "valid,test", "--json", "--data-dir", data_dir)
    assert out.returncode == 0, out.stderr
    records = {(r["scheme"], r["split"]): r for r in json.loads(out.stdout)}
    required = {"scheme", "split", "vocab_size", "tokens", "tokens_per_byte", "tokens_per_char", "tokens_per_word",
                "unk_rate", "lossless", "mb_per_s"}
    assert all(required <= set(r) for r in records.values())
    assert records[("byte", "test")]["tokens"] == 1_256_449
    assert records[("byte", "test")]["lossless"] and records[("word-open:33278", "test")]["lossless"]
    # The partial train split misses some valid/test words: the closed vocabulary loses them.
    assert not records[("word:33278", "test")]["lossless"]
    assert records[("word:33278", "test")]["unk_rate"] > 0
    assert all(r["verified"] is False for r in records.values())  # trained on the unverified train split
    listed = bench("data", "list", "--data-dir", data_dir)
    assert "unverified" in listed.stdout
