import hashlib

import numpy as np
import pytest

from tokenizers_study import TokenizerError, load_tokenizer, parse_scheme, tokenizer_from_bytes, train_tokenizer
from tokenizers_study.bpe import byte_symbols
from tokenizers_study.text import read_text_exact, text_bytes

LOSSLESS = ["byte", "char", "bpe:300", "sp-bpe:300", "sp-unigram:300", "word-open:50"]
ALL = LOSSLESS + ["word:50"]


@pytest.fixture(scope="module")
def trained(corpus_text):
    return {scheme: train_tokenizer(scheme, corpus_text) for scheme in ALL}


@pytest.mark.parametrize("scheme", LOSSLESS)
def test_lossless_round_trip_on_adversarial_strings(trained, scheme, adversarial_text):
    text = adversarial_text
    tok = trained[scheme]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.loss_report(text).lossless


@pytest.mark.parametrize("scheme", LOSSLESS)
def test_round_trip_on_invalid_utf8(trained, scheme):
    # A fixed byte split (enwik8) can cut a multi-byte character: such bytes must survive too.
    raw = "start 東京".encode() [:-1] + b" mid \xff\xfe end" + "€".encode()[:1]
    text = raw.decode("utf-8", "surrogateescape")
    tok = trained[scheme]
    assert text_bytes(tok.decode(tok.encode(text))) == raw


@pytest.mark.parametrize("scheme", ALL)
def test_ids_in_range_and_no_bos_in_encoding(trained, corpus_text, scheme, adversarial_texts):
    tok = trained[scheme]
    ids = tok.encode(corpus_text + "".join(adversarial_texts))
    assert ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < tok.vocab_size
    assert not np.any(ids == tok.bos_id)
    assert 0 <= tok.bos_id < tok.vocab_size


@pytest.mark.parametrize("scheme", ALL)
def test_training_is_deterministic_and_save_load_round_trips(trained, corpus_text, tmp_path, scheme,
                                                             adversarial_texts):
    tok = trained[scheme]
    again = train_tokenizer(scheme, corpus_text)
    assert again.hash == tok.hash
    path = tmp_path / "tok.json"
    path.write_bytes(tok.to_bytes())
    loaded = load_tokenizer(path)
    assert loaded.hash == tok.hash
    sample = corpus_text[:2000] + "".join(adversarial_texts)
    assert np.array_equal(loaded.encode(sample), tok.encode(sample))
    assert loaded.vocab_size == tok.vocab_size


def test_different_training_text_gives_a_different_hash(corpus_text, make_text):
    a = train_tokenizer("bpe:300", corpus_text)
    b = train_tokenizer("bpe:300", make_text(seed=5))
    assert a.hash != b.hash
    assert train_tokenizer("word:50", corpus_text).hash != train_tokenizer("word:51", corpus_text).hash


def test_byte_scheme_is_utf8_bytes(trained):
    tok = trained["byte"]
    assert tok.vocab_size == 257 and tok.bos_id == 256
    assert tok.encode("é€").tolist() == list("é€".encode())


def test_char_scheme_falls_back_to_bytes_for_unseen_characters(trained):
    tok = trained["char"]
    seen = tok.encode("the")
    assert len(seen) == 3 and set(seen.tolist()).isdisjoint(tok.fallback_ids().tolist())
    unseen = tok.encode("☃")  # not in the synthetic corpus: three UTF-8 bytes
    assert len(unseen) == 3 and set(unseen.tolist()) <= set(tok.fallback_ids().tolist())


def test_bpe_byte_symbols_are_the_byte_level_alphabet():
    from tokenizers import pre_tokenizers

    symbols = byte_symbols()
    assert len(set(symbols)) == 256
    assert set(symbols) == set(pre_tokenizers.ByteLevel.alphabet())


def test_bpe_vocabulary_size_and_merges(trained):
    tok = trained["bpe:300"]
    assert tok.vocab_size == 300
    text = "the game season"
    assert len(tok.encode(text)) < len(text.encode())  # merges learned from the corpus


