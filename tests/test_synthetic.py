"""A synthetic enwik8 (tests and scale benchmarks only): enwik8's format and size, deterministic, fetched through
the real zip path and cut at the reference offsets, its <page> elements the documents of the bootstrap."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from bench.data import corpora
from bench.data.corpora import Archive, FileCheck, make_enwik8_like
from bench.data.fetch import fetch
from bench.data.store import open_split
from bench.data.synthetic import wikitext_source, write_enwik8_like
from bench.data.documents import document_starts

SIZE = 1_000_000


@pytest.fixture(scope="module")
def source(mirror):
    return wikitext_source([mirror / "wikitext-2" / "wiki.valid.tokens"])


@pytest.fixture(scope="module")
def archive(source, tmp_path_factory):
    return write_enwik8_like(source, SIZE, tmp_path_factory.mktemp("syn"), seed=0)


def test_it_has_enwik8s_format_and_exact_size_and_the_same_bytes_for_the_same_seed(source, archive, tmp_path):
    data = zipfile.ZipFile(archive).read("enwik8")
    assert len(data) == SIZE
    assert data.startswith(b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.3/"')
    for mark in (b"<page>", b"<title>", b"<revision>", b'<text xml:space="preserve">', b"[[", b"{{Infobox",
                 b"'''", b"&quot;", b"\n==", b"</page>"):
        assert mark in data, mark
    text = data.decode("utf-8", "replace")
    assert 0.002 <= sum(ord(ch) > 127 for ch in text) / len(text) <= 0.004  # enwik8: about 0.3%
    assert "&lt;unk&gt;" not in text  # WikiText's <unk> never reaches the XML
    again = zipfile.ZipFile(write_enwik8_like(source, SIZE, tmp_path / "a", seed=0)).read("enwik8")
    other = zipfile.ZipFile(write_enwik8_like(source, SIZE, tmp_path / "b", seed=1)).read("enwik8")
    assert hashlib.sha256(again).digest() == hashlib.sha256(data).digest() != hashlib.sha256(other).digest()


def test_it_is_fetched_through_the_zip_cut_at_the_reference_offsets_and_read_as_pages(archive, tmp_path,
                                                                                       monkeypatch):
    data = zipfile.ZipFile(archive).read("enwik8")
    holdout = 100_000  # enwik8's is 5,000,000 of 100,000,000
    spec = make_enwik8_like("enwik8-synthetic", Archive("enwik8.zip", (), FileCheck(1, sha256="0" * 64)),
                            member="enwik8", member_check=FileCheck(SIZE, sha256="0" * 64), holdout=holdout)
    monkeypatch.setitem(corpora.REGISTRY, spec.name, spec)
    records = fetch(spec.name, data_dir=tmp_path / "data", mirror=archive.parent, allow_unverified=True)
    assert not any(r.verified for r in records.values())  # a stand-in, never the real data
    expected = {"train": data[:-2 * holdout], "valid": data[-2 * holdout:-holdout], "test": data[-holdout:]}
    for split, want in expected.items():
        assert open_split(spec.name, split, tmp_path / "data").path.read_bytes() == want
    starts, kind = document_starts(open_split(spec.name, "test", tmp_path / "data").read_text())
    test = open_split(spec.name, "test", tmp_path / "data").read_text()
    assert kind == "page" and len(starts) == test.count("<page>") >= 3


def test_a_wikitext103_stand_in_has_its_layout_a_growing_vocabulary_and_takes_the_real_fetch_path(source, tmp_path):
    from bench.data.synthetic_wikitext103 import made_up_word, write_wikitext103_like

    archive = write_wikitext103_like(source, SIZE, tmp_path / "m", seed=0)
    assert archive.name == "wikitext-103-v1.zip"
    with zipfile.ZipFile(archive) as opened:
        members = {name: opened.read(name).decode("utf-8") for name in opened.namelist()}
    assert sorted(members) == [f"wikitext-103/wiki.{s}.tokens" for s in ("test", "train", "valid")]
    train = members["wikitext-103/wiki.train.tokens"]
    assert SIZE <= len(train.encode("utf-8")) < SIZE + 100_000  # whole articles, the last one finished
    assert train.startswith(" \n = ") and train.endswith(" \n") and " = = " in train and " @-@ " in train
    words, source_words = set(train.split()), set(source.split())
    made_up = words - source_words
    assert len(made_up) > 3_000 and made_up_word(0) in made_up  # the vocabulary WikiText-2 alone does not have
    assert len({made_up_word(rank) for rank in range(300_000)}) == 300_000  # the pool's words are all different
    again = zipfile.ZipFile(write_wikitext103_like(source, SIZE, tmp_path / "a", seed=0)).read(
        "wikitext-103/wiki.train.tokens")
    assert again == train.encode("utf-8")
    records = fetch("wikitext-103", data_dir=tmp_path / "data", mirror=archive.parent, allow_unverified=True)
    assert not any(r.verified for r in records.values())
    for split in ("train", "valid", "test"):
        assert open_split("wikitext-103", split, tmp_path / "data").read_text() == members[
            f"wikitext-103/wiki.{split}.tokens"]
    test = members["wikitext-103/wiki.test.tokens"]
    starts, kind = document_starts(test)
    assert kind == "article" and len(starts) == test.count("\n = ") - test.count("\n = = ") >= 3


@pytest.mark.parametrize("corpus,size", [("enwik8", 20_000_000), ("wikitext-103", 1_000)])
def test_a_full_disk_while_synthesizing_leaves_no_archive_and_no_folder(mirror, tmp_path, monkeypatch, cli_here,
                                                                        corpus, size):
    import errno
    import os

    real, written = zipfile._ZipWriteFile.write, [0]

    def fills_up(self, data):  # the disk fills 200 kB into the archive
        if written[0] > 200_000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written[0] += len(data)
        return real(self, data)

    monkeypatch.setattr(zipfile._ZipWriteFile, "write", fills_up)
    done = cli_here("data", "synthesize", corpus, "--bytes", str(size), "--out", str(tmp_path / "out" / "here"),
                    "--source", str(mirror / "wikitext-2" / "wiki.valid.tokens"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "disk is full" in lines[0], done.stderr
    assert sorted(tmp_path.iterdir()) == []  # neither a truncated archive nor the folders made for it
