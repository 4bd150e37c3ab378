"""Encoded splits and trained tokenizers are cached by content hash, never reused stale."""

import numpy as np
import pytest

import bench.data.cache as cache
from bench.data.corpora import SPLITS
from bench.data.user import add_user_corpus


@pytest.fixture
def user_corpus(tmp_path, make_text):
    paths = {}
    for i, s in enumerate(SPLITS):
        paths[s] = tmp_path / f"{s}.txt"
        paths[s].write_text(make_text(n_lines=120, seed=i))
    data_dir = tmp_path / "data"
    add_user_corpus("tiny", paths, data_dir)
    return data_dir


def test_second_run_reuses_tokenizer_and_encoded_splits(user_corpus, monkeypatch):
    first = cache.encode_corpus("tiny", "bpe:300", user_corpus)
    assert isinstance(first.ids["valid"], np.memmap)

    def no_training(*args, **kwargs):
        raise AssertionError("trained again although a cached tokenizer exists")

    monkeypatch.setattr(cache, "train_tokenizer", no_training)
    monkeypatch.setattr(type(first.tokenizer), "encode", lambda *a: (_ for _ in ()).throw(AssertionError("re-encoded")))
    second = cache.encode_corpus("tiny", "bpe:300", user_corpus)
    assert second.tokenizer.hash == first.tokenizer.hash
    for s in SPLITS:
        assert np.array_equal(second.ids[s], first.ids[s])


def test_cached_ids_decode_to_the_split(user_corpus):
    enc = cache.encode_corpus("tiny", "word-open:30", user_corpus)
    for s in SPLITS:
        assert enc.tokenizer.decode(np.asarray(enc.ids[s])) == enc.splits[s].read_text()
    assert enc.ids["train"].dtype == np.uint16


def test_changed_train_file_retrains_and_changed_scheme_reencodes(user_corpus, make_text):
    a = cache.encode_corpus("tiny", "bpe:300", user_corpus)
    b = cache.encode_corpus("tiny", "bpe:310", user_corpus)
    assert a.tokenizer.hash != b.tokenizer.hash
    assert len(a.ids["valid"]) != len(b.ids["valid"]) or not np.array_equal(a.ids["valid"], b.ids["valid"])

    changed = user_corpus / "changed-train.txt"  # a user corpus is its files: another train file, added again
    changed.write_text(make_text(n_lines=120, seed=42))
    add_user_corpus("tiny", {"train": changed, "valid": user_corpus / "tiny" / "valid.txt",
                             "test": user_corpus / "tiny" / "test.txt"}, user_corpus, replace=True)
    train = user_corpus / "tiny" / "train.txt"
    c = cache.encode_corpus("tiny", "bpe:300", user_corpus)
    assert c.tokenizer.hash != a.tokenizer.hash
    assert not np.array_equal(c.ids["train"], a.ids["train"])
    assert c.tokenizer.decode(np.asarray(c.ids["train"])) == train.read_text()


def test_changed_scheme_code_retrains_the_tokenizer(user_corpus, monkeypatch, tmp_path):
    """A fix to a scheme's training code must not be hidden by a tokenizer cached before it."""
    import inspect

    from tokenizers_study import FAMILIES

    real_source = inspect.getsourcefile(inspect.getmodule(FAMILIES["word-open"]))
    edited = tmp_path / "words_edited.py"
    edited.write_text(open(real_source).read() + "\n# a change to the scheme\n")
    before = cache._trainer_fingerprint("word-open")
    assert cache._trainer_fingerprint("bpe") != before

    cache.cached_tokenizer("word-open:30", "tiny", user_corpus)
    trained = []
    real_train = cache.train_tokenizer
    monkeypatch.setattr(cache, "train_tokenizer", lambda *a: trained.append(a) or real_train(*a))
    real_getsourcefile = inspect.getsourcefile
    monkeypatch.setattr(inspect, "getsourcefile",
                        lambda obj: str(edited) if obj.__name__.endswith(".words") else real_getsourcefile(obj))
    assert cache._trainer_fingerprint("word-open") != before
    cache.cached_tokenizer("word-open:30", "tiny", user_corpus)
    assert len(trained) == 1


def test_text_conventions_are_part_of_every_fingerprint(monkeypatch, tmp_path):
    """Every scheme encodes through tokenizers_study.text, so a change there retrains them all."""
    import inspect

    from tokenizers_study import FAMILIES

    before = {family: cache._trainer_fingerprint(family) for family in FAMILIES}
    edited = tmp_path / "text_edited.py"
    edited.write_text(open(inspect.getsourcefile(cache.tokenizer_text)).read() + "\n# a change\n")
    real_getsourcefile = inspect.getsourcefile
    monkeypatch.setattr(inspect, "getsourcefile",
                        lambda obj: str(edited) if obj is cache.tokenizer_text else real_getsourcefile(obj))
    assert all(cache._trainer_fingerprint(family) != before[family] for family in FAMILIES)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "ids outside the vocabulary"])
def test_a_damaged_encoded_split_is_encoded_again_not_trusted(user_corpus, damage):
    expected = np.array(cache.encode_corpus("tiny", "word-open:30", user_corpus).ids["valid"])
    path = next((user_corpus / "cache" / "encoded" / "tiny").glob("valid.*.npy"))
    good = path.read_bytes()
    path.unlink()  # a new file: the arrays mapped above keep the old one
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x93NUMPY garbage" * 20)
    else:
        np.save(path, np.full(len(expected), 60000, dtype=np.uint16))
    again = cache.encode_corpus("tiny", "word-open:30", user_corpus)
    assert np.array_equal(again.ids["valid"], expected)
    assert path.read_bytes() == good


def test_a_damaged_cached_tokenizer_is_trained_again(user_corpus):
    first = cache.encode_corpus("tiny", "bpe:300", user_corpus)
    path = next((user_corpus / "cache" / "tokenizers" / "tiny").glob("bpe-300.*.json"))
    path.write_text('{"format_version": 1, "scheme": "bpe:300", "sta')
    assert cache.encode_corpus("tiny", "bpe:300", user_corpus).tokenizer.hash == first.tokenizer.hash
