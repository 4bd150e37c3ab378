"""Markdown for the generated reference pages: the code's own strings shown as written, and tables of them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

CODE_SPAN = re.compile(r"(`[^`]*`)")
# What Markdown would read as markup or HTML outside a code span: `<model>` would vanish as a tag, `*` start emphasis,
# `|` end a table cell.
MARKUP = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "*": "\\*", "_": "\\_", "[": "\\[",
                        "]": "\\]", "|": "\\|"})


def text(value: str) -> str:
    """``value`` shown as written: its code spans (`bench models list`) kept, markup characters elsewhere escaped."""
    return "".join(part if CODE_SPAN.fullmatch(part) else part.translate(MARKUP) for part in CODE_SPAN.split(value))


def code(value: object) -> str:
    """A value or a name as inline code; a pipe inside it escaped, as a table cell needs."""
    return "`" + str(value).replace("|", "\\|") + "`"


def paragraphs(value: str) -> str:
    """A help text of several lines as Markdown paragraphs: blank lines part them, other line ends are spaces."""
    blocks = re.split(r"\n\s*\n", value.strip())
    return "\n\n".join(text(" ".join(line.strip() for line in block.splitlines())) for block in blocks)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; the cells are Markdown already."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell or "–" for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(title: str) -> str:
    """The id a heading is given explicitly ({#...}), so that other pages can link to it: "model: sha-rnn" ->
    "model-sha-rnn"."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def heading(level: int, title: str) -> str:
    """A heading with its explicit id (attr_list), its title shown as written."""
    return f"{'#' * level} {text(title)} {{#{anchor(title)}}}"


# The front matter of a page without sections: material gives the table of contents' column to its tables instead.
NO_CONTENTS = "---\nhide:\n  - toc\n---"


def generated_from(source: str) -> str:
    """The line under each page's title: where its content comes from, so that nobody edits it by hand."""
    return (f"*Generated from {source} each time the site is built: what is listed here is what the code "
            f"declares.*")
