"""The report's tables for a paper: CSV beside LaTeX (booktabs), with the Markdown of report.md.

The LaTeX compiles with pdflatex and ``\\usepackage{booktabs}``: its special characters are escaped and the
report's symbols (±, †, ‡, §, ✗, ◊) written as LaTeX commands.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from bench.fileio import write_text_atomic
from bench.text_tables import format_value

LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_SYMBOLS = {"±": r"$\pm$", "†": r"\textdagger{}", "‡": r"\textdaggerdbl{}", "§": r"\S{}", "✗": r"$\times$",
                 "◊": r"$\diamond$", "–": "--", "—": "---", "≥": r"$\geq$", "≤": r"$\leq$"}


def export_table(rows: list[dict], columns: list[str], folder: Path, name: str, caption: str) -> list[str]:
    """Write ``name``.csv and ``name``.tex into ``folder``; returns the file names."""
    write_text_atomic(folder / f"{name}.csv", to_csv(rows, columns))
    write_text_atomic(folder / f"{name}.tex", to_latex(rows, columns, caption, f"tab:{name}"))
    return [f"{name}.csv", f"{name}.tex"]


def to_csv(rows: list[dict], columns: list[str]) -> str:
    """Numbers as numbers: a cell "2.5491 ± 0.1162" becomes the columns ``X`` and ``X ±``, "9,932.6 [6,529.1,
    15,110.2]" and "[a, b]" ``X``, ``X low`` and ``X high``, thousands separators dropped."""
    header, cells = [], [[] for _ in rows]
    for column in columns:
        values = [_plain(row.get(column)) for row in rows]
        shapes = [_numbers(v) for v in values]
        width = max((len(s) for s in shapes if s is not None), default=0)
        kind = next((s for s, v in zip(shapes, values) if s is not None and "±" in v), None)
        names = ([column, f"{column} ±"] if kind is not None and width == 2 else
                 [column, f"{column} low", f"{column} high"] if width == 3 else
                 [f"{column} low", f"{column} high"] if width == 2 else [column])
        header += names
        for line, value, shape in zip(cells, values, shapes):
            if shape is None or len(names) == 1:
                line += [value] + [""] * (len(names) - 1)
            else:
                line += shape + [""] * (len(names) - len(shape))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(cells)
    return out.getvalue()


NUMBER = r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?"
SHAPES = (re.compile(rf"^({NUMBER}) ± ({NUMBER})$"), re.compile(rf"^({NUMBER}) \[({NUMBER}), ({NUMBER})\]$"),
          re.compile(rf"^\[({NUMBER}), ({NUMBER})\]$"))


def _numbers(value: str) -> list[str] | None:
    """The numbers of a cell that holds a value with its interval; None for any other cell."""
    for shape in SHAPES:
        match = shape.match(value)
        if match:
            return [g.replace(",", "") for g in match.groups()]
    return None


def to_latex(rows: list[dict], columns: list[str], caption: str, label: str) -> str:
    align = "l" * min(2, len(columns)) + "r" * max(0, len(columns) - 2)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{align}}}", r"\toprule",
             " & ".join(latex_text(c) for c in columns) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_text(_plain(row.get(c))) for c in columns) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_text(caption)}}}", rf"\label{{{label}}}",
              r"\end{table}"]
    return "\n".join(lines) + "\n"


def latex_text(text: str) -> str:
    text = "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text).replace("**", "").replace("`", ""))
    text = text.replace("*", "")  # Markdown emphasis of report.md
    return "".join(LATEX_SYMBOLS.get(ch, ch) for ch in text)


def _plain(value) -> str:
    return "" if value is None else format_value(value) if not isinstance(value, str) else value
