"""The folder an export is written in before it is renamed to ``OUT``, and the leftovers of exports that were
killed before they could remove theirs.

The folder is ``.bench-export-XXXXXXXX`` in ``OUT``'s parent: a short name, so that any name the file system allows
for ``OUT`` is allowed (a name built from ``OUT``'s would outgrow it). While the export writes, it holds an
``flock`` on the folder's marker file, which records its pid and host. The next export in that parent removes a
leftover only when it is provably one: its name has the prefix, its marker has been written (after the lock was
taken) and nobody holds the lock (its writer died: a lock is released when its holder exits, killed or not). A
folder of the user's, or an export still writing, is never touched.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PREFIX = ".bench-export-"
MARKER = ".bench-export-in-progress"


@contextmanager
def scratch_folder(parent: Path) -> Iterator[Path]:
    """A new scratch folder in ``parent``, locked as this export's while the block runs; removed if the block
    fails. The block renames it into place: its marker is removed just before (``without_marker``)."""
    remove_leftovers(parent)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    fd = None
    try:
        fd = os.open(folder / MARKER, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        # written once the lock is held: a marker with content is provably an export's (and says whose)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode())
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        if fd is not None:
            os.close(fd)  # the lock goes with it


def without_marker(folder: Path) -> None:
    """The scratch folder without its marker, ready to become ``OUT`` (the lock stays held on the open file)."""
    (folder / MARKER).unlink()


def in_scratch(path: Path, parent: Path) -> bool:
    """Whether ``path`` is in a scratch folder of ``parent``."""
    path, parent = path.absolute(), parent.absolute()
    return path.is_relative_to(parent) and path != parent and path.relative_to(parent).parts[0].startswith(PREFIX)


def remove_leftovers(parent: Path) -> None:
    """Remove the scratch folders in ``parent`` that exports killed while writing left behind."""
    for folder in parent.glob(PREFIX + "*"):
        if not folder.is_symlink() and folder.is_dir() and _abandoned(folder / MARKER):
            shutil.rmtree(folder, ignore_errors=True)


def _abandoned(marker: Path) -> bool:
    """Whether ``marker`` is an export's, written after it took the lock, and no process holds the lock now."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # no marker (not provably an export's), or not ours to read
        return False
    try:
        if os.fstat(fd).st_size == 0:  # between the writer's open and its lock: alive, or not provably dead
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: its export is still writing
        return False
    finally:
        os.close(fd)
    return True
