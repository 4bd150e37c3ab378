"""Tokenization schemes compared by the study, and their analysis.

>>> from tokenizers_study import train_tokenizer
>>> tok = train_tokenizer("word-open:100", "a b a c")
>>> tok.decode(tok.encode("a b z")) == "a b z"
True
"""

from tokenizers_study.base import SchemeSpec, Tokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.registry import (FAMILIES, is_closed_vocabulary, is_pretrained, lattice_forms, load_tokenizer,
                                       lossless_on, parse_scheme, read_scheme, scheme_forms, scheme_sort_key,
                                       split_scheme_name, sweep_point, tokenizer_from_bytes, train_tokenizer)

__all__ = [
    "FAMILIES",
    "SchemeSpec",
    "Tokenizer",
    "TokenizerError",
    "is_closed_vocabulary",
    "is_pretrained",
    "lattice_forms",
    "load_tokenizer",
    "lossless_on",
    "parse_scheme",
    "read_scheme",
    "scheme_forms",
    "scheme_sort_key",
    "split_scheme_name",
    "sweep_point",
    "tokenizer_from_bytes",
    "train_tokenizer",
]
