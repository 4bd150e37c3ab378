"""Fetch, verify, split and load corpora, on small archives the tests build themselves."""

import hashlib
import http.server
import json
import os
import random
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from bench.data import corpora
from bench.data.corpora import Archive, FileCheck, SplitSource, make_enwik8_like
from bench.data.fetch import fetch
from bench.data.manifest import known_corpora
from bench.data.store import open_split, verify
from bench.data.user import add_user_corpus
from bench.errors import BenchError


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_zip(path: Path, members: dict[str, bytes]) -> bytes:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path.read_bytes()


def enwik8_like_bytes(n: int, seed: int = 0) -> bytes:
    """XML-ish UTF-8 text with multi-byte characters, exactly n bytes (may end mid-character)."""
    rng = random.Random(seed)
    choices = [c.encode() for c in ["<page>", "text ", "Zürich ", "東京 ", "&amp; ", "\n", "[[link]] "]]
    block = b"".join(rng.choice(choices) for _ in range(2000))
    return (block * (n // len(block) + 1))[:n]


@pytest.fixture
def registry(monkeypatch):
    """Register test corpora for the duration of one test (and no mirror from the environment: the tests say
    where each file comes from)."""
    monkeypatch.delenv("BENCH_DATA_MIRROR", raising=False)

    def add(spec):
        monkeypatch.setitem(corpora.REGISTRY, spec.name, spec)
        return spec

    return add


def small_enwik8(tmp_path: Path, n: int = 1000, holdout: int = 100, urls=("http://127.0.0.1:9/none",)):
    data = enwik8_like_bytes(n)
    mirror = tmp_path / "mirror"
    mirror.mkdir(exist_ok=True)
    archive_bytes = make_zip(mirror / "enwik8.zip", {"enwik8": data})
    spec = make_enwik8_like(
        "enwik8-small",
        Archive("enwik8.zip", tuple(urls), FileCheck(len(archive_bytes), sha256=sha256(archive_bytes))),
        member="enwik8",
        member_check=FileCheck(len(data), sha256=sha256(data)),
        holdout=holdout,
    )
    return spec, data, mirror


def test_enwik8_split_is_the_reference_split(tmp_path, registry):
    spec, data, mirror = small_enwik8(tmp_path, n=1000, holdout=100)
    registry(spec)
    data_dir = tmp_path / "data"
    records = fetch("enwik8-small", data_dir=data_dir, mirror=mirror)
    # The reference preparation: the last 2*holdout bytes are valid then test; the rest is train.
    expected = {"train": data[:-200], "valid": data[-200:-100], "test": data[-100:]}
    for split, want in expected.items():
        assert records[split].verified
        got = (data_dir / "enwik8-small" / f"enwik8-small.{split}").read_bytes()
        assert got == want
        opened = open_split("enwik8-small", split, data_dir)
        assert opened.verified and opened.size == len(want)
    assert sum(len(v) for v in expected.values()) == len(data)


def test_official_enwik8_split_offsets():
    spec = corpora.get_corpus("enwik8")
    size = spec.splits["train"].check.size
    assert size == 100_000_000
    ranges = {s: slice(*spec.splits[s].byte_range).indices(size) for s in corpora.SPLITS}
    assert ranges["train"][:2] == (0, 90_000_000)
    assert ranges["valid"][:2] == (90_000_000, 95_000_000)
    assert ranges["test"][:2] == (95_000_000, 100_000_000)
    assert spec.archive.check.size == 36_445_475


def test_fake_enwik8_archive_is_refused_with_sizes_and_hashes(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    fake = enwik8_like_bytes(10_000_300)
    archive = make_zip(mirror / "enwik8.zip", {"enwik8": fake})
    data_dir = tmp_path / "data"
    with pytest.raises(BenchError) as err:
        fetch("enwik8", data_dir=data_dir, mirror=mirror)
    message = str(err.value)
    assert "enwik8.zip is not the official file" in message
    assert "36,445,475" in message and corpora.ENWIK8_ARCHIVE_CHECK.sha256 in message
    assert f"{len(archive):,}" in message and sha256(archive) in message
    assert "--allow-unverified" in message
    assert not (data_dir / "enwik8").exists()  # nothing half-written

    records = fetch("enwik8", data_dir=data_dir, mirror=mirror, allow_unverified=True)
    assert {s: r.size for s, r in records.items()} == {"train": 300, "valid": 5_000_000, "test": 5_000_000}
    assert not any(r.verified for r in records.values())
    assert open_split("enwik8", "test", data_dir).verified is False
    assert (data_dir / "enwik8" / "enwik8.test").read_bytes() == fake[-5_000_000:]


def test_loose_enwik8_file_in_mirror_is_checked_too(tmp_path, registry):
    spec, data, mirror = small_enwik8(tmp_path)
    registry(spec)
    (mirror / "enwik8.zip").unlink()
    (mirror / "enwik8").write_bytes(data)
    records = fetch("enwik8-small", data_dir=tmp_path / "data", mirror=mirror)
    assert all(r.verified for r in records.values())
    assert "mirror" in records["train"].source


def test_download_from_official_url(tmp_path, registry):
    served = tmp_path / "served"
    served.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        urls = (f"http://127.0.0.1:{port}/missing/enwik8.zip", f"http://127.0.0.1:{port}/enwik8.zip")
        spec, data, mirror = small_enwik8(tmp_path, urls=urls)
        (mirror / "enwik8.zip").rename(served / "enwik8.zip")
        registry(spec)
        data_dir = tmp_path / "data"
        records = fetch("enwik8-small", data_dir=data_dir)  # no mirror: download, first URL 404s
        assert all(r.verified for r in records.values())
        assert urls[1] in records["test"].source
        assert (data_dir / "downloads" / "enwik8.zip").is_file()
    finally:
        server.shutdown()


def test_download_failure_says_to_use_a_mirror(tmp_path, registry):
    spec, _, _ = small_enwik8(tmp_path, urls=("http://127.0.0.1:9/enwik8.zip",))
    registry(spec)
    with pytest.raises(BenchError, match="--mirror"):
        fetch("enwik8-small", data_dir=tmp_path / "data")


def test_member_crc_mismatch_is_caught(tmp_path, registry):
    spec, data, mirror = small_enwik8(tmp_path)
    path = mirror / "enwik8.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("enwik8", data)
    raw = bytearray(path.read_bytes())
    offset = raw.index(data[:50])
    raw[offset + 10] ^= 0xFF  # corrupt the stored member, keep the directory's CRC32
    path.write_bytes(bytes(raw))
    # The registry trusts this archive's sha256, so only the CRC32 check can notice.
    spec = replace(spec, archive=replace(spec.archive, check=FileCheck(len(raw), sha256=sha256(bytes(raw)))))
    spec = replace(spec, splits={s: replace(v, check=FileCheck(len(data))) for s, v in spec.splits.items()})
    registry(spec)
    with pytest.raises(BenchError, match="corrupt"):
        fetch("enwik8-small", data_dir=tmp_path / "data", mirror=mirror)
    assert not (tmp_path / "data" / "enwik8-small").exists()


def wikitext_like(tmp_path: Path, registry, with_checks: bool):
    files = {s: f" = {s} = \n text of the {s} split , with <unk> . \n".encode() for s in corpora.SPLITS}
    archive = make_zip(tmp_path / "wt.zip", {f"wt/wiki.{s}.tokens": d for s, d in files.items()})
    spec = corpora.CorpusSpec(
        name="wt-small",
        description="",
        archive=Archive("wt-small-v1.zip", ("http://127.0.0.1:9/x",), FileCheck(len(archive), sha256=sha256(archive))),
        splits={s: SplitSource(f"wt/wiki.{s}.tokens", FileCheck(len(d), sha256=sha256(d)) if with_checks else None)
                for s, d in files.items()},
    )
    registry(spec)
    return files, archive


def test_loose_files_with_official_checksums(tmp_path, registry):
    files, _ = wikitext_like(tmp_path, registry, with_checks=True)
    mirror = tmp_path / "mirror"
    (mirror / "wt").mkdir(parents=True)
    for s, d in files.items():
        (mirror / "wt" / f"wiki.{s}.tokens").write_bytes(d)
    records = fetch("wt-small", data_dir=tmp_path / "data", mirror=mirror)
    assert all(r.verified and r.verified_by == "size+sha256" for r in records.values())


def test_wrong_loose_file_is_refused_and_nothing_is_written(tmp_path, registry):
    files, _ = wikitext_like(tmp_path, registry, with_checks=True)
    mirror = tmp_path / "mirror"
    (mirror / "wt").mkdir(parents=True)
    for s, d in files.items():
        (mirror / "wt" / f"wiki.{s}.tokens").write_bytes(d if s != "test" else d + b"extra")
    data_dir = tmp_path / "data"
    with pytest.raises(BenchError, match=r"wiki\.test\.tokens is not the official file: expected size"):
        fetch("wt-small", data_dir=data_dir, mirror=mirror)
    assert not (data_dir / "wt-small").exists()


def test_files_without_checksums_are_verified_through_the_archive(tmp_path, registry):
    files, archive = wikitext_like(tmp_path, registry, with_checks=False)
    mirror = tmp_path / "mirror"
    (mirror / "wt").mkdir(parents=True)
    (tmp_path / "wt.zip").rename(mirror / "wt-small-v1.zip")
    for s, d in files.items():  # loose copies too: the archive is preferred, it can be verified
        (mirror / "wt" / f"wiki.{s}.tokens").write_bytes(d)
    records = fetch("wt-small", data_dir=tmp_path / "data", mirror=mirror)
    assert all(r.verified for r in records.values())
    assert records["train"].verified_by == "archive sha256+member crc32"

    (mirror / "wt-small-v1.zip").unlink()  # loose files alone cannot be verified
    with pytest.raises(BenchError, match="no official checksum"):
        fetch("wt-small", data_dir=tmp_path / "data2", mirror=mirror)


def test_explicit_file_and_partial_fetch(tmp_path, registry):
    files, _ = wikitext_like(tmp_path, registry, with_checks=True)
    mine = tmp_path / "my_train.txt"
    mine.write_bytes(files["train"][:20])
    data_dir = tmp_path / "data"
    records = fetch("wt-small", data_dir=data_dir, files={"train": mine}, splits=(), allow_unverified=True)
    assert list(records) == ["train"] and not records["train"].verified
    assert str(mine) in records["train"].source
    with pytest.raises(BenchError, match="has no valid split"):
        open_split("wt-small", "valid", data_dir)


def test_missing_mirror_file_names_what_was_looked_for(tmp_path, registry):
    wikitext_like(tmp_path, registry, with_checks=True)
    mirror = tmp_path / "empty"
    mirror.mkdir()
    with pytest.raises(BenchError, match=r"wiki\.train\.tokens not found in mirror .*--file train=PATH"):
        fetch("wt-small", data_dir=tmp_path / "data", mirror=mirror)


def test_verify_notices_a_changed_file(tmp_path, registry):
    spec, data, mirror = small_enwik8(tmp_path)
    registry(spec)
    data_dir = tmp_path / "data"
    fetch("enwik8-small", data_dir=data_dir, mirror=mirror)
    rows = verify("enwik8-small", data_dir)
    assert all(r.intact for r in rows)

    path = data_dir / "enwik8-small" / "enwik8-small.valid"
    path.write_bytes(path.read_bytes()[:-1] + b"!")
    with pytest.raises(BenchError, match="changed since it was fetched"):
        open_split("enwik8-small", "valid", data_dir)
    rows = {r.split: r for r in verify("enwik8-small", data_dir)}
    assert not rows["valid"].intact and rows["train"].intact
    opened = open_split("enwik8-small", "valid", data_dir)  # now accepted, labelled unverified
    assert not opened.verified
    manifest = json.loads((data_dir / "enwik8-small" / "manifest.json").read_text())
    assert manifest["splits"]["valid"]["verified"] is False


def test_user_corpus_is_recorded_by_sha256(tmp_path):
    paths = {}
    for s in corpora.SPLITS:
        paths[s] = tmp_path / f"{s}.txt"
        paths[s].write_text(f"my own {s} text\n")
    data_dir = tmp_path / "data"
    records = add_user_corpus("mine", paths, data_dir)
    assert records["test"].sha256 == sha256(b"my own test text\n")
    opened = open_split("mine", "test", data_dir)
    assert opened.status == "user" and not opened.verified
    assert "mine" in known_corpora(data_dir)
    with pytest.raises(BenchError, match="registry corpus"):
        add_user_corpus("wikitext-2", paths, data_dir)
    with pytest.raises(BenchError, match="missing: valid"):
        add_user_corpus("other", {"train": paths["train"], "test": paths["test"]}, data_dir)


def test_unknown_corpus_and_unfetched_corpus(tmp_path):
    with pytest.raises(BenchError, match="unknown corpus 'nope'; known: enwik8"):
        fetch("nope", data_dir=tmp_path)
    with pytest.raises(BenchError, match="bench data fetch wikitext-103"):
        open_split("wikitext-103", "train", tmp_path)


@pytest.mark.mirror
def test_wikitext2_from_the_offline_mirror(wt2_data_dir):
    valid = open_split("wikitext-2", "valid", wt2_data_dir)
    test = open_split("wikitext-2", "test", wt2_data_dir)
    train = open_split("wikitext-2", "train", wt2_data_dir)
    assert valid.verified and test.verified
    assert (valid.size, test.size) == (1_121_681, 1_256_449)
    # The mirror's train split is partial, so it must say it is not the official file.
    if train.size != 10_797_148:
        assert not train.verified


@pytest.mark.mirror
def test_wikitext2_raw_partial_fetch_from_mirror(tmp_path, mirror):
    records = fetch("wikitext-2-raw", data_dir=tmp_path, mirror=mirror, splits=("valid", "test"))
    assert all(r.verified for r in records.values())
    with pytest.raises(BenchError, match=r"wiki\.train\.raw not found in mirror"):
        fetch("wikitext-2-raw", data_dir=tmp_path, mirror=mirror, splits=("train",))
    assert os.path.exists(tmp_path / "wikitext-2-raw" / "wiki.test.raw")


def test_a_failed_download_leaves_no_downloads_folder(tmp_path, monkeypatch):
    import bench.data.fetch as fetch_module

    monkeypatch.delenv("BENCH_DATA_MIRROR", raising=False)  # the test is of a download

    def offline(url, target):
        raise OSError("Name or service not known")

    monkeypatch.setattr(fetch_module, "_download", offline)
    data = tmp_path / "data"
    (data / "mine").mkdir(parents=True)  # a data folder that already exists: it is kept, with nothing added
    with pytest.raises(BenchError, match="could not download"):
        fetch("wikitext-2", data)
    assert sorted(p.name for p in data.iterdir()) == ["mine"]


def test_a_corpus_added_again_with_other_files_is_replaced_only_when_asked(tmp_path):
    paths = {}
    for s in corpora.SPLITS:
        paths[s] = tmp_path / f"{s}.txt"
        paths[s].write_text(f"my own {s} text\n")
    data_dir = tmp_path / "data"
    first = add_user_corpus("mine", paths, data_dir)
    assert add_user_corpus("mine", paths, data_dir) == first  # the same files: nothing to do
    paths["test"].write_text("another test text\n")
    with pytest.raises(BenchError, match="already in .* with another test .*--replace"):
        add_user_corpus("mine", paths, data_dir)  # was: silently replaced under the runs trained on it
    assert open_split("mine", "test", data_dir).sha256 == first["test"].sha256
    replaced = add_user_corpus("mine", paths, data_dir, replace=True)
    assert open_split("mine", "test", data_dir).sha256 == replaced["test"].sha256 != first["test"].sha256
