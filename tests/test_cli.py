"""The command line: help, one-line errors, and the documented commands."""

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [[], ["--help"], ["data", "--help"], ["data", "fetch", "--help"],
                                  ["data", "list", "--help"], ["data", "verify", "--help"], ["data", "add", "--help"],
                                  ["tokenize", "stats", "--help"]])
def test_help_explains_itself(cli, args):
    result = cli(*args)
    assert result.returncode == 0
    assert "Usage" in result.stdout


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["run-matrix", "--help"], ["data", "list"]])
def test_light_commands_do_not_import_torch(repo, tmp_path, args):
    code = ("import sys, cli; code = cli.main(sys.argv[1:]); "
            "print('TORCH' if 'torch' in sys.modules else 'NO TORCH', code)")
    out = subprocess.run([sys.executable, "-c", code, *args, *(["--data-dir", str(tmp_path)] if "list" in args
                                                                  else [])],
                         capture_output=True, text=True, cwd=repo)
    assert out.stdout.strip().splitlines()[-1] == "NO TORCH 0", out.stdout + out.stderr


@pytest.mark.parametrize("args,fragments,code", [
    (["data", "fetch", "nope"], ["unknown corpus 'nope'", "wikitext-2"], 1),
    (["tokenize", "stats", "--dataset", "wikitext-2", "--schemes", "byte,bpe"], ["needs a vocabulary size",
                                                                               "bpe:N"], 1),
    (["data", "fetch"], ["Missing argument", "--help"], 2),
    (["data", "fetch", "enwik8", "--bogus"], ["No such option"], 2),
    (["tokenize", "stats", "--dataset", "wikitext-103"], ["bench data fetch wikitext-103"], 1),
    (["data", "fetch", "wikitext-2", "--file", "train"], ["KEY=VALUE"], 1),
    (["data", "fetch", "wikitext-2", "--mirror", "{tmp}/nowhere"], ["does not exist"], 1),
    (["models", "describe", "sha-rnn", "--set", "context_chars=512"], ["give --tokenizer and --dataset"], 1),
    (["speed", "--tokenizer", "byte"], ["give --tokenizer and --dataset together"], 1),
    (["models", "describe", "lstm", "--tokenizer", "byte", "--dataset", "wikitext-2", "--vocab-size", "300"],
     ["--vocab-size conflicts with --tokenizer/--dataset"], 1),
])
def test_bad_input_is_one_line(tmp_path, cli, one_line_error, args, fragments, code):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if args[0] in ("data", "tokenize") and len(args) > 2:
        args += ["--data-dir", str(tmp_path)]
    one_line_error(cli(*args), *fragments, code=code)


def test_user_corpus_from_config(tmp_path, cli):
    for s in ("train", "valid", "test"):
        (tmp_path / f"{s}.txt").write_text(f"some {s} words here\n" * 20)
    config = tmp_path / "corpora.toml"
    config.write_text('[corpora.mine]\ntrain = "train.txt"\nvalid = "valid.txt"\ntest = "test.txt"\n')
    data_dir = tmp_path / "data"
    assert cli("data", "add", "--config", str(config), "--data-dir", str(data_dir)).returncode == 0
    listed = json.loads(cli("data", "list", "--json", "--data-dir", str(data_dir)).stdout)
    mine = [r for r in listed if r["corpus"] == "mine"]
    assert len(mine) == 3 and all(r["present"] and r["status"] == "user" for r in mine)
    out = cli("tokenize", "stats", "--dataset", "mine", "--schemes", "byte,word:10", "--json",
              "--data-dir", str(data_dir))
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert {r["scheme"] for r in records} == {"byte", "word:10"}
    byte_valid = next(r for r in records if r["scheme"] == "byte" and r["split"] == "valid")
    assert byte_valid["tokens"] == len(("some valid words here\n" * 20).encode())


