r"""From one total negative log-likelihood to every comparable number.

A model scores a text by the total negative log-likelihood (NLL, in nats) it
assigns to that text's tokens, predicting every token including the first one
(from the document-start context ``<bos>``). Whatever the tokenization, the
total NLL of a lossless tokenization is the model's code length for the text,
so dividing it by a property of the *text* gives numbers that compare across
tokenizations. Dividing by the number of *tokens* does not.

Each metric is one entry of :data:`METRICS`: its key, its column label, its unit, its formula over the total NLL
and the counts, whether it compares across tokenizations and its definition. The result schema, the report's
tables and definitions, ``bench compare``, the CLI's tables, the exports and ``bench reproduce`` are drawn from it;
every validation logs each comparable metric (``valid_<key>`` in log.jsonl), and the figures can draw each one
declared with a ``name`` (``bench report --metric NAME``). A metric is added there and nowhere else. Two
identities hold:
``word_perplexity == 2 ** (bits_per_char * n_chars / n_words)`` and
``bits_per_byte * n_bytes == bits_per_char * n_chars``.

Counting conventions:

* ``n_bytes`` is the length of the exact file bytes. Text is read with
  ``surrogateescape``; an undecodable byte (enwik8's fixed split can cut a
  multi-byte character) counts as one byte and as one character.
* ``n_words`` splits on any Unicode whitespace (``str.split``).
* ``n_lines`` counts ``\n`` characters.

Differences from lm-evaluation-harness (``wikitext`` task): the harness
detokenizes each WikiText document before scoring it but counts bytes and
words on the original text (words as ``len(re.split(r"\s+", doc))``, which
also counts an empty leading or trailing field), scores each document
separately with rolling windows of the model's context, and reports
``word_perplexity``, ``byte_perplexity`` (``2 ** bits_per_byte``) and
``bits_per_byte``. Here the scored text is exactly the text whose bytes and
words are counted, the whole split is scored as one stream with state carried
across it, and there is no detokenization.
"""


from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from bench.errors import BenchError
from tokenizers_study.named_registry import Registry
from tokenizers_study.text import text_counts

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Counts:
    """What every metric is computed from: the total NLL (nats) of the scored tokens and the text's counts."""

    nll: float
    tokens: int
    bytes: int
    chars: int
    words: int
    lines: int

    def per(self, units: int) -> float:
        """Nats per unit; ``nan`` where there are no units (a text with no words, say)."""
        return self.nll / units if units else math.nan

    def bits_per(self, units: int) -> float:
        return self.per(units) / LN2

    def perplexity_per(self, units: int) -> float:
        nats = self.per(units)
        if math.isnan(nats):
            return math.nan
        try:
            return math.exp(nats)
        except OverflowError:  # beyond a float (x > 709.78): a perplexity too large to write, not an error
            return math.inf


@dataclass(frozen=True)
class Metric:
    """One number of a scored split, declared once: every table, export, definition and axis is drawn from here."""

    key: str  # its name in result.json, log.jsonl, runs.csv (``<split>_<key>``) and the CLI's tables
    label: str  # its column in the report's tables and bench compare
    unit: str  # the value in words, for figure axes and prose
    formula: Callable[[Counts], float]
    comparable: bool  # across tokenizations: normalized by a property of the text, not by its tokens
    definition: str  # the report's definition, after "<label> = "
    perplexity: bool = False  # the exp of a mean loss: averaged over seeds as its log (perplexity of the mean loss)
    shown: bool = True  # a column of the report, bench compare and the CLI's tables (else only in the files)
    # A loss the figures can draw (``bench report --metric NAME``): its name there and the count of the text it is
    # per (a field of Counts, recorded as ``n_<count>``); every validation logs it, so learning curves draw it too.
    name: str = ""
    count: str = ""

    def __post_init__(self) -> None:
        if self.name and not (self.comparable and not self.perplexity and self.count in COUNT_FIELDS):
            raise ValueError(f"metric {self.key!r}: a figure metric (name {self.name!r}) is a comparable loss, not a "
                             f"perplexity, per one of the text's counts ({', '.join(COUNT_FIELDS)}); got count "
                             f"{self.count!r}")


COUNT_FIELDS = ("bytes", "chars", "words", "lines")  # the text's counts a metric can be per (Counts' fields)

