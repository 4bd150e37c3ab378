"""Files: hashing, atomic writes (a crash never leaves a half-written file) and reading TOML configs."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import tomllib
import zlib
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from bench.errors import BenchError

_CHUNK = 1 << 22


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def crc32_file(path: str | Path) -> str:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return f"{crc & 0xFFFFFFFF:08x}"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def new_folders_for(path: str | Path) -> Iterator[None]:
    """Make the folders above ``path``; if that or the block fails (a full disk), remove those of them left empty,
    so that a failed write leaves no empty folders behind."""
    path = Path(path)
    made = []
    for folder in path.parents:  # innermost first: the ones missing now are the ones this write makes
        if folder.exists():
            break
        made.append(folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield
    except BaseException:
        for folder in made:  # one that holds files now keeps the folders above it too
            if folder.is_dir():
                if any(folder.iterdir()):
                    break
                folder.rmdir()
        raise


@contextmanager
def atomic_path(path: str | Path, make_folders: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds (else neither the
    temporary file nor the folders made for it are left). Without ``make_folders``, a folder that is not there
    is FileNotFoundError, never made (a write into a folder another process may remove)."""
    path = Path(path)
    tmp_path = None
    with new_folders_for(path) if make_folders else nullcontext():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            tmp_path = Path(tmp)
            yield tmp_path
            # mkstemp creates the file private (0600); give it the mode an ordinary open() would.
            os.chmod(tmp_path, 0o666 & ~_umask())
            os.replace(tmp_path, path)
        except OSError as exc:  # name the user's file, not the temporary one beside it
            if exc.filename and Path(exc.filename).name.startswith(f".{path.name}.") and exc.filename != str(path):
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            raise
        finally:
            if tmp_path is not None and tmp_path.exists():
                tmp_path.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def give_plain_modes(folder: Path) -> None:
    """A folder made private (tempfile.mkdtemp) and the files in it, given the modes an ordinary mkdir and open
    would give them."""
    for path in folder.iterdir():
        os.chmod(path, 0o666 & ~_umask())
    os.chmod(folder, 0o777 & ~_umask())


def write_bytes_atomic(path: str | Path, data: bytes, make_folders: bool = True) -> None:
    with atomic_path(path, make_folders) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def update_text(path: str | Path, text: str, make_folders: bool = True) -> None:
    """Write ``text`` atomically unless the file already holds it (so that a finished study can be looked
    at again on a read-only folder)."""
    update_bytes(path, text.encode("utf-8"), make_folders)


def update_bytes(path: str | Path, data: bytes, make_folders: bool = True) -> None:
    """:func:`update_text` of bytes (a copy that keeps a file's own line endings, and so its sha256)."""
    path = Path(path)
    if not (path.is_file() and path.read_bytes() == data):
        write_bytes_atomic(path, data, make_folders)


def write_json_atomic(path: str | Path, obj: object) -> None:
    write_text_atomic(path, json_text(obj) + "\n")


def json_text(obj: object) -> str:
    """Strict JSON, which has no inf or nan (an overflowing perplexity, a ratio over no words): they are written as
    the strings "inf", "-inf" and "nan", which the result schema reads back as floats."""
    return json.dumps(finite_json(obj), indent=2, allow_nan=False)


def finite_json(obj: object) -> object:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else "inf" if obj > 0 else "-inf"
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def read_toml(path: str | Path) -> dict:
    """A TOML file as a dict; a missing or malformed file is a one-line error."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BenchError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise BenchError(f"config file {path} is a folder; give the TOML file") from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"config file {path} is not text ({exc.reason}); give a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"config file {path} is not valid TOML: {exc}") from None


def require_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder to write into: refused (one line) when it exists and is not a folder, when it or a
    folder above it is a link to nothing (no folder can be made there), or when a name in it is longer than file
    systems allow (255 bytes)."""
    path = Path(path)
    if any(len(part.encode()) > 255 for part in path.parts):
        raise BenchError(f"{what} {str(path)[:80]}...: a name in the path is longer than 255 bytes, beyond what file "
                         f"systems allow; choose a shorter path")
    if path.exists() and not path.is_dir():
        raise BenchError(f"{what} {path} is a file, not a folder; give a folder")
    link = next((p for p in (path, *path.parents) if p.is_symlink() and not p.exists()), None)
    if link is not None:
        target = link.parent / os.readlink(link)
        raise BenchError(f"{what} {path}: {link} is a link to {target}, which does not exist; create that folder or "
                         f"give another {what}")
    return path
