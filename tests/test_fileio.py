"""Atomic writes: all or nothing, with the permissions an ordinary write would give."""

import os

import pytest

from bench.fileio import atomic_path, write_text_atomic


def test_atomic_write_has_ordinary_permissions(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = tmp_path / "atomic.txt"
    write_text_atomic(atomic, "x")
    assert os.stat(atomic).st_mode == os.stat(plain).st_mode


def test_failed_atomic_write_leaves_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_failed_atomic_write_leaves_no_folder_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    with pytest.raises(OSError):
        with atomic_path(tmp_path / "kept" / "cache" / "baselines" / "entry.json") as tmp:
            tmp.write_text("half")
            raise OSError(28, "No space left on device")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]
