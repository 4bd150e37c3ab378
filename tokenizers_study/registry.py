"""The registry of tokenization schemes: each family's class by its name, and how scheme names are parsed.

A scheme is named by a short string: ``byte``, ``char``, ``bpe:4096``, ``sp-bpe:4096``, ``sp-unigram:4096``,
``word:33278``, ``word-open:33278``, or for a tokenizer trained elsewhere ``hf:PATH`` and ``spm:PATH``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers_study.base import FORMAT_VERSION, SchemeSpec, Tokenizer
from tokenizers_study.bpe import BPETokenizer
from tokenizers_study.byte_level import ByteTokenizer
from tokenizers_study.char import CharTokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.named_registry import Registry
from tokenizers_study.pretrained import HFTokenizerFile, SentencePieceModelFile
from tokenizers_study.sentencepiece_schemes import SentencePieceBPETokenizer, SentencePieceUnigramTokenizer
from tokenizers_study.words import OpenWordTokenizer, WordTokenizer

FAMILIES: Registry[type[Tokenizer]] = Registry("tokenization scheme", TokenizerError, [
    (cls.family, cls)
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
])


def scheme_forms() -> str:
    """How each registered scheme is written, for help and errors: 'byte, char, bpe:N, ..., hf:PATH, spm:PATH'."""
    return ", ".join(cls.form() for cls in FAMILIES.values())


MOST_SIZE = 2**31 - 1


def parse_scheme(name: str) -> SchemeSpec:
    family, _, size_text = name.strip().partition(":")
    if family not in FAMILIES:
        raise TokenizerError(FAMILIES.unknown(family, known=scheme_forms()))
    cls = FAMILIES[family]
    if cls.pretrained:
        if not size_text:
            raise TokenizerError(f"scheme {family!r} needs the path of its file: write {family}:PATH")
        return SchemeSpec(family, path=size_text)
    if cls.min_size is None:
        if size_text:
            raise TokenizerError(f"scheme {family!r} takes no size; write it as {family!r}")
        return SchemeSpec(family)
    if not size_text.isdigit():
        raise TokenizerError(f"scheme {name!r} needs a vocabulary size: write {family}:N with N an integer")
    size = int(size_text)
    if size < cls.min_size:
        raise TokenizerError(f"scheme {name!r}: N must be at least {cls.min_size} ({cls.min_size_why})")
    if size > MOST_SIZE:  # beyond what the trainers (32-bit) and an embedding can hold
        raise TokenizerError(f"scheme {name!r}: N must be at most {MOST_SIZE:,}")
    return SchemeSpec(family, size)


def is_pretrained(scheme: str) -> bool:
    """Whether a scheme name names a tokenizer file (hf:PATH, spm:PATH) rather than a scheme trained here."""
    family = scheme.strip().partition(":")[0]
    return family in FAMILIES and FAMILIES[family].pretrained


def lattice_forms() -> str:
    """The schemes whose segmentations can be enumerated (``bench eval --marginal``): each token stands for the
    same bytes wherever it occurs, a table of them (``_id_bytes``) that ``segmentations.piece_table`` reads."""
    return ", ".join(cls.form() for cls in FAMILIES.values() if hasattr(cls, "_id_bytes"))


# A scheme name read back from results was checked when its run was made: these read its family's traits without
# parse_scheme's checks, and a family no longer registered has the traits of the base class.

def scheme_sort_key(name: str) -> tuple:
    """Where a scheme's runs come in tables, legends and colours: its family's sort rank, then its size."""
    family, _, size = name.partition(":")
    rank = FAMILIES[family].sort_rank if family in FAMILIES else Tokenizer.sort_rank
    return rank, int(size) if size.isdigit() else 0, name


def is_closed_vocabulary(name: str) -> bool:
    """Whether the scheme decodes words outside its vocabulary as <unk> (word:N)."""
    family = name.strip().partition(":")[0]
    return family in FAMILIES and not FAMILIES[family].lossless_scheme


def sweep_point(name: str) -> tuple[str, int] | None:
    """Where the scheme's runs sit in the vocabulary sweep, (line, vocabulary size); None: not swept."""
    family, _, size = name.strip().partition(":")
    if family not in FAMILIES or FAMILIES[family].pretrained:
        return None
    return FAMILIES[family].sweep_point(SchemeSpec(family, int(size) if size.isdigit() else None))


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