@pytest.mark.mirror
@pytest.mark.slow
def test_fetch_and_stats_on_wikitext2(tmp_path, mirror, cli, one_line_error):
    data_dir = str(tmp_path / "data")
    refused = cli("data", "fetch", "wikitext-2", "--mirror", str(mirror), "--data-dir", data_dir)
    one_line_error(refused, "wiki.train.tokens not found in mirror")
    partial = mirror / "wikitext-2" / "wiki.train.first565.tokens"
    fetched = cli("data", "fetch", "wikitext-2", "--mirror", str(mirror), "--data-dir", data_dir,
                  "--file", f"train={partial}", "--allow-unverified")
    assert fetched.returncode == 0, fetched.stderr
    assert "WARNING" in fetched.stderr and "not the official file" in fetched.stderr
    out = cli("tokenize", "stats", "--dataset", "wikitext-2", "--schemes", "byte,word:33278,word-open:33278",
              "--splits", "valid,test", "--json", "--data-dir", data_dir)
    assert out.returncode == 0, out.stderr
    records = {(r["scheme"], r["split"]): r for r in json.loads(out.stdout)}
    required = {"scheme", "split", "vocab_size", "tokens", "tokens_per_byte", "tokens_per_char", "tokens_per_word",
                "unk_rate", "lossless", "mb_per_s", "bytes_per_token", "chars_per_token", "renyi_efficiency",
                "unigram_entropy_bits_per_byte", "vocab_used"}
    assert all(required <= set(r) for r in records.values())
    assert records[("byte", "test")]["tokens"] == 1_256_449
    byte = records[("byte", "test")]  # one token a byte: its unigram code is its entropy per byte
    assert byte["bytes_per_token"] == 1.0 and byte["unigram_entropy_bits_per_byte"] == byte["unigram_entropy_bits"]
    assert 0 < byte["vocab_used"] < 1  # WikiText's test holds far fewer than 256 distinct bytes
    assert records[("byte", "test")]["lossless"] and records[("word-open:33278", "test")]["lossless"]
    # The partial train split misses some valid/test words: the closed vocabulary loses them.
    assert not records[("word:33278", "test")]["lossless"]
    assert records[("word:33278", "test")]["unk_rate"] > 0
    assert all(r["verified"] is False for r in records.values())  # trained on the unverified train split
    listed = cli("data", "list", "--data-dir", data_dir)
    assert "unverified" in listed.stdout


def test_flags_are_shown_as_flags_in_help(cli):
    """`--dry-run <bool>` read as an option taking a value, and `--dry-run true` then failed."""
    for command in (["run-matrix"], ["train"], ["eval"], ["tokenize", "stats"], ["data", "fetch"]):
        done = cli(*command, "--help")
        assert done.returncode == 0 and "<bool>" not in done.stdout, done.stdout


def test_speed_figures_are_shown_in_units_that_show_them():
    from bench.text_tables import duration, flops_rate

    assert flops_rate(0.0031) == "3.1 GFLOP/s" and flops_rate(412.3) == "412 TFLOP/s"
    assert flops_rate(2e-7) == "0.2 MFLOP/s"  # never "0.00 TFLOP/s"
    assert duration(1.81) == "1.81 s" and duration(750) == "12.5 minutes" and duration(3 * 86400) == "3 days"


@pytest.mark.parametrize("delay", [0.05, 0.2])
def test_ctrl_c_while_the_command_starts_is_exit_130_without_a_traceback(repo, delay):
    """Ctrl-C while cli.py imports the commands (a command's first fraction of a second) was a KeyboardInterrupt
    traceback and death by SIGINT (exit -2), before main() could turn it into exit 130. The signal is sent once
    Python itself is up (before that no program can catch it) and cli.py is about to run."""
    import signal
    import time

    start = ("import runpy, sys; sys.argv = ['cli.py', 'speed', '--model', 'lstm', '--preset', 'tiny', '--steps', "
             "'100000']; print('ready', file=sys.stderr, flush=True); runpy.run_path('cli.py', run_name='__main__')")
    process = subprocess.Popen([sys.executable, "-c", start], cwd=repo, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stderr.readline() == "ready\n"
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:  # a command that ran on after Ctrl-C must not train beside the rest of the suite
        process.kill()
        process.communicate()
    assert process.returncode == 130 and "Traceback" not in err and "interrupted" in err, (process.returncode, err)


@pytest.mark.parametrize("after_import", [
    "os.kill(os.getpid(), signal.SIGINT); time.sleep(60)",  # before main(): it builds the command line, then runs
    # a library's bare except around the interrupted code: the command ran on for its 100000 steps (seen in CI)
    "try:\n    os.kill(os.getpid(), signal.SIGINT); time.sleep(60)\nexcept BaseException:\n    print('ran on')",
])
def test_ctrl_c_before_main_catches_it_ends_the_command_at_once(repo, after_import):
    import signal

    start = f"import os, signal, sys, time\nimport cli\n{after_import}\nsys.exit(cli.main(['models', 'list']))"
    done = subprocess.run([sys.executable, "-c", start], cwd=repo, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal starts it
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted\n")
