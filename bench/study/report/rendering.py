"""A report as blocks, rendered twice: as Markdown and as one self-contained HTML page.

The HTML embeds its figures as PNG data and its style inline: it makes no request
and runs no script.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field

from bench.text_tables import format_value, markdown_table

ITALICS = re.compile(r"(?<![*\w])\*(?![\s*])([^*]+?)(?<![\s*])\*(?![*\w])")
INTERVAL = re.compile(r"^(.*?)(?: (\[[^\]]*\]))?$", re.S)
STYLE = ("body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;"
         "padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;"
         "font-size:13px}th,td{border:1px solid #ccc;padding:3px 5px;text-align:right}"
         "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}caption{text-align:left;"
         "font-style:italic;padding:4px 0}img{max-width:100%}figure{margin:1.5em 0}"
         "figcaption{font-style:italic;font-size:13px}pre{background:#f6f6f6;padding:8px;overflow:auto;"
         "font-size:12px}code{background:#f3f3f3;padding:0 3px}"
         "td{white-space:nowrap}td.text{white-space:normal;min-width:7em}.ci{color:#666;font-size:11px}"
         # a table wider than the text column uses the window's width, and scrolls sideways beyond it
         ".wide{width:calc(100vw - 3em);margin-left:calc(50% - 50vw + 1.5em);overflow-x:auto}"
         ".wide table{margin:1em auto}.wide caption{max-width:1100px;margin:auto}")


@dataclass
class ReportPage:
    """Blocks rendered twice: as Markdown and as one self-contained HTML page."""

    title: str
    blocks: list[tuple] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", level, text))

    def para(self, text: str) -> None:
        self.blocks.append(("para", text))

    def items(self, items: list[str]) -> None:
        self.blocks.append(("items", items))

    def table(self, rows: list[dict], columns: list[str], caption: str = "", anchor: str = "") -> None:
        """``anchor``: the Markdown wraps the table in snippet markers of that name, so that a page of the
        documentation includes it from a committed report (``--8<-- "report.md:anchor"``) instead of copying it."""
        self.blocks.append(("table", rows, columns, caption, anchor))

    def figure(self, name: str, png: bytes, caption: str) -> None:
        self.blocks.append(("figure", name, png, caption))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "para":
                out += [block[1], ""]
            elif kind == "items":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "table":
                rows, columns, caption, anchor = block[1:]
                if anchor:
                    out += [f"<!-- --8<-- [start:{anchor}] -->", ""]
                if caption:
                    out += [f"*{caption}*", ""]
                out += [markdown_table(rows, columns) if rows else "(no rows)", ""]
                if anchor:
                    out += [f"<!-- --8<-- [end:{anchor}] -->", ""]
            elif kind == "figure":
                name, _, caption = block[1:]
                out += [f"![{name}]({name}.png)", "", f"*{caption}* ([SVG]({name}.svg))", ""]
            elif kind == "code":
                out += ["```", block[1].rstrip(), "```", ""]
        return "\n".join(out)

    def html(self) -> str:
        esc = html.escape
        body = [f"<h1>{esc(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                body.append(f"<h{block[1]}>{esc(block[2])}</h{block[1]}>")
            elif kind == "para":
                body.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "items":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
            elif kind == "table":
                rows, columns, caption, _ = block[1:]
                head = "".join(f"<th>{esc(c)}</th>" for c in columns)
                cells = "".join("<tr>" + "".join(_cell(format_value(r.get(c))) for c in columns) + "</tr>"
                                for r in rows)
                cap = f"<caption>{_inline(caption)}</caption>" if caption else ""
                body.append(f'<div class="wide"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{cells}</tbody>'
                            "</table></div>")
            elif kind == "figure":
                name, png, caption = block[1:]
                data = base64.b64encode(png).decode("ascii")
                body.append(f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                            f"<figcaption>{_inline(caption)}</figcaption></figure>")
            elif kind == "code":
                body.append(f"<pre>{esc(block[1])}</pre>")
        return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(self.title)}</title>"
                f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")


def _inline(text: str) -> str:
    """Markdown inline code (`x`), bold (**x**) and italics (*x*) to HTML; everything else escaped."""
    out = html.escape(text)
    parts = out.split("`")
    out = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    parts = out.split("**")
    out = "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))
    return ITALICS.sub(r"<em>\1</em>", out)


def _cell(text: str) -> str:
    """A table cell: a number never breaks, an interval after it goes on a line of its own in small type, and
    words (a note, a label) wrap."""
    value, interval = INTERVAL.match(text).groups()
    words = sum(bool(re.search(r"[^\W\d_]{2,}", w)) for w in value.split()) >= 2 and "±" not in value
    return (f'<td{" class=text" if words else ""}>{_inline(value)}'
            + (f'<br><span class="ci">{html.escape(interval)}</span>' if interval else "") + "</td>")
