"""Tokenization schemes compared by the study, and their analysis.

>>> from tokenizers_study import train_tokenizer
>>> tok = train_tokenizer("word-open:100", "a b a c")
>>> tok.decode(tok.encode("a b z")) == "a b z"
True
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers_study.base import FORMAT_VERSION, SCHEME_FORMS, SchemeSpec, Tokenizer, parse_scheme
from tokenizers_study.bpe import BPETokenizer
from tokenizers_study.byte_level import ByteTokenizer
from tokenizers_study.char import CharTokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.pretrained import HFTokenizerFile, SentencePieceModelFile
from tokenizers_study.sentencepiece_schemes import SentencePieceBPETokenizer, SentencePieceUnigramTokenizer
from tokenizers_study.words import OpenWordTokenizer, WordTokenizer

FAMILIES: dict[str, type[Tokenizer]] = {
    cls.family: cls
    for cls in (
        ByteTokenizer,
        CharTokenizer,
        BPETokenizer,
        SentencePieceBPETokenizer,
        SentencePieceUnigramTokenizer,
        WordTokenizer,
        OpenWordTokenizer,
        HFTokenizerFile,
        SentencePieceModelFile,
    )
}


def is_pretrained(scheme: str) -> bool:
    """Whether a scheme name names a tokenizer file (hf:PATH, spm:PATH) rather than a scheme trained here."""
    family = scheme.strip().partition(":")[0]
    return family in FAMILIES and FAMILIES[family].pretrained


def train_tokenizer(scheme: str | SchemeSpec, text: str) -> Tokenizer:
    """Train a scheme on a train split's text."""
    spec = parse_scheme(scheme) if isinstance(scheme, str) else scheme
    return FAMILIES[spec.family].train(spec, text)


def tokenizer_from_bytes(data: bytes) -> Tokenizer:
    doc = json.loads(data)
    if doc.get("format_version") != FORMAT_VERSION:
        raise TokenizerError(f"tokenizer file format {doc.get('format_version')} is not supported (expected "
                             f"{FORMAT_VERSION}); retrain the tokenizer")
    spec = parse_scheme(doc["scheme"])
    tok = FAMILIES[spec.family].from_state(spec, doc["state"])
    return tok


def load_tokenizer(path: str | Path) -> Tokenizer:
    try:
        return tokenizer_from_bytes(Path(path).read_bytes())
    except FileNotFoundError:
        raise TokenizerError(f"tokenizer file {path} does not exist") from None
    except (ValueError, KeyError) as exc:
        raise TokenizerError(f"tokenizer file {path} is corrupt ({exc}); delete it to retrain") from None


__all__ = [
    "FAMILIES",
    "SCHEME_FORMS",
    "SchemeSpec",
    "Tokenizer",
    "TokenizerError",
    "is_pretrained",
    "load_tokenizer",
    "parse_scheme",
    "tokenizer_from_bytes",
    "train_tokenizer",
]
