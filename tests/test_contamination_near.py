"""Near-duplicates between a corpus's splits (bench.data.contamination by bench.data.shingles): test text moved into
train lowercased, re-punctuated, with its lines cut or joined or a word of each line changed, a test made only of
short lines that train holds, and a paste of a few paragraphs (7,000 bytes, about 0.56% of a WikiText-2-sized test)
are refused in one line naming the split, the share, the first shared passage and the fix; headings that every
split shares are not. CATALOGUE holds the cases in the form of tests/test_bad_inputs.py's CASES."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from bench.data import shingles
from bench.data.contamination import ACCEPTED, MAX_SHARE, overlaps
from bench.data.user import add_user_corpus
from bench.errors import BenchError
from experiments.contamination_table import PASTE, TRANSFORMS, WT2, paste, short_lines_of
from tests.test_bad_inputs import call, expand
from tests.verdict_catalogues import WORKS, check_case

SAID = "of the test file's bytes are in passages or lines the train file also holds"
ADD = ["data", "add", "near", "--valid", "{near-valid}", "--test", "{near-test}", "--data-dir", "{data}", "--train"]
HOSTILE_TRAINS = {"near-paste": "7,000 bytes of test appended to train",
                  **{f"near-{name.replace(' ', '-')}": f"test, {name}, appended to train" for name in TRANSFORMS}}
CATALOGUE = [(f"near-duplicate: {case}", ADD + [f"{{{place}}}"], SAID) for place, case in HOSTILE_TRAINS.items()] + [
    ("near-duplicate: a test made only of short lines that train holds",
     ["data", "add", "near", "--train", "{near-train}", "--valid", "{near-valid}", "--test", "{near-short}",
      "--data-dir", "{data}"], SAID),
    ("near-duplicate: splits that share only their headings",
     ["data", "add", "near-natural", "--train", "{near-train}", "--valid", "{near-valid}", "--test", "{near-test}",
      "--data-dir", "{data}"], WORKS + "near-natural test:"),
]
WORDS = ("the of and to in a is was for on as by with from that at his her it an were are which this game season "
         "album song film river city war army ship team first second new one two three café Zürich 東京").split()
NAMES = ("Robert", "Oxford", "Thames", "Valkyria", "Cambridge", "Nelson")
HEADINGS = ("Career", "History", "Reception", "Legacy", "Early life", "Personal life", "Track listing")


def articles(size: int, seed: int) -> bytes:
    """About ``size`` bytes in WikiText's layout: titles, the headings every split shares, paragraph lines of 40 to
    160 random words (no ten of them in a row recur by chance), each with capitals and a full stop."""
    rng, out, written = random.Random(seed), [], 0
    while written < size:
        lines = [f" = Article {seed}-{len(out)} = \n"]
        for heading in rng.sample(HEADINGS, 3):
            lines.append(f" \n = = {heading} = = \n \n")
            for _ in range(rng.randint(1, 4)):
                words = rng.choices(WORDS, k=rng.randint(40, 160))
                words[rng.randrange(len(words))] = rng.choice(NAMES)
                words[0] = words[0].capitalize()
                lines.append(f" {' '.join(words)} , {rng.choice(NAMES)} . \n")
        out.append("".join(lines))
        written += len(out[-1].encode())
    return "".join(out).encode()


def places(box: Path, sandbox_places: dict) -> dict:
    """A test the size of WikiText-2's (train and valid smaller: the shares measured are test's), and the hostile
    trains and test of CATALOGUE and of the tests below."""
    train, valid, test = articles(300_000, 0), articles(200_000, 1), articles(1_250_000, 2)
    texts = {"near-train": train, "near-valid": valid, "near-test": test, "near-short": short_lines_of(train),
             "near-paste": train + paste(test, PASTE)}
    for name, change in TRANSFORMS.items():
        texts[f"near-{name.replace(' ', '-')}"] = train + change(test)
        texts[f"near-paste-{name.replace(' ', '-')}"] = train + change(paste(test, PASTE))
    for name, text in texts.items():
        (box / f"{name}.txt").write_bytes(text)
    return {name: box / f"{name}.txt" for name in texts}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, make_toy_corpus) -> dict:
    """The places of tests/test_bad_inputs.py's sandbox these cases use ({sandbox}, {data}), and this file's."""
    root = tmp_path_factory.mktemp("near")
    make_toy_corpus(root)
    found = {"sandbox": root, "data": root / "data"}
    return {key: str(value) for key, value in {**found, **places(root, found)}.items()}


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CATALOGUE],
                         ids=[name for name, _, _ in CATALOGUE])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(sandbox, args, fragment):
    check_case(Path(sandbox["sandbox"]), [expand(a, sandbox) for a in args], fragment, call)


def _splits(sandbox: dict, train: str = "near-train", test: str = "near-test") -> dict[str, bytes]:
    return {"train": Path(sandbox[train]).read_bytes(), "valid": Path(sandbox["near-valid"]).read_bytes(),
            "test": Path(sandbox[test]).read_bytes()}


def test_a_paste_of_a_few_paragraphs_counts_whole_and_the_natural_splits_share_nothing(sandbox):
    natural = overlaps(_splits(sandbox))
    assert max(o.share for o in natural) < MAX_SHARE / 20
    pasted = {(o.split, o.other): o for o in overlaps(_splits(sandbox, "near-paste"))}
    test = pasted["test", "train"]
    assert 0.95 < test.passage_bytes / len(paste(Path(sandbox["near-test"]).read_bytes(), PASTE)) <= 1
    assert test.too_much and not any(o.too_much for pair, o in pasted.items() if pair != ("test", "train"))


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_a_paste_transformed_keeps_nearly_all_its_bytes_found(sandbox, name):
    """Lowercased, re-punctuated, lines cut or joined: every word is found; a word changed in each line: all but
    those words (a passage runs on over one changed word)."""
    whole = overlaps(_splits(sandbox, "near-paste"))[1].passage_bytes
    changed = overlaps(_splits(sandbox, f"near-paste-{name.replace(' ', '-')}"))[1]
    assert changed.split == "test" and changed.passage_bytes > 0.97 * whole and changed.too_much


@pytest.mark.mirror
@pytest.mark.parametrize("name", ["as written", "one word per line changed"])
def test_a_few_paragraphs_of_wikitext2_test_in_its_train_are_refused(mirror, name):
    splits = {split: (mirror / "wikitext-2" / file).read_bytes() for split, file in WT2.items()}
    pasted = paste(splits["test"], PASTE)
    found = overlaps({**splits, "train": splits["train"] + TRANSFORMS.get(name, bytes)(pasted)})[1]
    assert found.split == "test" and found.too_much and found.passage_bytes > 0.97 * len(pasted)


def test_a_split_made_of_short_lines_is_judged_by_them_and_repeated_headings_are_not(sandbox):
    short = {(o.split, o.other): o for o in overlaps(_splits(sandbox, test="near-short"))}["test", "train"]
    assert short.passage_bytes == 0 and short.all_short_line_bytes == short.split_bytes  # its titles are in train
    assert short.share > 80 * MAX_SHARE
    rng = random.Random(0)
    splits = {split: b"".join(line + b"".join(b" = = %s = = \n" % h.encode() for h in rng.sample(HEADINGS, 3))
                              for line in data.splitlines(keepends=True))
              for split, data in _splits(sandbox).items()}  # headings a sixth of the bytes, in every split
    assert max(o.share for o in overlaps(splits)) < MAX_SHARE / 20


def test_the_refusal_names_the_split_the_share_the_first_passage_and_the_fix(sandbox, tmp_path):
    """Two pastes, the later part of test first in train: the example is the passage test holds first."""
    test = Path(sandbox["near-test"]).read_bytes()
    early, late = paste(test, PASTE, 0.3).decode(), paste(test, PASTE, 0.7)
    (tmp_path / "train.txt").write_bytes(Path(sandbox["near-train"]).read_bytes() + late + early.lower().encode())
    paths = {"train": tmp_path / "train.txt", "valid": sandbox["near-valid"], "test": sandbox["near-test"]}
    with pytest.raises(BenchError) as refused:
        add_user_corpus("near", paths, tmp_path / "data")
    message = str(refused.value)
    first = " ".join(early[re.search(r"\w", early).start():].split())[:57]  # from its first word, shortened
    assert message.startswith("corpus 'near': 1.1") and SAID in message and f"(such as '{first}...')" in message
    assert message.endswith(f"more than {MAX_SHARE * 100:g}%; a model would be scored on text it was trained on: "
                            "give a test file held out from train, or study text a model has read with bench data "
                            "add ... --allow-overlap")
    assert not (tmp_path / "data").exists()


def test_allow_overlap_accepts_a_near_duplicate_and_records_it(sandbox, tmp_path):
    paths = {"train": sandbox["near-one-word-per-line-changed"], "valid": sandbox["near-valid"],
             "test": sandbox["near-test"]}
    records = add_user_corpus("near", paths, tmp_path / "data", allow_overlap=True)
    assert SAID in records["test"].source and ACCEPTED in records["test"].source
    assert ACCEPTED not in records["valid"].source
    again = add_user_corpus("near", paths, tmp_path / "data")  # a [corpora] table naming the same files keeps it
    assert again["test"].source == records["test"].source


def test_words_are_folded_the_same_whatever_the_case_punctuation_spacing_and_script():
    def words(text: str) -> list[int]:
        return [int(h) for c in shingles.chunks(text.encode(), 1) for h in c.shingles]

    assert words("Über-Café, NAÏVE\u00a0東京!\nThe end") == words("über café naïve 東京 the\u2014END.")
    assert len(words("one\u2014two\u3000three\u00a0four")) == 4 and len(words("naïve")) == 1


def test_pieces_join_as_one_text(monkeypatch):
    """The text is read in pieces; a shingle or a short line across a cut is the same as in one piece."""
    text = articles(30_000, 5) + b"a b c\n" + articles(3_000, 6) + b"x" * 300 + b" tail \n"

    def read() -> tuple[list[int], list[int], list[int]]:
        parts = list(shingles.chunks(text))
        return ([int(h) for c in parts for h in c.shingles], [int(h) for c in parts for h in c.short_lines],
                [int(s) for c in parts for s in c.short_starts])

    whole = read()
    monkeypatch.setattr(shingles, "CHUNK_BYTES", 997)
    assert read() == whole and len(whole[0]) > 1000 and len(whole[1]) > 10


def test_a_long_word_and_a_text_without_words_are_read():
    assert [len(c.shingles) for c in shingles.chunks(b" , . ; \n" * 10)] == [0]
    long = [int(h) for c in shingles.chunks(("ab" * 400 + " x").encode(), 1) for h in c.shingles]
    assert len(long) == 2 and long[0] != [int(h) for c in shingles.chunks(("ab" * 399 + " x").encode(), 1)
                                          for h in c.shingles][0]
    assert np.unique(long).size == 2
