"""mkdocs hook: the figures of results/reference/ served as assets/results/..., so that pages show the committed
figures themselves, never copies of them kept in docs/."""
from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parent.parent / "results" / "reference"
FIGURE_SUFFIXES = {".png", ".svg"}


def on_files(files, config):
    for figure in sorted(RESULTS.rglob("*")):
        if figure.suffix in FIGURE_SUFFIXES:
            served_as = f"assets/results/{figure.relative_to(RESULTS).as_posix()}"
            files.append(File.generated(config, served_as, abs_src_path=str(figure)))
    return files
