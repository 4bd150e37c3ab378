"""docs/extending.md's code runs as the page shows it: the page includes the example package's files themselves,
its metric declares bits per line, and the nibble scheme (examples/plugin) gives every text back and places each
token in it. tests/test_plugin_package.py installs the package and runs the page's steps."""

from __future__ import annotations

import importlib.util
import math

import pytest

from tests.conftest import REPO
from tokenizers_study import FAMILIES, tokenizer_from_bytes, train_tokenizer
from tokenizers_study.stats import scheme_stats
from tokenizers_study.text import text_bytes

PACKAGE = REPO / "examples" / "plugin"
PAGE = REPO / "docs" / "extending.md"


@pytest.fixture
def nibble():
    """The example's nibble.py imported (which registers the scheme), and unregistered again after the test."""
    spec = importlib.util.spec_from_file_location("nibble", PACKAGE / "bench_toy_plugin" / "nibble.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield FAMILIES["nibble"]
    del FAMILIES["nibble"]


def test_the_page_shows_the_example_files_themselves():
    page = PAGE.read_text()
    for example in ("pyproject.toml", "bench_toy_plugin/nibble.py", "bench_toy_plugin/conv.py",
                    "bench_toy_plugin/lines.py"):
        assert f'--8<-- "examples/plugin/{example}"' in page, example


def test_the_example_metric_declares_bits_per_line():
    from bench.metrics import METRICS, normalize_counts

    block = (PACKAGE / "bench_toy_plugin" / "lines.py").read_text()
    try:
        exec(block, {})
        metric = METRICS["bits_per_line"]
        counts = normalize_counts(math.log(2) * 30, n_tokens=40, n_bytes=50, n_chars=50, n_words=10, n_lines=3)
    finally:
        METRICS.pop("bits_per_line", None)
    assert counts["bits_per_line"] == pytest.approx(10.0) and (metric.name, metric.count) == ("line", "lines")


def test_the_example_scheme_gives_every_text_back_and_places_each_token(nibble, adversarial_text):
    scheme = tokenizer_from_bytes(train_tokenizer("nibble", "").to_bytes())  # saved and read back, as a run does
    ids = scheme.encode(adversarial_text)
    assert len(ids) == 2 * len(text_bytes(adversarial_text)) and ((0 <= ids) & (ids < scheme.bos_id)).all()
    assert scheme.decode(ids) == adversarial_text
    assert scheme.byte_lengths(ids).sum() == len(text_bytes(adversarial_text))
    assert scheme.char_lengths(ids).sum() == len(adversarial_text)
    stats, _ = scheme_stats(scheme, adversarial_text, "test")  # bench tokenize stats: it has no one-token bytes
    assert stats.lossless and len(scheme.fallback_ids()) == 0
