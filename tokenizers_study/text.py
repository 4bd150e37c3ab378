"""How texts are read, turned back into bytes and counted.

Texts are Python strings read with ``surrogateescape``: bytes that are not
valid UTF-8 (for example a multi-byte character cut by a fixed byte split such
as enwik8's) become lone surrogates U+DC80..U+DCFF, so every lossless scheme
can give a file back byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np


UNDECODABLE = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as read_text_exact holds it


def read_text_exact(path: str | Path) -> str:
    """Read a file as text without any newline translation; ``text_bytes`` gives back its bytes."""
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def text_bytes(text: str) -> bytes:
    """The exact bytes of a text read with :func:`read_text_exact`."""
    return text.encode("utf-8", "surrogateescape")


def decode_bytes(data: bytes | bytearray) -> str:
    """Inverse of ``text_bytes``: invalid UTF-8 comes back as lone surrogates."""
    return bytes(data).decode("utf-8", "surrogateescape")


def text_counts(text: str) -> dict[str, int]:
    """The text-side denominators: bytes, characters, words, lines."""
    return {
        "n_bytes": len(text_bytes(text)),
        "n_chars": len(text),
        "n_words": count_words(text),
        "n_lines": text.count("\n"),
    }


def count_words(text: str, chunk: int = 1 << 20) -> int:
    """``len(text.split())`` without the list of every word (hundreds of MB on a large corpus): the text is split
    a chunk at a time, each chunk ending at a whitespace character so that no word is cut."""
    words, start = 0, 0
    while start < len(text):
        end = min(start + chunk, len(text))
        while end < len(text) and not text[end].isspace():
            end += 1
        words += len(text[start:end].split())
        start = end
    return words


LINE_BLOCK = 1 << 20  # characters


def line_blocks(text: str, size: int | None = None) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters (default :data:`LINE_BLOCK`), each ending after a
    line break (or at the end): a library that encodes lines sees the same lines, without a list of every line of
    a large split at once."""
    size = size or LINE_BLOCK
    start = 0
    while start < len(text):
        end = text.find("\n", start + size - 1) + 1 or len(text)
        yield text[start:end]
        start = end


def char_byte_offsets(text: str) -> np.ndarray:
    """Byte offset of every character of ``text`` in its bytes, and one more entry: the total."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    widths = np.where(codes < 0x80, 1, np.where(codes < 0x800, 2, np.where(codes < 0x10000, 3, 4)))
    widths = np.where((codes >= 0xDC80) & (codes <= 0xDCFF), 1, widths)  # an undecodable byte is one byte
    return np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
