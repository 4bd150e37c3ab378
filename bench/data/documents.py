"""Where the documents of a text begin: the unit over which text-sampling uncertainty is estimated.

Losses of nearby tokens are correlated, and a fixed block can straddle two articles,
so resampling blocks understates the uncertainty; documents are the natural unit:

* WikiText: an article begins at its title line, `` = Title = `` (one ``=`` on each
  side; sections have two or more);
* enwik8 (Wikipedia XML): a document begins at each ``<page>``;
* any other text without such marks: fixed blocks of equal size (``BLOCKS`` of them).

Text before the first mark belongs to the first document.
"""

from __future__ import annotations

import re

import numpy as np

from tokenizers_study.text import text_bytes

WIKITEXT_TITLE = re.compile(rb"^ = [^=\n].* = ?$", re.MULTILINE)
WIKI_PAGE = re.compile(rb"<page>")
BLOCKS = 50
MIN_DOCUMENTS = 2  # marks that make a text a set of documents
MIN_RESAMPLED = 5  # fewer documents than this give no interval: a bootstrap over 2 or 3 says nothing


def document_starts(text: str) -> tuple[np.ndarray, str]:
    """Byte offsets at which the documents of ``text`` begin (the first is 0), and what a document is."""
    data = text_bytes(text)
    for kind, pattern in (("article", WIKITEXT_TITLE), ("page", WIKI_PAGE)):
        starts = [m.start() for m in pattern.finditer(data)]
        if len(starts) >= MIN_DOCUMENTS:
            return np.array([0] + starts[1:], dtype=np.int64), kind
    edges = np.linspace(0, len(data), BLOCKS + 1)[:-1]
    return np.unique(edges.astype(np.int64)), "block"


def document_totals(token_ends: np.ndarray, token_nll_bits: np.ndarray, starts: np.ndarray,
                    n_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each document's bits (a token belongs to the document in which it ends) and bytes."""
    document = np.searchsorted(starts, np.asarray(token_ends) - 1, side="right") - 1
    bits = np.bincount(np.clip(document, 0, len(starts) - 1), weights=token_nll_bits, minlength=len(starts))
    sizes = np.diff(np.append(starts, n_bytes))
    return bits, sizes


def document_pages(text: str) -> list[str]:
    """The documents of ``text`` as strings, in order."""
    data = text_bytes(text)
    starts, _ = document_starts(text)
    bounds = list(starts) + [len(data)]
    return [data[a:b].decode("utf-8", "surrogateescape") for a, b in zip(bounds, bounds[1:])]
