"""mkdocs hook: the reference pages, generated from the code's own declarations (``bench.reference_pages``) at each
build, added to the site's files under reference/; they are never files in docs/."""

from __future__ import annotations

import signal

import typer.main
from mkdocs.structure.files import File

from bench.reference_pages import reference_pages

# cli.py sets a Ctrl-C handler for its own start-up when imported; mkdocs serve keeps its own (a clean shutdown).
_own_handler = signal.getsignal(signal.SIGINT)
import cli  # noqa: E402

signal.signal(signal.SIGINT, _own_handler)

FOLDER = "reference"  # where mkdocs.yml's nav lists the generated pages
# mkdocs.yml's extra_css: a table's first column (an option, a setting, a scheme) on one line, never cut at a hyphen
STYLESHEET = f"{FOLDER}/reference.css"
CSS = ".md-typeset td:first-child code { white-space: nowrap; }\n"


def on_files(files, config):
    for name, markdown in reference_pages(typer.main.get_command(cli.app)).items():
        files.append(File.generated(config, f"{FOLDER}/{name}", content=markdown))
    files.append(File.generated(config, STYLESHEET, content=CSS))
    return files