def test_word_schemes_keep_whitespace_exactly(trained):
    tok = trained["word:50"]
    text = " the  game\tseason\r\nthe\n\n first   "  # only in-vocabulary words
    assert tok.decode(tok.encode(text)) == text
    assert tok.loss_report(text).lossless


def test_single_space_between_words_costs_no_token(trained):
    for scheme in ("word:50", "word-open:50"):
        tok = trained[scheme]
        assert len(tok.encode("the game season")) == 3
        assert "  " not in tok.whitespace  # not a frequent run in this corpus: two space tokens
        assert len(tok.encode("the  game")) == 4


def test_closed_vocabulary_is_lossy_and_says_by_how_much(trained):
    tok = trained["word:50"]
    text = "the zyzzyva of qwxj the"
    ids = tok.encode(text)
    assert (ids == tok.unk_id).sum() == 2
    assert tok.decode(ids) == "the <unk> of <unk> the"
    report = tok.loss_report(text)
    assert not report.lossless
    assert report.lost_words == 2
    assert report.lost_bytes == len("zyzzyva") + len("qwxj")


def test_literal_unk_is_the_unknown_token_in_closed_vocabulary(trained):
    closed, open_ = trained["word:50"], trained["word-open:50"]
    assert closed.encode("<unk>").tolist() == [closed.unk_id]
    assert closed.decode(closed.encode("the <unk>")) == "the <unk>"
    assert closed.loss_report("the <unk>").lossless
    assert open_.decode(open_.encode("the <unk> zyzzyva")) == "the <unk> zyzzyva"


def test_open_vocabulary_spells_unknown_words_in_bytes(trained):
    tok = trained["word-open:50"]
    ids = tok.encode("the zyzzyva")
    assert len(ids) == 1 + 1 + len("zyzzyva")  # the, <oov>, bytes
    two = tok.encode("qq zz")  # two unknown words in a row stay two words
    assert tok.decode(two) == "qq zz"


def test_same_top_words_in_both_word_schemes(trained):
    closed, open_ = trained["word:50"], trained["word-open:50"]
    assert set(closed.words) == set(open_.words) - {"<unk>"}


@pytest.mark.parametrize("name,message", [
    ("nope", "unknown tokenization scheme"),
    ("bpe", "needs a vocabulary size"),
    ("bpe:abc", "needs a vocabulary size"),
    ("bpe:100", "at least 257"),
    ("byte:5", "takes no size"),
    ("word:0", "at least 1"),
])
def test_bad_scheme_names_are_explained(name, message):
    with pytest.raises(TokenizerError, match=message):
        parse_scheme(name)


def test_scheme_names_parse():
    assert parse_scheme("bpe:4096").name == "bpe:4096"
    assert parse_scheme(" byte ").name == "byte"
    assert parse_scheme("word-open:33278").size == 33278


