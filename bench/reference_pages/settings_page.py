"""The run-settings reference: every training and model setting with its type, default, range and meaning, from the
same list ``bench config fields`` prints (``bench.engine.fields``), one table per section."""

from __future__ import annotations

from itertools import groupby

from bench.engine.fields import all_field_docs
from bench.reference_pages.markdown import code, generated_from, heading, table, text

INTRO = ("Set one with `--set KEY=VALUE` on `bench train`, `bench speed` or `bench models describe`, or in a matrix "
         "config's `[shared]`, `[models.<model>]` or `[tokenizers.\"<scheme>\"]` table; a preset changes the "
         "defaults (the [model families](models.md) list each preset). The same list in a terminal: "
         "`bench config fields`.")


def settings_page() -> str:
    parts = ["# Run settings", generated_from("the settings declared on the run's dataclasses "
                                              "(`bench.settings.setting`)"), INTRO]
    for section, docs in groupby(all_field_docs(), key=lambda doc: doc.section):
        parts += [heading(2, section),
                  table(["Setting", "Type", "Default", "Allowed", "Meaning"],
                        [[code(d.name), text(d.kind), code(d.shown_default), text(d.allowed), text(d.meaning)]
                         for d in docs])]
    return "\n\n".join(parts) + "\n"
