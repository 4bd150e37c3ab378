"""The documentation site's reference pages, generated from the code's own declarations each time the site is
built (``docs_hooks/reference_pages.py`` hands them to mkdocs), so that they cannot drift from the code: the command
line, the run settings, the metrics, the tokenization families and the model families."""

from __future__ import annotations

from typing import Any

from bench.reference_pages.cli_page import cli_page
from bench.reference_pages.metrics_page import metrics_page
from bench.reference_pages.models_page import models_page
from bench.reference_pages.settings_page import settings_page
from bench.reference_pages.tokenizations_page import tokenizations_page


def reference_pages(command_line: Any) -> dict[str, str]:
    """Each page's Markdown by its file name; ``command_line``: the Typer app as a click group
    (``typer.main.get_command(cli.app)``)."""
    return {"cli.md": cli_page(command_line), "settings.md": settings_page(), "metrics.md": metrics_page(),
            "tokenizations.md": tokenizations_page(), "models.md": models_page()}