@pytest.mark.mirror
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["char", "bpe:1000", "sp-bpe:1000", "sp-unigram:1000", "word-open:5000"])
def test_lossless_on_wikitext(mirror, scheme):
    valid = read_text_exact(mirror / "wikitext-2" / "wiki.valid.tokens")
    raw_test = read_text_exact(mirror / "wikitext-2-raw" / "wiki.test.raw")
    tok = train_tokenizer(scheme, valid[: len(valid) // 2])
    for text in (valid, raw_test):
        assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("scheme", ALL)
def test_byte_lengths_place_every_token_in_the_text(trained, corpus_text, scheme, adversarial_texts):
    tok = trained[scheme]
    text = corpus_text[:3000] + "".join(adversarial_texts) + " zyzzyva  qq\t<unk>"
    ids = tok.encode(text)
    lengths = tok.byte_lengths(ids)
    assert lengths.sum() == len(text_bytes(tok.decode(ids)))
    offsets = np.cumsum(lengths)
    for k in (1, 7, len(ids) // 3, len(ids) // 2, len(ids) - 1):
        assert offsets[k - 1] == len(text_bytes(tok.decode(ids[:k])))


def test_unigram_entropy_and_renyi_efficiency_by_hand():
    from tokenizers_study.stats import renyi_efficiency, unigram_entropy_bits

    ids = np.array([0, 0, 1, 2])  # p = (1/2, 1/4, 1/4) over a vocabulary of 4
    assert unigram_entropy_bits(ids, 4) == pytest.approx(1.5)
    renyi = np.log2(0.5 ** 2.5 + 2 * 0.25 ** 2.5) / (1 - 2.5)
    assert renyi_efficiency(ids, 4) == pytest.approx(renyi / 2)
    assert renyi_efficiency(np.arange(8), 8) == pytest.approx(1.0)  # every token used equally
    assert renyi_efficiency(np.zeros(10, dtype=int), 8) == pytest.approx(0.0)


@pytest.mark.parametrize("scheme", ALL)
def test_char_lengths_count_each_character_once(trained, corpus_text, scheme, adversarial_texts):
    tok = trained[scheme]
    text = corpus_text[:2000] + "".join(adversarial_texts) + "東京 😀 naïve"
    ids = tok.encode(text)
    lengths = tok.char_lengths(ids)
    decoded = tok.decode(ids)
    assert lengths.sum() == len(decoded) and (lengths >= 0).all()
    starts = [len(text_bytes(decoded[:i])) for i in range(len(decoded))]  # where each character begins
    for k in (1, 5, len(ids) // 3, len(ids) - 1):  # the characters the first k tokens begin
        end = tok.byte_lengths(ids[:k]).sum()
        assert lengths[:k].sum() == sum(start < end for start in starts)


@pytest.mark.parametrize("scheme", ALL)
def test_a_character_budget_counts_the_original_text(trained, corpus_text, scheme, adversarial_texts):
    """Equal characters means characters of the source text for every scheme: a closed vocabulary's <unk>
    covers the word it replaced (the demo's word:8192 cell read 313,764 characters for a 300,000 budget)."""
    tok = trained[scheme]
    text = corpus_text[:2000] + " Pneumonoultramicroscopic <unk> zzzzqqqq " + "".join(adversarial_texts)
    ids = tok.encode(text)
    lengths = tok.source_char_lengths(text, ids)
    assert lengths.sum() == len(text) and (lengths >= 0).all()
    if not tok.lossless_scheme:
        unk = np.flatnonzero(np.asarray(ids) == tok.unk_id)
        assert len(unk) >= 2 and lengths[unk].max() >= len("Pneumonoultramicroscopic")


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_words_are_counted_a_chunk_at_a_time_as_str_split_counts_them(corpus_text, adversarial_texts, chunk):
    from tokenizers_study.text import count_words

    for text in [corpus_text[:3000], *adversarial_texts, "a\u2028b\x1cc\x85d  e\u3000f", "  ", "word"]:
        assert count_words(text, chunk) == len(text.split()), repr(text[:40])


def test_line_blocks_end_after_a_line_break_and_join_back_exactly(corpus_text, adversarial_texts):
    from tokenizers_study.text import line_blocks

    for text in [corpus_text[:5000], *adversarial_texts, "", "\n", "no break", "a\n\n\nb\n"]:
        for size in (1, 2, 7, 1 << 20):
            blocks = list(line_blocks(text, size))
            assert "".join(blocks) == text
            assert all(b.endswith("\n") for b in blocks[:-1]) and all(blocks)
            assert all(len(b) <= size or "\n" not in b[size - 1:-1] for b in blocks)  # cut at the first break


@pytest.mark.parametrize("scheme", ALL)
def test_encoding_and_decoding_a_block_at_a_time_change_nothing(trained, corpus_text, adversarial_texts, scheme,
                                                                 monkeypatch):
    import tokenizers_study.base as base
    import tokenizers_study.text as text_module
    import tokenizers_study.words as words

    tok = trained[scheme]
    texts = [corpus_text[:20_000], *adversarial_texts]
    whole = [tok.encode(t) for t in texts]
    decoded = [tok.decode(ids) for ids in whole]
    lengths = [tok.byte_lengths(ids) for ids in whole]
    monkeypatch.setattr(text_module, "LINE_BLOCK", 5)
    monkeypatch.setattr(base, "DECODE_BLOCK", 3)
    monkeypatch.setattr(words, "ID_BLOCK", 3)
    for text, ids, back, length in zip(texts, whole, decoded, lengths):
        assert np.array_equal(tok.encode(text), ids)
        assert tok.decode(ids) == back
        assert np.array_equal(tok.byte_lengths(ids), length)
    if not scheme.startswith("sp-"):  # sentencepiece's lines are its own; the others count and merge a block at a time
        assert train_tokenizer(scheme, corpus_text).hash == tok.hash


@pytest.mark.parametrize("scheme", ["sp-unigram:300", "sp-bpe:300"])
def test_sentencepiece_samples_a_long_train_split_and_says_so_in_its_identity(trained, corpus_text, scheme,
                                                                               monkeypatch):
    import tokenizers_study.sentencepiece_schemes as sp

    assert "sentence_sample" not in trained[scheme].state()  # a split under the limit is used whole
    monkeypatch.setattr(sp, "SAMPLE_CHARS", len(corpus_text) // 3)
    sampled = train_tokenizer(scheme, corpus_text)
    lines = [line for line in corpus_text.split("\n") if line]
    assert sampled.sample["every_kth_line"] == 4 and sampled.sample["of_lines"] == len(lines)
    assert sampled.sample["lines"] == len(lines[::4]) and sampled.sample["chars"] == sum(map(len, lines[::4]))
    assert sampled.hash != trained[scheme].hash
    again = tokenizer_from_bytes(sampled.to_bytes())
    assert again.sample == sampled.sample and again.hash == sampled.hash
    assert sampled.decode(sampled.encode(corpus_text)) == corpus_text


@pytest.mark.parametrize("lost", ["\n", " ", "\t\n", "\n\n"])
def test_a_decoding_that_loses_only_edge_whitespace_is_not_lossless(trained, lost):
    tok = trained["byte"]
    text = "  a text whose edges are whitespace" + lost
    ids = tok.encode(text)
    report = type(tok).loss_report(_Dropping(tok, len(lost)), text, ids)
    assert not report.lossless and report.lost_bytes >= 1


class _Dropping:
    """A tokenizer whose decoding drops the last characters of the text (whitespace here)."""

    def __init__(self, inner, drop: int):
        self.inner, self.drop = inner, drop

    def encode(self, text):
        return self.inner.encode(text)

    def decode(self, ids):
        return self.inner.decode(ids)[:-self.drop]


@pytest.mark.parametrize("scheme", LOSSLESS)
def test_characters_per_token_on_undecodable_bytes_and_on_nothing(trained, scheme):
    raw = "ab 東京".encode()[:-1] + b"\xff x\xfe" + "é".encode()[:1]  # a character cut, stray bytes
    text = raw.decode("utf-8", "surrogateescape")
    tok = trained[scheme]
    ids = tok.encode(text)
    counts = tok.char_lengths(ids)
    assert counts.dtype == np.int32 and counts.sum() == len(text)  # each undecodable byte is one character
    begins = np.cumsum(counts) - counts  # the characters before each token are those of the tokens before it
    pieces = tok.byte_lengths(ids)
    text_offsets = np.cumsum(pieces) - pieces
    from tokenizers_study.text import char_byte_offsets

    char_starts = char_byte_offsets(text)[:-1]
    assert list(begins) == [int(np.searchsorted(char_starts, offset)) for offset in text_offsets]
    empty = tok.char_lengths(np.zeros(0, dtype=np.int32))
    assert empty.shape == (0,) and empty.dtype == np.int32


def test_a_lossy_decoding_reports_the_words_and_bytes_it_loses_and_where(trained):
    tok = trained["byte"]
    text = "a text ending in abc"
    report = type(tok).loss_report(_Dropping(tok, 3), text, tok.encode(text))
    assert (report.lossless, report.lost_words, report.lost_bytes) == (False, 1, 3)
    assert report.detail == "decoding differs from the text at character 17"


def test_a_registry_refuses_a_name_twice_and_names_the_nearest_for_a_missing_one():
    from tokenizers_study.named_registry import Registry

    colours = Registry("colour", TokenizerError, [("red", 1), ("green", 2)])
    with pytest.raises(TokenizerError, match="colour 'red' is registered twice"):
        colours.register("red", 3)
    with pytest.raises(TokenizerError, match=r"^unknown colour 'gren'; did you mean 'green'\? known: red, green$"):
        colours["gren"]
    with pytest.raises(TokenizerError, match=r"^unknown colour 'blue'; known: red, green$"):  # nothing near
        colours["blue"]
    assert colours["green"] == 2 and colours.get("blue") is None and list(colours) == ["red", "green"]


@pytest.mark.parametrize("scheme", ALL)
def test_bos_spells_nothing_and_leaves_the_counts_of_the_other_tokens_alone(trained, scheme):
    # <bos> has no bytes; a sequence with it (as a model reads one) counts every other token as it would without
    # (a zero-length token must not merge the counts of the tokens around it)
    tok = trained[scheme]
    ids = tok.encode("hello world, naïve 東京")
    with_bos = np.concatenate([[tok.bos_id], ids, [tok.bos_id]]).astype(np.int32)
    expected = [0, *tok.char_lengths(ids), 0]
    assert tok.char_lengths(with_bos).tolist() == expected
    assert tok.byte_lengths(with_bos).tolist() == [0, *tok.byte_lengths(ids), 0]
    assert max(expected) >= 2 or scheme in ("byte", "char")  # some token holds several characters


@pytest.mark.parametrize("scheme", ["char", "sp-bpe:300", "sp-unigram:300"])
def test_byte_fallback_tokens_are_one_per_byte_value(trained, corpus_text, scheme):
    tok = trained[scheme]
    fallback = tok.fallback_ids()
    assert len(fallback) == len(set(fallback.tolist())) == 256
    assert tok.byte_lengths(fallback).tolist() == [1] * 256  # each spells one byte
    if scheme == "char":  # text of characters seen in training uses no byte token
        assert not np.isin(tok.encode(corpus_text), fallback).any()


def test_a_loss_report_checks_the_ids_it_is_given(trained):
    # the ids of an encoding already made are checked as given, not encoded again
    tok = trained["byte"]
    text = "a text"
    assert tok.loss_report(text, tok.encode(text)).lossless
    report = tok.loss_report(text, tok.encode(text)[:-1])  # an encoding that lost its last token
    assert (report.lossless, report.lost_words, report.lost_bytes) == (False, 1, 1)


def test_a_tokenizer_names_its_class_scheme_and_vocabulary(trained):
    assert repr(trained["bpe:300"]) == "<BPETokenizer bpe:300 vocab=300>"
    assert repr(trained["word:50"]) == "<WordTokenizer word:50 vocab=78>"


def test_a_tokenizer_file_is_compact_canonical_json():
    # the file's sha256 is the tokenizer's identity (in every run id): no spaces, sorted keys, ASCII
    tok = train_tokenizer("char", "ab ba é")
    assert tok.to_bytes() == b'{"format_version":1,"scheme":"char","state":{"code_points":[32,97,98,233]}}'
    assert tok.hash == hashlib.sha256(tok.to_bytes()).hexdigest()


@pytest.mark.parametrize("scheme", ["bpe:300", "sp-bpe:300", "sp-unigram:300"])
def test_text_around_escaped_characters_encodes_to_int32_ids(trained, scheme):
    # undecodable bytes (and what the library cannot take) are spelled in byte tokens between encoded pieces
    tok = trained[scheme]
    text = b"the \xff city \xfe river".decode("utf-8", "surrogateescape")
    ids = tok.encode(text)
    assert ids.dtype == np.int32 and tok.decode(ids) == text


@pytest.mark.parametrize("name", ["bpe:²", "word:١٢", "bpe:4096²"])
def test_a_size_in_digits_other_than_ascii_is_refused_in_one_line(name):
    """str.isdigit() accepts '²' (int() then fails: a traceback) and Arabic-Indic digits (int() reads them)."""
    with pytest.raises(TokenizerError, match="needs a vocabulary size"):
        parse_scheme(name)
