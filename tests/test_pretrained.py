"""Tokenizers trained elsewhere as schemes (hf:PATH, spm:PATH): loaded not retrained, identified by their file,
their losslessness measured, their special tokens never swallowing text; in stats, training and a matrix."""

import hashlib
import json
import shutil

import numpy as np
import pytest

from tokenizers_study import TokenizerError, parse_scheme, train_tokenizer


def gpt2_like(folder, text):
    """A byte-level BPE with GPT-2's pre-tokenizer, decoder and special token, saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(text.splitlines(), trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def lowercasing(folder, text):
    """A WordPiece-style tokenizer that normalises (NFKC, lower case) and splits on whitespace: lossy."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(text.splitlines(), trainers.WordPieceTrainer(vocab_size=300,
                                                                                special_tokens=["[UNK]"]))
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def spm_model(path, text, vocab_size=300, **options):
    import sentencepiece as spm

    with open(path, "wb") as out:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(text.splitlines()), model_writer=out,
                                       vocab_size=vocab_size, model_type="unigram", hard_vocab_limit=False, **options)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, corpus_text):
    root = tmp_path_factory.mktemp("pretrained")
    return {"gpt2": gpt2_like(root / "gpt2", corpus_text), "lower": lowercasing(root / "lower", corpus_text),
            "spm-nfkc": spm_model(root / "nfkc.model", corpus_text, normalization_rule_name="nmt_nfkc"),
            "spm-bytes": spm_model(root / "bytes.model", corpus_text, normalization_rule_name="identity",
                                   byte_fallback=True, add_dummy_prefix=False, remove_extra_whitespaces=False)}


def test_a_pretrained_tokenizer_is_its_file(files, tmp_path):
    tok = train_tokenizer(f"hf:{files['gpt2']}", "ignored: nothing is trained")
    file = files["gpt2"] / "tokenizer.json"
    assert tok.hash == hashlib.sha256(file.read_bytes()).hexdigest()
    shutil.copy(file, tmp_path / "elsewhere.json")
    assert train_tokenizer(f"hf:{tmp_path / 'elsewhere.json'}", "").hash == tok.hash  # whatever path names it
    assert parse_scheme(f"spm:{files['spm-nfkc']}").path == str(files["spm-nfkc"])
    with pytest.raises(TokenizerError, match="no tokenizer file"):
        train_tokenizer(f"hf:{tmp_path / 'missing'}", "")
    with pytest.raises(TokenizerError, match="needs the path"):
        parse_scheme("hf")


@pytest.mark.parametrize("name", ["gpt2", "spm-bytes"])
def test_byte_level_pretrained_tokenizers_are_lossless(files, name, adversarial_texts):
    family = "hf" if name == "gpt2" else "spm"
    tok = train_tokenizer(f"{family}:{files[name]}", "")
    for text in adversarial_texts:
        if family == "spm" and "\u2581" in text:  # sentencepiece reads its space mark as a space: measured lossy
            assert not tok.loss_report(text).lossless
            continue
        assert tok.decode(tok.encode(text)) == text, text
    assert 0 <= tok.bos_id < tok.vocab_size


def test_special_tokens_in_the_text_are_text(files):
    tok = train_tokenizer(f"hf:{files['gpt2']}", "")
    text = "a story <|endoftext|> and another"
    ids = tok.encode(text)
    assert tok.bos_id not in ids.tolist() and tok.decode(ids) == text
    assert tok.bos_id == json.loads((files["gpt2"] / "tokenizer.json").read_text())["added_tokens"][0]["id"]


@pytest.mark.parametrize("name", ["lower", "spm-nfkc"])
def test_normalising_tokenizers_are_measured_lossy(files, name):
    family = "hf" if name == "lower" else "spm"
    tok = train_tokenizer(f"{family}:{files[name]}", "")
    text = "The  Zürich ﬁle\n second line\tTAB\n"  # double space, a ligature, a tab, capitals
    report = tok.loss_report(text)
    assert not report.lossless and 0 < report.lost_bytes <= len(text.encode())


def test_pretrained_schemes_in_stats_training_and_a_matrix(files, tmp_path, make_toy_corpus, cli):
    data = make_toy_corpus(tmp_path)
    stats = cli("tokenize", "stats", "--dataset", "toy", "--schemes", f"hf:{files['gpt2']},hf:{files['lower']}",
                "--splits", "test", "--json", "--data-dir", str(data))
    assert stats.returncode == 0, stats.stderr
    records = {r["scheme"].split("/")[-1] if "gpt2" in r["scheme"] else "lower": r for r in json.loads(stats.stdout)}
    assert records["gpt2"]["lossless"] and not records["lower"]["lossless"] and records["lower"]["lost_bytes"] > 0
    shutil.copytree(files["gpt2"], tmp_path / "config" / "tok")
    (tmp_path / "config" / "m.toml").write_text(
        '[matrix]\nname = "pt"\n[axes]\nmodel = ["lstm"]\ntokenizer = ["hf:tok", "byte"]\ndataset = ["toy"]\n'
        '[budget]\nchars = 2_000\n[context]\nchars = 32\n[shared]\nbatch_size = 4\nemsize = 16\nnhid = 16\n'
        'eval_every = 5\neval_max_chars = 500\n')
    done = cli("run-matrix", str(tmp_path / "config" / "m.toml"), "--results", str(tmp_path / "results"),
               "--data-dir", str(data), "--quiet")
    assert done.returncode == 0, done.stderr
    result = json.loads(next((tmp_path / "results").glob("lstm-tiny-hftok-*/result.json")).read_text())
    assert result["tokenizer"]["hash"] == hashlib.sha256((files["gpt2"] / "tokenizer.json").read_bytes()).hexdigest()
    assert result["comparable"] is True and result["metrics"]["test"]["lossless"] is True
    assert np.isfinite(result["metrics"]["test"]["bits_per_byte"])



