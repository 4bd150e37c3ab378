"""The metrics reference: every metric of ``bench.metrics.METRICS`` with its key, label, unit, whether it compares
across tokenizations and its definition."""

from __future__ import annotations

from bench.metrics import METRICS
from bench.reference_pages.markdown import NO_CONTENTS, code, generated_from, table, text

INTRO = ("L is the total negative log-likelihood, in nats, that a model gives the scored text's tokens. A metric "
         "that divides it by a property of the text (its bytes, characters, words) compares across "
         "tokenizations; one per token does not. A metric's key names it in `result.json`, `log.jsonl` "
         "(`valid_<key>`) and `runs.csv` (`<split>_<key>`); its label is its column in the report and "
         "`bench compare`. A metric with a figure name can be drawn with `bench report --metric NAME`.")


def metrics_page() -> str:
    rows = [[code(m.key), text(m.label), text(m.unit), "yes" if m.comparable else "**no**",
             code(m.name) if m.name else "", "yes" if m.shown else "files only"] for m in METRICS.values()]
    definitions = "\n\n".join(f"{code(m.key)}\n:   {text(m.label)} = {text(m.definition)}" for m in METRICS.values())
    return "\n\n".join([
        NO_CONTENTS, "# Metrics", generated_from("`bench.metrics.METRICS`"), INTRO,
        table(["Key", "Label", "Unit", "Compares across tokenizations", "Figure name", "In tables"], rows),
        "Their definitions, as the report gives them:", definitions]) + "\n"
