"""A tokenization scheme is declared once, as its class: registered, it is named in the scheme help, sorted where
its class says, drawn in the vocabulary sweep if it sweeps sizes, and put in the closed-vocabulary table and figure
if its vocabulary is closed, in the comparisons if it is lossless; no list of scheme names elsewhere to extend. A class
that leaves out a method every scheme has (an abstract one, or the byte table) is refused as it is registered."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.study.report import figures
from bench.study.matrix.execute import Execution, run_matrix
from bench.study.report.report import build_report
from bench.study.report.figure_style import plt, tokenizer_order
from bench.study.report.report_tables import closed_vocabulary_rows, paired_rows
from tokenizers_study import FAMILIES, TokenizerError, parse_scheme, train_tokenizer
from tokenizers_study.words import OpenWordTokenizer, WordTokenizer

SIZES = (8, 16, 32)
SHIPPED = ["byte", "bpe:512", "word-open:64"]
MATRIX = """
[matrix]
name = "toy-scheme"
match = "chars"

[corpora.toy]
train = "train.txt"
valid = "valid.txt"
test = "test.txt"

[axes]
model = ["lstm"]
tokenizer = TOKENIZERS
dataset = ["toy"]
seed = [0]

[budget]
chars = 1_000

[context]
chars = 32

[shared]
preset = "tiny"
stop_if_not_learning = false  # toy runs too short to leave their unigram floor: machinery, not learning
batch_size = 4
eval_every = 10
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32

[models.lstm]
emsize = 16
nhid = 8
"""


@pytest.fixture(params=["lossless", "closed"])
def toy(request):
    lossless = request.param == "lossless"

    class ToyScheme(OpenWordTokenizer if lossless else WordTokenizer):  # the words' code, under a name of its own
        family = f"toy-{request.param}"
        lossless_scheme = lossless
        sort_rank = -1  # before every shipped scheme
        swept = lossless

    FAMILIES.register(ToyScheme.family, ToyScheme)
    yield ToyScheme
    del FAMILIES[ToyScheme.family]
    plt.close("all")


class _NoTextLosses:
    def text_losses(self):
        return None


def _done(toy, make_text) -> pd.DataFrame:
    """One finished run per tokenization, lossless as each tokenizer measures it on the test text."""
    train, test = make_text(n_lines=150, seed=0), make_text(n_lines=25, seed=1)
    toys = [f"{toy.family}:{n}" for n in SIZES]
    lossless = {name: train_tokenizer(name, train).loss_report(test).lossless for name in toys}
    rows = []
    for t, tokenizer in enumerate(SHIPPED + toys):
        bpb = 2.0 + 0.1 * t
        rows.append(dict(model="lstm", tokenizer=tokenizer, dataset="toy", match="chars", seed=0, phase="", flags="",
                         run_dir=f"lstm-{tokenizer}-s0", lossless_bool=lossless.get(tokenizer, True),
                         test_bits_per_byte=bpb, test_bits_per_char=bpb, test_token_perplexity=3.0 + t,
                         test_word_perplexity=500.0 + 50 * t, test_n_chars=1000, test_n_bytes=1000, test_n_words=200))
    return pd.DataFrame(rows)


def test_a_registered_scheme_is_named_where_schemes_are_listed(toy):
    assert parse_scheme(f"{toy.family}:{SIZES[0]}").family == toy.family
    with pytest.raises(TokenizerError, match=f"{toy.family}:N"):
        parse_scheme("no-such-scheme")


def test_the_report_puts_a_registered_scheme_where_its_traits_say(toy, make_text):
    done = _done(toy, make_text)
    toys = [f"{toy.family}:{n}" for n in SIZES]
    lossless = toy.family == "toy-lossless"
    assert done.loc[done["tokenizer"].isin(toys), "lossless_bool"].all() == lossless  # measured, as a run does
    assert sorted(done["tokenizer"], key=tokenizer_order) == toys + SHIPPED  # its sort rank, then its size

    closed = {row["closed"] for row in closed_vocabulary_rows(done, {})}
    assert closed == (set() if lossless else set(toys))
    if lossless:
        with pytest.raises(figures.NoData):
            figures.closed_vocabulary_figure(done, {})
    else:
        fig = figures.closed_vocabulary_figure(done, {})
        assert sum(bar.get_hatch() == "//" for bar in fig.axes[0].patches) == len(toys)  # hatched: closed

    pairs = {(row["A"], row["B"]) for row in paired_rows(done, ["model", "tokenizer", "dataset", "match", "seed"],
                                                         {d: _NoTextLosses() for d in done["run_dir"]})}
    assert ((toys[0], "byte") in pairs) is lossless  # a lossless scheme is compared, a closed one never

    if lossless:  # its sizes are a line of the sweep
        fig = figures.vocab_sweep_figure(done)
        labels = {text.get_text() for text in fig.axes[0].get_legend().get_texts()}
        assert f"lstm {toy.family}" in labels and "lstm bpe" in labels
    else:  # not swept: bytes (as BPE 256) and bpe:512 are too few sizes for a trend
        with pytest.raises(figures.NoData):
            figures.vocab_sweep_figure(done)


@pytest.mark.slow
def test_a_matrix_trains_a_registered_scheme_and_its_report_places_it(toy, tmp_path, make_text):
    for i, split in enumerate(("train", "valid", "test")):
        (tmp_path / f"{split}.txt").write_text(make_text(n_lines=150 if split == "train" else 25, seed=i))
    toys = [f"{toy.family}:{n}" for n in SIZES]
    (tmp_path / "toy.toml").write_text(MATRIX.replace("TOKENIZERS", json.dumps(["byte", *toys])))
    outcome = run_matrix(tmp_path / "toy.toml", tmp_path / "results", data_dir=tmp_path / "data",
                         execution=Execution(show_progress=False))
    assert outcome.counts == {"done": 1 + len(toys)}
    md = build_report(tmp_path / "results", tmp_path / "report").read_text()
    assert f"tokenizations: {', '.join(toys)}, byte;" in md  # its sort rank
    sweep = md.partition("## 2. Vocabulary sweep")[2].partition("## 3.")[0]
    closed = md.partition("## 4. Closed vocabulary")[2].partition("## 5.")[0]
    compared = md.partition("## Comparisons between tokenizations")[2].partition("## ")[0]
    if toy.family == "toy-lossless":
        assert "Figure 2 is left out" not in sweep and "2-vocabulary-sweep.svg" in sweep  # its sizes and bytes
        assert "Figure 4 is left out: the matrix has no closed-vocabulary run" in closed
        assert f"| {toys[0]} | byte |" in compared  # A and B: compared, first by its sort rank
    else:
        assert "Figure 2 is left out" in sweep
        assert "4-closed-vocabulary.svg" in closed and "closed-vocabulary models (word:N or toy-closed:N)" in closed
        assert all(f"| lstm | {name} |" in closed for name in toys)
        assert toys[0] not in compared


# ---- the methods every scheme has: refused at registration, not when a run first needs them ----------------------

def _scheme_of_bytes(family: str, left_out: str = "", **given) -> type:
    """A scheme class with the byte scheme's traits and abstract methods (less ``left_out``) and no byte table of
    its own, plus ``given``: what a new scheme's author writes before reading base.Tokenizer's docstring."""
    from tokenizers_study.base import TRAITS, Tokenizer
    from tokenizers_study.byte_level import ByteTokenizer

    names = [*TRAITS, *Tokenizer.__abstractmethods__]
    body = {name: ByteTokenizer.__dict__[name] for name in names if name != left_out}
    return type("Halves", (Tokenizer,), {**body, "family": family, **given})


@pytest.fixture
def halves():
    """The family name of this section's classes, unregistered again after each test (refused or not)."""
    yield "halves"
    FAMILIES.pop("halves", None)


