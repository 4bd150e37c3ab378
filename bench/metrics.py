r"""From one total negative log-likelihood to every comparable number.

A model scores a text by the total negative log-likelihood (NLL, in nats) it
assigns to that text's tokens, predicting every token including the first one
(from the document-start context ``<bos>``). Whatever the tokenization, the
total NLL of a lossless tokenization is the model's code length for the text,
so dividing it by a property of the *text* gives numbers that compare across
tokenizations. Dividing by the number of *tokens* does not.

With :math:`L` the total NLL in nats and the counts taken on the scored text:

====================== ==============================================================
``bits_per_byte``      :math:`L / (\ln 2 \cdot n_\text{bytes})`, bytes of the UTF-8 text
``bits_per_char``      :math:`L / (\ln 2 \cdot n_\text{chars})`, Unicode code points
``token_perplexity``   :math:`\exp(L / n_\text{tokens})`: depends on the tokenization
``word_perplexity``    :math:`\exp(L / n_\text{words})`, ``n_words = len(text.split())``
``word_perplexity_eos`` :math:`\exp(L / (n_\text{words} + n_\text{lines}))`, one extra
                       unit per newline: the AWD-LSTM/WikiText convention behind
                       published word-level perplexities (WikiText's ``<eos>``)
====================== ==============================================================

so that ``word_perplexity == 2 ** (bits_per_char * n_chars / n_words)`` and
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

from tokenizers_study.text import text_counts

LN2 = math.log(2.0)


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
    """:func:`normalize` when the text's counts are already known."""

    def per(units: int) -> float:
        return total_nll_nats / units if units else math.nan

    def exp(x: float) -> float:
        if math.isnan(x):
            return math.nan
        try:
            return math.exp(x)
        except OverflowError:  # beyond a float (x > 709.78): a perplexity too large to write, not an error
            return math.inf

    return {
        "total_nll_nats": float(total_nll_nats),
        "total_nll_bits": float(total_nll_nats) / LN2,
        "n_tokens": int(n_tokens),
        "n_bytes": n_bytes,
        "n_chars": n_chars,
        "n_words": n_words,
        "n_lines": n_lines,
        "bits_per_byte": per(n_bytes) / LN2,
        "bits_per_char": per(n_chars) / LN2,
        "bits_per_token": per(n_tokens) / LN2,
        "token_perplexity": exp(per(n_tokens)),
        "word_perplexity": exp(per(n_words)),
        "word_perplexity_eos": exp(per(n_words + n_lines)),
        "tokens_per_byte": n_tokens / n_bytes if n_bytes else math.nan,
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
