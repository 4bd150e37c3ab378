"""`tokenize stats --out FILE` replaces only its own report as it wrote it: a file that merely starts with the
report's title (a user's notes) was replaced, since the title was all it looked at."""

import pytest

from bench.data.tokenize_stats import MARK_END, MARK_START


@pytest.fixture(scope="module")
def data(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("stats"))


def _stats(cli_here, data, out, split="valid"):
    return cli_here("tokenize", "stats", "--dataset", "toy", "--data-dir", str(data), "--schemes", "byte",
                    "--splits", split, "--out", str(out))


def test_its_own_earlier_report_is_replaced(data, tmp_path, cli_here):
    report = tmp_path / "stats.md"
    assert _stats(cli_here, data, report, "valid").returncode == 0
    first = report.read_text()
    assert first.startswith("# Tokenization statistics: toy") and first.endswith(MARK_END)
    result = _stats(cli_here, data, report, "test")
    assert result.returncode == 0, result.stderr
    assert report.read_text() != first and "| byte | test |" in report.read_text().replace("  ", " ")


@pytest.mark.parametrize("kind", ["notes under the title", "its report, edited", "a mark of another text"])
def test_a_file_it_did_not_write_as_it_stands_is_refused_and_left_as_it_was(data, tmp_path, kind, cli_here,
                                                                           one_line_error):
    target = tmp_path / "stats.md"
    if kind == "notes under the title":
        target.write_bytes(b"# Tokenization statistics: my notes\n\nthree weeks of measurements\n")
    else:
        assert _stats(cli_here, data, target).returncode == 0
        text = target.read_text()
        if kind == "its report, edited":
            target.write_text(text + "my conclusions\n")
        else:  # the last line copied under other text: its sha256 is not that text's
            target.write_text("# Tokenization statistics: my notes\n" + text[text.index(MARK_START):])
    before = target.read_bytes()
    one_line_error(_stats(cli_here, data, target), f"--out {target} exists and was not written by this command",
                   "choose a new file name")
    assert target.read_bytes() == before
