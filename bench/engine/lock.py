"""One process trains a run at a time: an exclusive lock on ``run.lock`` in the run folder.

The lock is an ``flock`` on the file, so it is released whenever its holder exits,
killed or not: a lock left by a dead process is never in the way. The file records
the holder's pid, host and start time for the message another process gets. It stays
in the folder after release (removing it would let two processes lock two different
files of the same name).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
from pathlib import Path

from bench.errors import BenchError
from bench.run_files import LOCK


class RunLocked(BenchError):
    """Another live process holds the run's lock."""


def _holder_text(path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        return f"pid {holder['pid']} on {holder['host']} since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def is_locked(run_dir: Path) -> bool:
    """Whether a live process holds the run's lock now."""
    path = run_dir / LOCK
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken just now
    return False


class RunLock:
    """``with RunLock(run_dir):`` holds the run's lock (creating the folder), or raises :class:`RunLocked`."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLocked(f"{self.path.parent} is being trained by {_holder_text(self.path)}; wait for it to "
                            f"finish (or stop that process)") from None
        since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since}).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None