def test_a_matrix_of_a_tokenizer_relative_to_its_config_is_reported(files, tmp_path, make_toy_corpus, cli):
    """The README's form, hf:PATH relative to the config (the run records it from the config's folder), with a
    space in the path: the report reads the runs back and draws every figure."""
    data = make_toy_corpus(tmp_path)
    shutil.copytree(files["gpt2"], tmp_path / "config" / "my tok ✓")
    (tmp_path / "config" / "m.toml").write_text(
        '[matrix]\nname = "pt"\n[axes]\nmodel = ["lstm"]\ntokenizer = ["hf:my tok ✓", "byte"]\ndataset = ["toy"]\n'
        '[budget]\nchars = 2_000\n[context]\nchars = 32\n[shared]\nbatch_size = 4\nemsize = 16\nnhid = 16\n'
        'eval_every = 5\neval_max_chars = 500\ndump_token_losses = true\n')
    done = cli("run-matrix", "config/m.toml", "--results", str(tmp_path / "results"), "--data-dir", str(data),
               "--quiet", cwd=tmp_path)  # the config named relative to where the command runs
    assert done.returncode == 0, done.stderr
    report = cli("report", str(tmp_path / "results"), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    assert "| lstm hf:my tok ✓ |" in (tmp_path / "report" / "report.md").read_text()  # the teacher-forcing table
    assert (tmp_path / "report" / "3-teacher-forcing.png").is_file()

def test_a_tokenizer_file_saved_with_truncation_and_padding_encodes_the_whole_text(files, tmp_path, corpus_text):
    doc = json.loads((files["gpt2"] / "tokenizer.json").read_text())
    doc["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0}
    doc["padding"] = {"strategy": {"Fixed": 512}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                      "pad_type_id": 0, "pad_token": "<|endoftext|>"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    saved_for_a_model = train_tokenizer(f"hf:{tmp_path}", "")
    plain = train_tokenizer(f"hf:{files['gpt2']}", "")
    text = corpus_text[:3000]
    assert saved_for_a_model.encode(text).tolist() == plain.encode(text).tolist()
    assert saved_for_a_model.encode("a b").tolist() == plain.encode("a b").tolist()  # not padded
    assert saved_for_a_model.loss_report(text).lossless and len(plain.encode(text)) > 512


def test_byte_symbols_of_a_byte_level_bpe_are_not_fallback(files, corpus_text):
    from tokenizers_study.stats import scheme_stats

    stats, _ = scheme_stats(train_tokenizer(f"hf:{files['gpt2']}", ""), corpus_text[:5000], "test")
    assert stats.fallback_rate == 0 and stats.lossless and stats.lost_bytes == 0


@pytest.mark.parametrize("decoded, lost", [
    ("The  Zürich ﬁle\n second line\tTAB\n", 0),
    ("the zurich file\nsecond line tab\n", 12),  # T, Z, ü (2), ﬁ (3), a space; a space, TAB (3)
    ("The Zürich ﬁle\n second line\tTAB\n", 1),
    ("The  Zürich ﬁle\n second line\tTAB", 1),  # the last line break
    ("", 36),
])
def test_lost_bytes_counts_what_decoding_does_not_give_back(decoded, lost):
    from tokenizers_study.base import lost_bytes

    assert lost_bytes("The  Zürich ﬁle\n second line\tTAB\n", decoded) == lost


def test_a_tokenizer_that_drops_line_breaks_is_measured_line_by_line(tmp_path, corpus_text):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece()  # joins the words with single spaces: the line breaks are gone
    tokenizer.train_from_iterator(corpus_text.splitlines(), trainers.WordPieceTrainer(vocab_size=300,
                                                                                      special_tokens=["[UNK]"]))
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    tok = train_tokenizer(f"hf:{tmp_path}", "")
    text = "One two\nthree four\nFive\n"
    report = tok.loss_report(text)
    assert not report.lossless and report.lost_bytes == 3 + 1 + 1  # three line breaks, O and F
    assert report.detail.startswith("decoding drops 3 line breaks")


@pytest.mark.mirror
def test_a_pretrained_scheme_is_not_tainted_by_an_unverified_train_split(files, wt2_data_dir):
    from bench.data.tokenize_stats import run_stats

    result = run_stats("wikitext-2", ["byte", f"hf:{files['gpt2']}"], ("valid",), wt2_data_dir)
    verified = {r.scheme.partition(":")[0]: r.verified for r in result.records}
    assert result.splits["valid"].verified and not result.splits["train"].verified
    assert verified == {"byte": False, "hf": True}  # byte is trained on the unverified train split; hf is loaded


def test_files_that_are_no_tokenizer_are_one_line_errors(tmp_path, files):
    bad = {"garbage.json": b"{garbage", "list.json": b"[1, 2]", "empty.json": b"", "binary.json": b"\xff\xfe\x00",
           "empty.model": b"", "tokenizer.json.model": (files["gpt2"] / "tokenizer.json").read_bytes()}
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content)
        family = "spm" if name.endswith(".model") else "hf"
        with pytest.raises(TokenizerError, match="is not"):
            train_tokenizer(f"{family}:{tmp_path / name}", "")


def test_a_sentencepiece_model_without_a_line_break_piece_gets_one(tmp_path, corpus_text):
    tok = train_tokenizer(f"spm:{spm_model(tmp_path / 'plain.model', corpus_text)}", "")
    assert tok.sp.piece_to_id("\n") == tok.sp.unk_id() and not tok._byte_ids  # neither a piece nor bytes for it
    text = "first line\n\nthird, with a rare ✓ sign\n"
    ids = tok.encode(text)
    assert (ids == tok.vocab_size - 1).sum() == 3 and ids.max() < tok.vocab_size
    assert tok.decode(ids).count("\n") == 3 and not tok.loss_report(text).lossless  # the rare sign is <unk>


def test_characters_are_counted_on_the_tokens_even_when_decoding_adds_text(tmp_path, corpus_text):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece()  # puts spaces between words and removes the line breaks
    tokenizer.train_from_iterator(corpus_text.splitlines(), trainers.WordPieceTrainer(vocab_size=300,
                                                                                      special_tokens=["[UNK]"]))
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    tok = train_tokenizer(f"hf:{tmp_path}", "")
    ids = tok.encode(corpus_text[:2000])
    lengths = tok.char_lengths(ids)
    assert len(lengths) == len(ids) and lengths.sum() == len(tok.pieces_text(ids)) > 0


def test_a_comma_in_a_tokenizer_path_is_part_of_the_path(files, tmp_path, make_toy_corpus, cli):
    data = make_toy_corpus(tmp_path)
    odd = tmp_path / "tokenizers, v2" / "gpt2"
    shutil.copytree(files["gpt2"], odd)
    stats = cli("tokenize", "stats", "--dataset", "toy", "--schemes", f"byte,hf:{odd},spm:{files['spm-bytes']}",
                "--splits", "test", "--json", "--data-dir", str(data))
    assert stats.returncode == 0, stats.stderr
    assert [r["scheme"].partition(":")[0] for r in json.loads(stats.stdout)] == ["byte", "hf", "spm"]


@pytest.mark.parametrize("decoded, lost", [
    ("The  Zürich ﬁle\n second line\tTAB\n", 0),
    ("the  zürich file\n second line\ttab\n", 4),  # lower-cased and NFKC: The, Zürich, ﬁle, TAB
    ("[UNK] [UNK] [UNK]\n [UNK] [UNK] [UNK]\n", 6),  # every word unknown
    ("", 6),
])
def test_lost_words_counts_the_words_decoding_does_not_give_back(decoded, lost):
    from tokenizers_study.base import lost_words

    assert lost_words("The  Zürich ﬁle\n second line\tTAB\n", decoded) == lost


def test_a_tokenizer_of_unknowns_reports_its_lost_words(tmp_path, corpus_text):
    from tokenizers import Tokenizer, models, pre_tokenizers

    unknowns = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))  # every word is [UNK]
    unknowns.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    unknowns.save(str(tmp_path / "tokenizer.json"))
    report = train_tokenizer(f"hf:{tmp_path / 'tokenizer.json'}", "").loss_report("a few words here\n")
    assert not report.lossless and report.lost_words == 4 and report.lost_bytes > 0


def test_lost_bytes_of_a_large_split_with_repeated_blank_lines_are_aligned_as_a_small_one(corpus_text):
    from tokenizers_study.base import ALIGN_LINES, lost_bytes, lost_words

    lines = [line for line in corpus_text.split("\n") if line.strip()][:200]
    text = "\n \n".join(lines * (ALIGN_LINES // len(lines) + 5))  # WikiText: every other line is " "
    assert text.count("\n") > ALIGN_LINES
    first = text.index("\n")
    changed = text[:first - 1] + "X" + text[first:]  # one byte changed, every line break kept
    assert lost_bytes(text, changed) == 1 and lost_words(text, changed) == 1
    cut = text.rsplit("\n", 2)[0]  # the last line and the blank one before it dropped
    last = text.rsplit("\n", 1)[1]
    assert lost_bytes(text, cut) == len(last.encode()) + 2 + 1  # its bytes, the blank line's space, two breaks