# In the order result.json and runs.csv write them; tables show the comparable ones first.
METRICS: Registry[Metric] = Registry("metric", BenchError, [(metric.key, metric) for metric in (
    Metric("bits_per_byte", "bits/byte", "bits per byte", lambda c: c.bits_per(c.bytes), True,
           "L / (ln 2 · UTF-8 bytes of the text)", name="byte", count="bytes"),
    Metric("bits_per_char", "bits/char", "bits per character", lambda c: c.bits_per(c.chars), True,
           "L / (ln 2 · Unicode code points)", name="char", count="chars"),
    Metric("bits_per_word", "bits/word", "bits per word", lambda c: c.bits_per(c.words), True,
           "L / (ln 2 · words), words = `len(text.split())`: log2 of the word perplexity", shown=False,
           name="word", count="words"),
    Metric("bits_per_token", "bits/token", "bits per token", lambda c: c.bits_per(c.tokens), False,
           "L / (ln 2 · tokens)", shown=False),
    Metric("token_perplexity", "token ppl", "per-token perplexity", lambda c: c.perplexity_per(c.tokens), False,
           "exp(L / tokens): depends on what a token is", perplexity=True),
    Metric("word_perplexity", "word ppl", "word perplexity", lambda c: c.perplexity_per(c.words), True,
           "exp(L / words), words = `len(text.split())` (lm-evaluation-harness's word unit)", perplexity=True),
    Metric("word_perplexity_eos", "word ppl (eos)", "word perplexity (eos)",
           lambda c: c.perplexity_per(c.words + c.lines), True,
           "exp(L / (words + newlines)), one extra unit per newline: the AWD-LSTM/WikiText convention of published "
           "word-level perplexities (WikiText's `<eos>`)", perplexity=True),
    Metric("tokens_per_byte", "tokens/byte", "tokens per byte", lambda c: c.tokens / c.bytes if c.bytes else math.nan,
           False, "tokens / UTF-8 bytes of the text", shown=False),
)])


def shown_metrics() -> list[Metric]:
    """The metrics tables show, the comparable ones first (each group in declaration order)."""
    return sorted((m for m in METRICS.values() if m.shown), key=lambda m: not m.comparable)


def comparable_metrics() -> list[Metric]:
    """The metrics that compare across tokenizations: what every validation logs (``valid_<key>``)."""
    return [m for m in METRICS.values() if m.comparable]


def figure_metrics() -> list[Metric]:
    """The losses the figures can draw, in declaration order: those with a ``name``."""
    return [m for m in METRICS.values() if m.name]


def compare_label(metric: Metric) -> str:
    """A metric's label where numbers are set side by side: one that does not compare says so."""
    return metric.label if metric.comparable else f"{metric.label} (NOT comparable)"


def normalize(total_nll_nats: float, text: str, n_tokens: int) -> dict:
    """Every comparable number from the total NLL (nats) of ``n_tokens`` tokens scoring ``text``.

    Ratios whose denominator is zero (a text with no words, say) are ``nan``.
    """
    if n_tokens < 0 or not math.isfinite(total_nll_nats) or total_nll_nats < 0:
        raise ValueError(f"need a finite non-negative total NLL and n_tokens >= 0; got {total_nll_nats}, {n_tokens}")
    counts = text_counts(text)
    return normalize_counts(total_nll_nats, n_tokens, **counts)


def normalize_counts(total_nll_nats: float, n_tokens: int, n_bytes: int, n_chars: int, n_words: int,
                     n_lines: int) -> dict:
    """:func:`normalize` when the text's counts are already known: the counts, then every metric of METRICS."""
    counts = Counts(float(total_nll_nats), int(n_tokens), n_bytes, n_chars, n_words, n_lines)
    return {
        "total_nll_nats": counts.nll,
        "total_nll_bits": counts.nll / LN2,
        "n_tokens": counts.tokens,
        "n_bytes": n_bytes,
        "n_chars": n_chars,
        "n_words": n_words,
        "n_lines": n_lines,
        **{key: metric.formula(counts) for key, metric in METRICS.items()},
    }


BITS_PER_BYTE_CORPORA = ("enwik8",)  # where the field's "bits per character" (bpc) is per byte


def field_convention(corpus: str, metrics: dict[str, dict]) -> str | None:
    """What to compare with published numbers on ``corpus``, for splits' metrics (JSON form); None where the field's
    units are this module's. enwik8 is read as bytes in the literature (Mahoney's benchmark; SHA-RNN's 1.068 "bpc"
    on test), so its published bpc is ``bits_per_byte`` here; ``bits_per_char`` counts Unicode characters."""
    if corpus not in BITS_PER_BYTE_CORPORA:
        return None
    ratios = ", ".join(f"{split} {m['n_bytes'] / m['n_chars']:.4f}" for split, m in metrics.items() if m["n_chars"])
    return (f"{corpus}: published 'bpc' (bits per character) on {corpus} counts bytes: compare bits_per_byte with it; "
            f"bits_per_char here counts Unicode characters (bytes per character: {ratios})")
