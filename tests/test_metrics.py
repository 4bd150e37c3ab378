import math
import random

import pytest

from bench.metrics import LN2, normalize, normalize_counts
from tokenizers_study.text import text_counts

TEXTS = ["plain ascii text\n", "héllo wörld — ünïcödé\n", "中文 日本語 😀\n\nline two", "x"]


@pytest.mark.parametrize("text", TEXTS)
def test_uniform_byte_model_gives_exactly_eight_bits_per_byte(text):
    n_bytes = len(text.encode("utf-8"))
    result = normalize(n_bytes * math.log(256), text, n_tokens=n_bytes)
    assert result["bits_per_byte"] == pytest.approx(8.0, abs=1e-12)
    assert result["token_perplexity"] == pytest.approx(256.0)


@pytest.mark.parametrize("n_tokens", [1, 7, 100, 10_000])
def test_bits_per_byte_does_not_depend_on_token_count(n_tokens):
    text = "the same text under different tokenizations\n"
    base = normalize(123.4, text, n_tokens=10)
    other = normalize(123.4, text, n_tokens=n_tokens)
    for key in ("bits_per_byte", "bits_per_char", "word_perplexity", "word_perplexity_eos"):
        assert other[key] == base[key]
    if n_tokens != 10:
        assert other["token_perplexity"] != base["token_perplexity"]


def test_hand_computed_multibyte_case():
    text = "héllo wörld\n"  # é and ö are 2 bytes each
    counts = text_counts(text)
    assert counts == {"n_bytes": 14, "n_chars": 12, "n_words": 2, "n_lines": 1}
    result = normalize(14 * LN2, text, n_tokens=5)  # 14 bits in total
    assert result["bits_per_byte"] == pytest.approx(1.0)
    assert result["bits_per_char"] == pytest.approx(14 / 12)
    assert result["word_perplexity"] == pytest.approx(2 ** 7)  # 14 bits over 2 words
    assert result["word_perplexity_eos"] == pytest.approx(2 ** (14 / 3))  # 2 words + 1 newline
    assert result["token_perplexity"] == pytest.approx(2 ** (14 / 5))


def test_undecodable_bytes_count_as_one_byte_and_one_char():
    raw = b"ab\xe4\xb8"  # a CJK character cut after two of its three bytes
    text = raw.decode("utf-8", "surrogateescape")
    assert text_counts(text)["n_bytes"] == 4
    assert text_counts(text)["n_chars"] == 4


def test_word_perplexity_relation_and_bits_identity():
    rng = random.Random(1)
    for _ in range(50):
        words = ["".join(rng.choice("abcdéü中 ") for _ in range(rng.randint(1, 8)))
                 for _ in range(rng.randint(1, 30))]
        text = "\n".join(words) + "x"
        total = rng.uniform(0.1, 500.0)
        r = normalize(total, text, n_tokens=rng.randint(1, 100))
        if r["n_words"] == 0:
            continue
        assert r["word_perplexity"] == pytest.approx(2 ** (r["bits_per_char"] * r["n_chars"] / r["n_words"]), rel=1e-9)
        assert r["bits_per_byte"] * r["n_bytes"] == pytest.approx(r["bits_per_char"] * r["n_chars"], rel=1e-12)
        assert r["total_nll_bits"] == pytest.approx(total / LN2)


def test_zero_words_gives_nan_not_an_error():
    r = normalize(3.0, " \n ", n_tokens=3)
    assert math.isnan(r["word_perplexity"])
    assert r["word_perplexity_eos"] == pytest.approx(math.exp(3.0))


@pytest.mark.parametrize("total,n", [(-1.0, 3), (float("nan"), 3), (float("inf"), 3), (1.0, -1)])
def test_bad_input_is_rejected(total, n):
    with pytest.raises(ValueError):
        normalize(total, "text", n_tokens=n)


@pytest.mark.mirror
def test_wikitext2_test_counts_match_the_published_conventions(mirror):
    from tokenizers_study.text import read_text_exact

    text = read_text_exact(mirror / "wikitext-2" / "wiki.test.tokens")
    counts = text_counts(text)
    assert counts == {"n_bytes": 1_256_449, "n_chars": 1_255_018, "n_words": 241_211, "n_lines": 4_358}
    # WikiText-2's published test token count, one <eos> per line.
    assert counts["n_words"] + counts["n_lines"] == 245_569


def test_enwik8s_published_bpc_is_named_as_bits_per_byte_with_the_bytes_per_character(capsys):
    from bench.commands.common import print_metrics
    from bench.metrics import field_convention

    metrics = {"test": normalize_counts(1e6, 5_000_000, n_bytes=5_000_000, n_chars=4_979_247, n_words=700_000,
                                        n_lines=90_000)}
    note = field_convention("enwik8", metrics)
    assert "compare bits_per_byte with it" in note and "test 1.0042" in note
    assert field_convention("wikitext-103", metrics) is None
    print_metrics("enwik8", metrics)
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"NOTE: {note}"
    print_metrics("wikitext-2", metrics)
    assert "NOTE" not in capsys.readouterr().out


def test_tokens_per_byte_is_tokens_over_bytes():
    result = normalize_counts(10.0, 30, n_bytes=120, n_chars=100, n_words=20, n_lines=2)
    assert result["tokens_per_byte"] == 0.25 and result["bits_per_token"] == pytest.approx(10.0 / LN2 / 30)


def test_the_edges_of_what_normalize_accepts():
    assert normalize(0.0, "", n_tokens=0)["total_nll_bits"] == 0.0  # an empty text scored by no token
    assert normalize(0.0, "abc", n_tokens=3)["bits_per_byte"] == 0.0  # a model that is always right
    assert normalize(0.5, "abc", n_tokens=3)["bits_per_byte"] == pytest.approx(0.5 / LN2 / 3)
    with pytest.raises(ValueError, match="finite non-negative total NLL and n_tokens >= 0"):
        normalize(-0.1, "abc", n_tokens=3)


def test_a_perplexity_is_infinite_only_beyond_a_float():
    finite = normalize_counts(709.5, 1, n_bytes=1, n_chars=1, n_words=1, n_lines=0)["word_perplexity"]
    assert finite == pytest.approx(math.exp(709.5)) and math.isfinite(finite)
    assert math.isinf(normalize_counts(710.0, 1, n_bytes=1, n_chars=1, n_words=1, n_lines=0)["word_perplexity"])
    assert math.isnan(normalize_counts(1.0, 0, n_bytes=0, n_chars=0, n_words=0, n_lines=0)["tokens_per_byte"])


def test_the_bytes_per_character_of_each_split_are_listed():
    from bench.metrics import field_convention

    metrics = {"test": {"n_bytes": 5_000_000, "n_chars": 4_979_247}, "valid": {"n_bytes": 100, "n_chars": 100}}
    assert field_convention("enwik8", metrics).endswith("(bytes per character: test 1.0042, valid 1.0000)")
