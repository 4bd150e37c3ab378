"""Plain-text and Markdown tables for terminal output and reports."""

from __future__ import annotations

import math
from typing import Any, Sequence


def format_value(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10 ** -digits):
            return f"{value:.{digits - 1}e}"
        if abs(value) >= 1000:
            return f"{value:,.1f}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
    return str(value)


def _cells(rows: Sequence[dict], columns: Sequence[str]) -> list[list[str]]:
    return [[format_value(row.get(c)) for c in columns] for row in rows]


def text_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    cells = _cells(rows, columns)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            out.append(v.rjust(widths[i]) if i and _numeric(v) else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])


def markdown_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    cells = _cells(rows, columns)
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---:" if cells and _numeric(cells[0][i]) else "---" for i in range(len(columns))) + "|"
    body = ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join([head, rule] + body)


def _numeric(text: str) -> bool:
    t = text.replace(",", "").replace("e", "").replace("-", "").replace("+", "").replace(".", "")
    return t.isdigit() or text in ("nan", "inf")


def flops_rate(tflops: float) -> str:
    """A FLOP rate in the unit that shows it: 3.1 GFLOP/s on a CPU, 410 TFLOP/s on a GPU."""
    for unit, scale in (("TFLOP/s", 1.0), ("GFLOP/s", 1e3), ("MFLOP/s", 1e6)):
        if tflops * scale >= 1 or unit == "MFLOP/s":
            return f"{tflops * scale:.3g} {unit}"


def duration(seconds: float) -> str:
    """A time in the unit that shows it: 40 s, 12.5 minutes, 3.2 hours, 6.1 days."""
    for unit, scale in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"
