"""A synthetic stand-in for WikiText-103 (tests and scale benchmarks only, never presented as the real data: it fails
the official checksum, so everything computed from it says verified: false).

WikiText-103 is about 540 MB of tokenized Wikipedia articles (`` = Title = `` lines, `` = = Section = = ``
headings, words and punctuation split by spaces, ``@-@`` joiners, ``<unk>`` for rare words) with a vocabulary of
267,735 words. :func:`write_wikitext103_like` writes ``wikitext-103-v1.zip`` with the official members
(``wikitext-103/wiki.{train,valid,test}.tokens``) so that ``bench data fetch wikitext-103 --mirror DIR
--allow-unverified`` takes the real code path. The articles come from WikiText files (WikiText-2's 33,000 words),
shuffled on every pass; to reach WikiText-103's vocabulary, a share of the less common words of every copy is
replaced by made-up words drawn from a pool of :data:`POOL` with Zipf's law (rank k drawn in proportion to 1/k), so
that at 540 MB nearly every made-up word occurs at least 3 times, as every word of WikiText-103's vocabulary does.
Deterministic (numpy's PCG64 from the seed) and written as it is made: memory stays bounded whatever the size; to a
temporary file that becomes the archive only when whole (a full disk leaves no truncated archive).
"""

from __future__ import annotations

import zipfile
from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np

from bench.data.synthetic import wikitext_articles
from bench.fileio import atomic_path

POOL = 280_000  # made-up words: at 540 MB about 259,000 words occur 3 times or more (WikiText-103: 267,735)
COMMON = 3_000  # the source's most frequent words are never replaced (function words keep their role)
REPLACE_SHARE = 0.5  # of the other alphabetic words of each copy
HOLDOUT_BYTES = {"valid": 1_144_000, "test": 1_290_000}  # about WikiText-103's valid and test files
ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st", "tr")
VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ou")


def made_up_word(rank: int) -> str:
    """The pool's word of this rank: syllables spelling the rank in base 160, capitalized like a name."""
    syllables = []
    rank += 160  # at least two syllables
    while rank:
        rank, digit = divmod(rank, len(ONSETS) * len(VOWELS))
        syllables.append(ONSETS[digit % len(ONSETS)] + VOWELS[digit // len(ONSETS)])
    return "".join(syllables).capitalize()


class _Article:
    """One source article as tokens, with the positions of the words that may be replaced."""

    def __init__(self, title: str, lines: list[str], common: set[str]):
        self.title = title
        self.lines = [line.strip().split(" ") for line in lines]
        self.replaceable = [np.array([i for i, w in enumerate(words) if w.isalpha() and w not in common],
                                     dtype=np.int64) for words in self.lines]  # (headings are written as they are)


def wikitext103_like_articles(source: str, seed: int) -> Iterator[str]:
    """Articles in WikiText's layout without end: the source's, in a new seeded order on every pass, their less
    common words partly replaced by made-up words."""
    rng = np.random.Generator(np.random.PCG64(seed))
    parsed = wikitext_articles(source)
    counts = Counter(w for _, lines in parsed for line in lines for w in line.split())
    common = {w for w, _ in counts.most_common(COMMON)}
    articles = [_Article(title, lines, common) for title, lines in parsed]
    zipf = np.cumsum(1.0 / np.arange(1, POOL + 1))
    zipf /= zipf[-1]
    pool: dict[int, str] = {}
    while True:
        for k in rng.permutation(len(articles)):
            article = articles[k]
            out = [f" = {article.title} = \n \n"]
            for words, replaceable in zip(article.lines, article.replaceable):
                if words[0] == "=":
                    out.append(" \n " + " ".join(words) + " \n \n")
                    continue
                chosen = replaceable[rng.random(len(replaceable)) < REPLACE_SHARE]
                ranks = np.searchsorted(zipf, rng.random(len(chosen)))
                if len(chosen):
                    words = list(words)
                    for i, rank in zip(chosen.tolist(), ranks.tolist()):
                        words[i] = pool.get(rank) or pool.setdefault(rank, made_up_word(rank))
                out.append(" " + " ".join(words) + " \n")
            yield " \n" + "".join(out)


def write_wikitext103_like(source: str, train_size: int, out_dir: Path, seed: int = 0) -> Path:
    """``out_dir``/wikitext-103-v1.zip with WikiText-103's members: a train file of about ``train_size`` bytes and
    valid and test files of about WikiText-103's sizes, each made of whole articles (with other seeds)."""
    from bench.errors import BenchError

    if not wikitext_articles(source):
        raise BenchError("the source text holds no WikiText article (a ' = Title = ' line with text under it); give "
                         "WikiText files with --source")
    path = out_dir / "wikitext-103-v1.zip"
    sizes = {"train": train_size, **HOLDOUT_BYTES}
    with atomic_path(path) as scratch, \
            zipfile.ZipFile(scratch, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for offset, (split, size) in enumerate(sizes.items()):
            with archive.open(f"wikitext-103/wiki.{split}.tokens", "w", force_zip64=size > 2**30) as member:
                written = 0
                for article in wikitext103_like_articles(source, seed + 1_000_003 * offset):
                    data = article.encode("utf-8")
                    member.write(data)
                    written += len(data)
                    if written >= size:
                        break
    return path
