"""Synthetic stand-ins for corpora this machine cannot fetch, for tests and scale benchmarks only: never presented
as the real data (they fail the official checksums, so everything computed from them says verified: false).

:func:`write_enwik8_like` writes ``enwik8.zip`` holding one member ``enwik8`` of exactly N bytes in enwik8's
format, MediaWiki XML: a ``<siteinfo>`` header, then ``<page>`` elements with ``<title>``, ``<id>``,
``<revision>`` (timestamp, contributor) and ``<text xml:space="preserve">`` holding wiki markup (sections,
``[[links]]``, ``{{templates}}``, ``'''bold'''``, entities) and about 0.3% non-ASCII characters, as enwik8 has.
The text comes from a WikiText file (articles under `` = Title = `` lines), shuffled and varied with a seeded
generator, so the same arguments always give the same bytes. The file is written to the zip as it is made: memory
stays bounded whatever N. It is written to a temporary file that becomes the archive only when whole: a full disk
leaves no truncated archive.
"""

from __future__ import annotations

import random
import re
import zipfile
from pathlib import Path
from typing import Iterator

from bench.fileio import atomic_path

HEADER = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.3/" '
          'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="0.3" xml:lang="en">\n'
          "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <base>http://en.wikipedia.org/wiki/Main_Page</base>\n"
          '    <generator>MediaWiki 1.6alpha</generator>\n    <case>first-letter</case>\n      <namespaces>\n'
          '      <namespace key="0" />\n    </namespaces>\n  </siteinfo>\n')
PAGE = ("  <page>\n    <title>{title}</title>\n    <id>{id}</id>\n    <revision>\n      <id>{revision}</id>\n"
        "      <timestamp>2006-0{month}-{day:02d}T{hour:02d}:{minute:02d}:00Z</timestamp>\n      <contributor>\n"
        "        <username>{user}</username>\n        <id>{user_id}</id>\n      </contributor>\n"
        '      <text xml:space="preserve">{text}</text>\n    </revision>\n  </page>\n')
TITLE = re.compile(r"^ = ([^=].*?) = $")
SECTION = re.compile(r"^ (=(?: =)+) (.+?) =(?: =)* $")
DETOKENIZE = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "), (" . ", ". "), (" ; ", "; "),
              (" : ", ": "), ("( ", "("), (" )", ")"), (" 's ", "'s "), (' " ', ' "'))
# Words that enwik8's text holds in other scripts and with diacritics; mixed in to match its non-ASCII share.
FOREIGN = ("Zürich", "São Paulo", "Ångström", "naïve", "Kraków", "Москва", "東京", "Αθήνα", "café", "Dvořák",
           "Ñuñoa", "Gödel", "–", "—", "°C", "£", "€")
UNK = re.compile(r"<unk>")
NON_ASCII_SHARE = 0.0042  # of the prose's characters: 0.3% of the file's, markup included, as in enwik8
USERS = ("Ram-Man", "Rmhermen", "Mav", "Tarquin", "Koyaanis Qatsi", "Conversion script", "Maveric149")


def wikitext_articles(text: str) -> list[tuple[str, list[str]]]:
    """(title, lines) of each article of a WikiText file."""
    articles: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = TITLE.match(line)
        if match:
            articles.append((match.group(1), []))
        elif articles and line.strip():
            articles[-1][1].append(line)
    return [(title, lines) for title, lines in articles if lines]


