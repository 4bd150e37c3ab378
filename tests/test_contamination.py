"""Contamination between a user corpus's splits (bench.data.contamination): WikiText-2's own overlap passes, text
of a held-out split moved into train (or valid into test) is refused, in one line, before anything is written.
Near-duplicates (text changed on the way) are tests/test_contamination_near.py's."""

import dataclasses
import random
from pathlib import Path

import pytest

from bench.data.contamination import ACCEPTED, MAX_SHARE, measure_files, overlaps
from bench.data.user import add_user_corpus
from bench.errors import BenchError
from tests.conftest import synthetic_text

WT2 = ("wiki.train.first565.tokens", "wiki.valid.tokens", "wiki.test.tokens")
SAID = "of the test file's bytes are in passages or lines the train file also holds"


def _lines(text: bytes) -> list[bytes]:
    return text.splitlines(keepends=True)


def _shuffled_in(train: bytes, test: bytes) -> bytes:
    lines = _lines(train) + _lines(test)
    random.Random(0).shuffle(lines)
    return b"".join(lines)


# name -> (train, valid, test) -> the hostile (train, valid, test), and what the refusal names
HOSTILE = {
    "half of test appended to train": (lambda tr, va, te: (tr + te[:len(te) // 2], va, te),
                                       SAID),
    "every test line shuffled into train": (lambda tr, va, te: (_shuffled_in(tr, te), va, te),
                                            SAID),
    "test re-spaced inside train": (lambda tr, va, te: (tr + b"".join(l.rstrip(b"\n") + b"  \t\n" for l in _lines(te)),
                                                        va, te),
                                    SAID),
    "test made valid + test": (lambda tr, va, te: (tr, va, va + te),
                               SAID.replace("train", "valid")),
}


def synthetic_splits() -> tuple[bytes, bytes, bytes]:
    return tuple(synthetic_text(n_lines=n, seed=i).encode() for i, n in enumerate((600, 120, 120)))


def wikitext2_splits(mirror: Path) -> tuple[bytes, bytes, bytes]:
    return tuple((mirror / "wikitext-2" / name).read_bytes() for name in WT2)


def write_splits(folder: Path, splits: tuple[bytes, bytes, bytes]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {split: folder / f"{split}.txt" for split in ("train", "valid", "test")}
    for path, data in zip(paths.values(), splits):
        path.write_bytes(data)
    return paths


def files_under(root: Path) -> dict:
    return {p: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.mirror
def test_wikitext2_official_splits_pass_with_their_own_overlap(mirror, tmp_path):
    figures = {(o.split, o.other): o.share for o in measure_files(*(mirror / "wikitext-2" / n for n in WT2))}
    assert figures == pytest.approx({("valid", "train"): 0.001021, ("test", "train"): 0.000062,
                                     ("test", "valid"): 0.000017, ("valid", "test"): 0.000018}, abs=5e-6)
    paths = {split: mirror / "wikitext-2" / name for split, name in zip(("train", "valid", "test"), WT2)}
    records = add_user_corpus("wt2", paths, tmp_path / "data")
    assert not any(ACCEPTED in r.source for r in records.values())


def test_short_lines_shared_by_independent_texts_do_not_count():
    """Headings recur between each split's own lines (a fifth of the lines): the split repeats them."""
    rng = random.Random(0)

    def with_headings(text: bytes) -> bytes:
        headings = [b" = = %s = = \n" % w for w in (b"Career", b"History", b"Reception", b"Legacy")]
        return b"".join(line + (rng.choice(headings) if rng.random() < 0.25 else b"") for line in _lines(text))

    splits = zip(("train", "valid", "test"), synthetic_splits())
    found = overlaps({split: with_headings(text) for split, text in splits})
    assert max(o.share for o in found) == 0


@pytest.mark.parametrize("source", ["synthetic", pytest.param("wikitext-2", marks=pytest.mark.mirror)])
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_held_out_split_moved_into_another_is_refused_and_nothing_is_written(case, source, tmp_path, request,
                                                                               make_toy_corpus, cli_here,
                                                                               one_line_error):
    splits = synthetic_splits() if source == "synthetic" else wikitext2_splits(request.getfixturevalue("mirror"))
    build, fragment = HOSTILE[case]
    hostile = build(*splits)
    paths = write_splits(tmp_path / "hostile", hostile)
    share = max(o.share for o in overlaps(dict(zip(paths, hostile))))
    assert share > 5 * MAX_SHARE, share  # far above the rule, as WikiText-2 is far below it
    data = make_toy_corpus(tmp_path)
    before = files_under(data)
    argv = ["data", "add", "leak", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
            str(paths["test"])]
    one_line_error(cli_here(*argv, "--data-dir", str(data)), fragment, f"more than {MAX_SHARE * 100:g}%", "such as '",
                   "--allow-overlap",
                   code=1)
    assert files_under(data) == before
    one_line_error(cli_here(*argv, "--data-dir", str(tmp_path / "new")), fragment, code=1)
    assert not (tmp_path / "new").exists()


def test_a_corpora_table_gets_the_same_rule(tmp_path, cli_here, one_line_error):
    build, fragment = HOSTILE["half of test appended to train"]
    write_splits(tmp_path, build(*synthetic_splits()))
    config = tmp_path / "corpora.toml"
    config.write_text('[corpora.leak]\ntrain = "train.txt"\nvalid = "valid.txt"\ntest = "test.txt"\n'
                      '[matrix]\nname = "leak"\n[axes]\nmodel = ["lstm"]\ntokenizer = ["byte"]\ndataset = ["leak"]\n'
                      'seed = [0]\n[budget]\nchars = 3000\n[context]\nchars = 32\n')
    data = tmp_path / "data"
    one_line_error(cli_here("data", "add", "--config", str(config), "--data-dir", str(data)), fragment, code=1)
    one_line_error(cli_here("run-matrix", str(config), "--data-dir", str(data), "--results", str(tmp_path / "results"),
                            "--dry-run"), "corpus 'leak'", fragment, code=1)
    assert not data.exists()


def test_allow_overlap_accepts_and_labels_and_a_config_naming_the_files_again_keeps_it(tmp_path, cli_here):
    build, _ = HOSTILE["half of test appended to train"]
    paths = write_splits(tmp_path, build(*synthetic_splits()))
    done = cli_here("data", "add", "leak", *(f"--{s}={p}" for s, p in paths.items()), "--allow-overlap",
                    "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert SAID in done.stdout
    records = add_user_corpus("leak", paths, tmp_path / "data")  # as a [corpora] table, which has no flag, does
    assert ACCEPTED in records["test"].source and ACCEPTED not in records["valid"].source
    with pytest.raises(BenchError, match="passages or lines the train file also holds"):
        add_user_corpus("other", paths, tmp_path / "data")  # accepted for that corpus, not for these files anywhere


@pytest.mark.parametrize("files, fragment", [
    (lambda tr, va, te: (te, va, te), "the test file is the same text as the train file"),
    (lambda tr, va, te: (tr + te, va, te), "the test file is contained in the train file (from byte"),
    (lambda tr, va, te: (tr, te, te), "the valid and test files are the same text"),
], ids=["test-is-train", "test-in-train", "valid-is-test"])
def test_whole_file_contamination_keeps_its_own_message(files, fragment, tmp_path):
    paths = write_splits(tmp_path, files(*synthetic_splits()))
    with pytest.raises(BenchError, match=fragment.replace("(", r"\(")):
        add_user_corpus("leak", paths, tmp_path / "data")


def test_a_test_file_inside_train_is_accepted_like_any_overlap_and_named_again_keeps_it(tmp_path):
    """Contained whole in train: refused with the flag that accepts it; accepted, it is labelled (even where it is
    too short to count as a passage) and a [corpora] table naming the same files keeps it."""
    train, valid, _ = synthetic_splits()
    short = b"a b c\nd e\n" * 8  # 40 words in lines it repeats: no passage, no line counted, contained all the same
    paths = write_splits(tmp_path, (train + short, valid, short))
    with pytest.raises(BenchError, match="contained in the train file .* --allow-overlap"):
        add_user_corpus("leak", paths, tmp_path / "data")
    add_user_corpus("leak", paths, tmp_path / "data", allow_overlap=True)
    records = add_user_corpus("leak", paths, tmp_path / "data")  # no flag: these very files were accepted
    assert "the test file is contained in the train file (from byte" in records["test"].source
    assert ACCEPTED in records["test"].source and ACCEPTED not in records["valid"].source


def test_a_corpus_added_before_the_overlap_rule_is_accepted_without_rewriting_its_files(tmp_path):
    """Identical files added again with --allow-overlap were a no-op: the corpus stayed refused for every config."""
    from bench.data.manifest import corpus_dir, read_manifest, write_manifest

    build, fragment = HOSTILE["half of test appended to train"]
    paths = write_splits(tmp_path, build(*synthetic_splits()))
    data = tmp_path / "data"
    add_user_corpus("leak", paths, data, allow_overlap=True)
    before = read_manifest(data, "leak")  # as an older toolkit wrote it: no overlap in its labels
    write_manifest(data, "leak", {s: dataclasses.replace(r, source=r.source.split("; ")[0]) for s, r in before.items()},
                   user=True)
    with pytest.raises(BenchError, match=fragment):
        add_user_corpus("leak", paths, data)
    written = {p: p.stat().st_mtime_ns for p in corpus_dir(data, "leak").glob("*.txt")}
    add_user_corpus("leak", paths, data, allow_overlap=True)
    assert ACCEPTED in read_manifest(data, "leak")["test"].source
    assert add_user_corpus("leak", paths, data)["test"].source == read_manifest(data, "leak")["test"].source
    assert {p: p.stat().st_mtime_ns for p in corpus_dir(data, "leak").glob("*.txt")} == written
