"""A split's measures (text counts, losslessness, the train tokens' characters) are cached beside its ids: a warm
start reads them, and an entry that does not match what it describes is measured again, never trusted."""

from __future__ import annotations

import numpy as np
import pytest

from bench.data import measures as measures_module
from bench.data.cache import encode_corpus
from bench.data.measures import measure_split
from tokenizers_study.text import text_counts


@pytest.fixture()
def data_dir(tmp_path, make_toy_corpus):
    return make_toy_corpus(tmp_path)


def direct(encoded, split):
    text = encoded.splits[split].read_text()
    ids = np.asarray(encoded.ids[split])
    chars = encoded.tokenizer.source_char_lengths(text, ids) if split == "train" else None
    lossless = None if split == "train" else encoded.tokenizer.loss_report(text, ids).lossless
    return text_counts(text), lossless, chars


@pytest.mark.parametrize("scheme", ["byte", "word:40", "bpe:300"])
def test_measures_are_those_of_the_text_and_a_second_start_reads_them(data_dir, scheme, monkeypatch):
    encoded = encode_corpus("toy", scheme, data_dir)
    first = {split: measure_split(encoded, split) for split in ("train", "valid", "test")}
    for split, m in first.items():
        counts, lossless, chars = direct(encoded, split)
        assert m.counts == counts and m.lossless == lossless
        assert (chars is None and m.chars is None) or (m.chars.dtype == np.int32 and np.array_equal(m.chars, chars))

    def never(*args, **kwargs):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(type(encoded.tokenizer), "source_char_lengths", never)
    monkeypatch.setattr(type(encoded.tokenizer), "loss_report", never)
    monkeypatch.setattr(measures_module, "text_counts", never)
    again = {split: measure_split(encode_corpus("toy", scheme, data_dir), split) for split in first}
    for split, m in again.items():
        assert m.counts == first[split].counts and m.lossless == first[split].lossless
        assert (m.chars is None) == (first[split].chars is None)
        assert m.chars is None or np.array_equal(m.chars, first[split].chars)


def test_a_damaged_entry_is_measured_again(data_dir):
    encoded = encode_corpus("toy", "byte", data_dir)
    truth = measure_split(encoded, "train")
    measure_split(encoded, "valid")
    chars_file = next((data_dir / "cache" / "encoded" / "toy").glob("train.*.chars.npy"))
    stored = np.load(chars_file)
    stored[3] += 1  # a changed value under an unchanged header
    np.save(chars_file, stored)
    assert np.array_equal(measure_split(encoded, "train").chars, truth.chars)
    json_file = next((data_dir / "cache" / "encoded" / "toy").glob("valid.*.measures.json"))
    json_file.write_text('{"version": 1, "counts": {"n_bytes": 1}, "lossless": true}')  # cut short
    assert measure_split(encoded, "valid").counts == text_counts(encoded.splits["valid"].read_text())


def test_measures_that_cannot_be_cached_are_still_given(data_dir, monkeypatch, capsys):
    encoded = encode_corpus("toy", "byte", data_dir)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(measures_module, "write_text_atomic", read_only)
    m = measure_split(encoded, "test")
    assert m.counts == text_counts(encoded.splits["test"].read_text()) and m.lossless is True
    assert "could not cache the measures" in capsys.readouterr().err
    assert not list((data_dir / "cache" / "encoded" / "toy").glob("test.*.measures.json"))
