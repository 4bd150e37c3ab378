"""The shell commands of a documentation page: its ```bash blocks, the docs-test markers before them, which
logical lines run and how, and the counts of what runs and what does not (the convention is in
tests/test_docs_commands.py's docstring). Nothing here runs anything.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO


# A logical line runs when its words start with one of these (after any NAME=value assignments). `bench` and
# `python cli.py` run in this process unless the line needs a shell; everything else runs through bash.
RUN_PREFIXES = (("bench",), ("python", "cli.py"), ("python", "-m", "bench"), ("python", "scripts/"),
                ("scripts/",), ("./scripts/",), ("make", "demo"), ("make", "docs"))
IN_PROCESS = (("bench",), ("python", "cli.py"))

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<verb>\S+)\s*(?P<rest>.*?)\s*-->$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SHELL_CHARACTERS = set("|&;<>()$`*?[]{}~")  # outside quotes: pipes, lists, redirections, expansions, globs


@dataclass(frozen=True)
class Command:
    """A logical line of a block that runs: where it starts in the page, its text, and how it runs."""
    page: str
    line: int
    text: str  # after the block's replacements and the global substitutions
    in_process: bool  # False: through bash in a subprocess

    def argv(self) -> list[str]:
        """The arguments after `bench` / `python cli.py` of an in-process command."""
        words = shlex.split(self.text, comments=True)
        return words[1:] if words[0] == "bench" else words[2:]

    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Block:
    """A fenced block: its opening fence's line, its info word, its body, and its markers."""
    line: int  # the opening fence's line
    info: str
    body: list[str]
    skip: str | None = None  # the reason given by a skip marker
    replacements: list[tuple[int, str, str]] = field(default_factory=list)  # (marker's line, OLD, NEW)

    def logical_lines(self, text: str) -> list[tuple[int, str]]:
        """``text``'s lines with backslash continuations joined, each with its page line number."""
        joined, start, parts = [], None, []
        for k, raw in enumerate(text.split("\n")):
            start = self.line + 1 + k if start is None else start
            stripped = raw.rstrip()
            parts.append(stripped[:-1] if stripped.endswith("\\") else stripped)
            if not stripped.endswith("\\"):
                joined.append((start, " ".join(p.strip() for p in parts if p.strip())))
                start, parts = None, []
        if parts:
            joined.append((start, " ".join(p.strip() for p in parts if p.strip())))
        return joined


@dataclass
class Page:
    """A page's blocks, the problems of its markers, and what it runs under the given substitutions."""
    path: str
    blocks: list[Block]
    errors: list[str]
    commands: list[Command] = field(default_factory=list)
    not_run: int = 0  # lines of runnable blocks that are not bench commands
    skipped: list[tuple[int, str, int]] = field(default_factory=list)  # (line, reason, commands it holds)
    replaced: int = 0
    substituted: dict[str, int] = field(default_factory=dict)  # global substitution -> times applied
    other_blocks: int = 0  # blocks that are not ```bash (console, text, toml, python, ...)