def test_a_scheme_class_that_says_nowhere_how_many_bytes_each_id_decodes_to_is_refused_in_one_line(halves):
    with pytest.raises(TokenizerError) as refused:
        FAMILIES.register("halves", _scheme_of_bytes("halves"))
    message = str(refused.value)
    assert message.startswith("tokenization scheme 'halves': Halves says nowhere how many bytes each id decodes to")
    assert "_id_bytes" in message and "_id_byte_lengths" in message and "\n" not in message
    assert "halves" not in FAMILIES


@pytest.mark.parametrize("given", [
    {"_id_bytes": [bytes([b]) for b in range(256)] + [b""]},
    {"_id_byte_lengths": lambda self: np.array([1] * 256 + [0], dtype=np.int32)},
    {"byte_lengths": lambda self, ids: (np.asarray(ids) < 256).astype(np.int32)},
], ids=["_id_bytes", "_id_byte_lengths", "byte_lengths"])
def test_any_one_of_the_three_byte_tables_is_enough(given, halves, make_text):
    FAMILIES.register("halves", _scheme_of_bytes("halves", **given))
    scheme = train_tokenizer("halves", make_text(n_lines=5))
    assert scheme.byte_lengths(scheme.encode("héllo")).sum() == len("héllo".encode())


def test_a_scheme_class_that_leaves_out_an_abstract_method_is_refused_in_one_line(halves):
    with pytest.raises(TokenizerError, match=r"^tokenization scheme 'halves': Halves does not implement decode; every "
                                             r"scheme implements each of _encode, _train, [^\n]*$"):
        FAMILIES.register("halves", _scheme_of_bytes("halves", left_out="decode",
                                                     _id_byte_lengths=lambda self: np.ones(257, dtype=np.int32)))
    assert "halves" not in FAMILIES