def page_text(title: str, lines: list[str], rng: random.Random) -> str:
    """An article as wiki markup, escaped as in the XML dump."""
    out = ["{{Infobox | name = " + title + " | type = " + rng.choice(("place", "person", "work", "event")) + "}}",
           f"'''{title}''' " + _prose(lines[0], rng)]
    for line in lines[1:]:
        section = SECTION.match(line)
        if section:
            level = "=" * section.group(1).count("=")
            out.append(f"\n{level}{section.group(2).strip()}{level}")
        else:
            out.append(_prose(line, rng))
    out.append(f"\n[[Category:{title.split()[0]}]]")
    text = UNK.sub("Unknown", "\n".join(out))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _prose(line: str, rng: random.Random) -> str:
    """A WikiText line as Wikipedia prose: detokenized, WikiText's <unk> replaced by a word of the line, some
    capitalized words linked, foreign words added until the line holds enwik8's share of non-ASCII characters."""
    text = line.strip()
    for old, new in DETOKENIZE:
        text = text.replace(old, new)
    known = [w for w in text.split(" ") if w.isalpha()] or ["the"]
    words = UNK.sub(lambda _: rng.choice(known).capitalize(), text).split(" ")
    for i, word in enumerate(words):
        if word[:1].isupper() and word.isalpha() and rng.random() < 0.08:
            words[i] = f"[[{word}]]"
    missing = NON_ASCII_SHARE * len(text) - sum(ord(ch) > 127 for ch in text)
    while missing > rng.random() * 4:  # a foreign word holds about 4 non-ASCII characters
        foreign = rng.choice(FOREIGN)
        words.insert(rng.randint(0, len(words)), f"({foreign})")
        missing -= sum(ord(ch) > 127 for ch in foreign)
    return " ".join(words)


def enwik8_like_pages(source: str, seed: int) -> Iterator[str]:
    """The XML header, then pages without end: the articles in a new seeded order on every pass."""
    rng = random.Random(seed)
    articles = wikitext_articles(source)
    yield HEADER
    page_id, round_number = 1, 0
    while True:
        order = list(range(len(articles)))
        rng.shuffle(order)
        for k in order:
            title, lines = articles[k]
            title = UNK.sub("Unknown", title) + ("" if round_number == 0 else f" ({round_number + 1})")
            yield PAGE.format(title=title, id=page_id, revision=15_000_000 + 7 * page_id, month=rng.randint(1, 9),
                              day=rng.randint(1, 28), hour=rng.randint(0, 23), minute=rng.randint(0, 59),
                              user=rng.choice(USERS), user_id=rng.randint(1, 99_999),
                              text=page_text(title, lines, rng))
            page_id += 1
        round_number += 1


def write_enwik8_like(source: str, size: int, out_dir: Path, seed: int = 0) -> Path:
    """``out_dir``/enwik8.zip with the member ``enwik8``: the first ``size`` bytes of the pages, like enwik8 (the
    first 10^8 bytes of a dump, cut wherever that falls)."""
    from bench.errors import BenchError

    if not wikitext_articles(source):  # checked before any file is made
        raise BenchError("the source text holds no WikiText article (a ' = Title = ' line with text under it); give "
                         "WikiText files with --source")
    path = out_dir / "enwik8.zip"
    written = 0
    with atomic_path(path) as scratch, zipfile.ZipFile(scratch, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("enwik8", "w", force_zip64=size > 2**31) as member:
        for piece in enwik8_like_pages(source, seed):
            data = piece.encode("utf-8")[:size - written]
            member.write(data)
            written += len(data)
            if written >= size:
                break
    return path


def wikitext_source(files: list[Path]) -> str:
    """The text the generator draws its articles from: WikiText files, read whole (WikiText-2 is 13 MB)."""
    from bench.errors import BenchError

    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise BenchError(f"no WikiText file to draw articles from ({', '.join(missing) or 'none given'}); give "
                         f"--source FILE (e.g. the mirror's wikitext-2/wiki.valid.tokens)")
    texts = []
    for f in files:
        try:
            texts.append(f.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:  # a binary file, or text in another encoding
            raise BenchError(f"--source {f} is not UTF-8 text ({exc.reason} at byte {exc.start:,}); give WikiText "
                             f"files, which are UTF-8 (e.g. the mirror's wikitext-2/wiki.valid.tokens)") from None
    return "".join(texts)