def line_runs(line: str) -> tuple[bool, bool]:
    """Whether a logical line runs, and whether it runs in this process (False: through bash)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote: bash says what is wrong
        words = line.split()
    assigned = 0
    while assigned < len(words) and ASSIGNMENT.match(words[assigned]):
        assigned += 1
    words = words[assigned:]
    for prefix in RUN_PREFIXES:
        if len(words) >= len(prefix) and all(_matches(w, p) for w, p in zip(words, prefix)):
            in_process = prefix in IN_PROCESS and words[:len(prefix)] == list(prefix) and not needs_shell(line)
            return True, in_process
    return False, False


def _matches(word: str, prefix: str) -> bool:
    """A folder matches the start of a word (`scripts/demo.sh`), `bench` also a module of it (`python -m
    bench.x`); any other word only itself (`make docs-serve` serves until stopped, and is not run)."""
    if prefix.endswith("/"):
        return word.startswith(prefix)
    return word == prefix or (prefix == "bench" and word.startswith("bench."))


def needs_shell(line: str) -> bool:
    """A NAME=value assignment first, or a character bash would act on outside quotes (a pipe, `&&`, a
    redirection, `$`, a glob...), or `$`/backquote inside double quotes."""
    if ASSIGNMENT.match(line.lstrip()):
        return True
    quote, previous = None, " "
    for char in line:
        if quote == "'":
            quote = None if char == "'" else quote
        elif quote == '"':
            if char in "$`":
                return True
            quote = None if char == '"' and previous != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and previous.isspace():
            return False  # the rest is a comment
        elif char in SHELL_CHARACTERS:
            return True
        previous = char
    return False


def parse(path: str, text: str) -> Page:
    """The fenced blocks of a page with their markers; misplaced or malformed markers are errors."""
    lines = text.split("\n")
    blocks, errors, pending, k = [], [], [], 0
    while k < len(lines):
        stripped = lines[k].strip()
        opening = FENCE.match(lines[k])
        if stripped.startswith("<!--") and "docs-test" in stripped:
            pending.append((k + 1, stripped))
        elif opening:
            end = _closing(lines, k, opening)
            indent = len(opening["indent"])
            body = [line[indent:] if not line[:indent].strip() else line.lstrip() for line in lines[k + 1:end]]
            block = Block(k + 1, (opening["info"].split() or [""])[0], body)
            errors += _apply_markers(path, block, pending)
            blocks.append(block)
            pending, k = [], end
        elif stripped and pending:
            errors += [f"{path}:{n}: a docs-test marker must come just before a ```bash block" for n, _ in pending]
            pending = []
        k += 1
    errors += [f"{path}:{n}: a docs-test marker must come just before a ```bash block" for n, _ in pending]
    return Page(path, blocks, errors)


def _closing(lines: list[str], start: int, opening: re.Match) -> int:
    fence = opening["fence"]
    for k in range(start + 1, len(lines)):
        line = lines[k].strip()
        if line.startswith(fence[0] * len(fence)) and set(line) == {fence[0]}:
            return k
    return len(lines)  # an unclosed fence runs to the end of the page, as Markdown has it


def _apply_markers(path: str, block: Block, markers: list[tuple[int, str]]) -> list[str]:
    errors = []
    for n, text in markers:
        where = f"{path}:{n}"
        match = MARKER.match(text)
        if match is None or match["verb"] not in ("skip", "replace"):
            errors.append(f'{where}: not a docs-test marker: {text} (<!-- docs-test: skip REASON --> or '
                          f'<!-- docs-test: replace "OLD" "NEW" -->)')
        elif block.info != "bash":
            errors.append(f"{where}: a docs-test marker before a ```{block.info} block, which never runs")
        elif match["verb"] == "skip":
            if not match["rest"]:
                errors.append(f"{where}: a skip marker needs its reason: <!-- docs-test: skip REASON -->")
            elif block.skip is not None:
                errors.append(f"{where}: a second skip marker for one block")
            block.skip = match["rest"] or block.skip
        else:
            try:
                pair = shlex.split(match["rest"])
            except ValueError as exc:
                pair = [str(exc)]
            if len(pair) != 2 or not pair[0]:
                errors.append(f'{where}: a replace marker takes two quoted strings, a non-empty OLD and a NEW: '
                              f'<!-- docs-test: replace "OLD" "NEW" -->, not {match["rest"]!r}')
            else:
                block.replacements.append((n, pair[0], pair[1]))
    if block.skip is not None and block.replacements:
        errors.append(f"{path}:{block.line}: a skipped block takes no replace marker (it would never be checked)")
    return errors


def plan(page: Page, substitutions: dict[str, str]) -> Page:
    """Fill in what the page runs: each runnable block's replacements, then the global substitutions; a
    replacement whose OLD is not in its block is an error."""
    page.substituted = dict.fromkeys(substitutions, 0)
    for block in page.blocks:
        if block.info != "bash":
            page.other_blocks += 1
            continue
        text = "\n".join(block.body)
        for line, old, new in block.replacements:
            if old not in text:
                page.errors.append(f"{page.path}:{line}: replace {old!r}: not in its block (a stale marker?)")
            text = text.replace(old, new)
            page.replaced += 1
        for old, new in substitutions.items():
            page.substituted[old] += text.count(old)
            text = text.replace(old, new)
        commands, not_run = [], 0
        for line_number, line in block.logical_lines(text):
            if not line or line.startswith("#"):
                continue
            run, in_process = line_runs(line)
            if run:
                commands.append(Command(page.path, line_number, line, in_process))
            else:
                not_run += 1
        if block.skip is None:
            page.commands += commands
            page.not_run += not_run
        else:  # counted even when nothing in it would run (a torchrun line): the marker says why it is not tested
            page.skipped.append((block.line, block.skip, len(commands)))
    return page


def read_page(path: Path, substitutions: dict[str, str], root: Path = REPO) -> Page:
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return plan(parse(name, path.read_text(encoding="utf-8")), substitutions)


def documentation_pages(root: Path = REPO) -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]


def summary(pages: list[Page]) -> str:
    """The counts, page by page and in all: commands run (of them through bash), lines that are not bench
    commands, skip markers and the commands in their blocks, replace markers; then in all, with the global
    substitutions, and every skip with its reason."""
    rows = [f"{'page':<36} {'run':>4} {'bash':>4} {'not run':>7} {'skips':>5} {'skipped':>7} {'replaced':>8}"]
    for p in pages:
        rows.append(f"{p.path:<36} {len(p.commands):>4} {sum(not c.in_process for c in p.commands):>4} "
                    f"{p.not_run:>7} {len(p.skipped):>5} {sum(n for _, _, n in p.skipped):>7} {p.replaced:>8}")
    commands = [c for p in pages for c in p.commands]
    skips = [(p.path, line, reason, n) for p in pages for line, reason, n in p.skipped]
    substituted: dict[str, int] = {}
    for p in pages:
        for old, n in p.substituted.items():
            substituted[old] = substituted.get(old, 0) + n
    rows.append(f"in all: {len(commands)} commands run ({sum(not c.in_process for c in commands)} through bash), "
                f"{sum(p.not_run for p in pages)} lines not a bench command, "
                f"{sum(n for *_, n in skips)} commands in {len(skips)} skipped blocks, "
                f"{sum(p.replaced for p in pages)} replacements, global substitutions: "
                + (", ".join(f"{old!r} x{n}" for old, n in substituted.items()) or "none"))
    rows += [f"skipped {path}:{line} ({n} commands): {reason}" for path, line, reason, n in skips]
    return "\n".join(rows)

