"""The registry of tokenization schemes: each family's class by its name, and how scheme names are parsed.

A scheme is named by a short string: ``byte``, ``char``, ``bpe:4096``, ``sp-bpe:4096``, ``sp-unigram:4096``,
``word:33278``, ``word-open:33278``, or for a tokenizer trained elsewhere ``hf:PATH`` and ``spm:PATH``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers_study.base import FORMAT_VERSION, TRAITS, SchemeSpec, Tokenizer
from tokenizers_study.bpe import BPETokenizer
from tokenizers_study.byte_level import ByteTokenizer
from tokenizers_study.char import CharTokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.named_registry import Registry
from tokenizers_study.pretrained import HFTokenizerFile, SentencePieceModelFile
from tokenizers_study.sentencepiece_schemes import SentencePieceBPETokenizer, SentencePieceUnigramTokenizer
from tokenizers_study.words import OpenWordTokenizer, WordTokenizer

class SchemeRegistry(Registry[type[Tokenizer]]):
    """The scheme families by name; a family is checked as it is registered, so that a class with a missing or
    contradictory trait fails at once, in one line, instead of getting a default the report would trust."""

    def register(self, name: str, family: type[Tokenizer]) -> type[Tokenizer]:
        if problem := trait_problem(name, family) or method_problem(family):
            raise TokenizerError(f"tokenization scheme {name!r}: {family.__name__} {problem}")
        return super().register(name, family)


def trait_problem(name: str, family: type[Tokenizer]) -> str | None:
    """What is wrong with a scheme class's traits (base.TRAITS), or None."""
    if missing := [trait for trait in TRAITS if not hasattr(family, trait)]:
        return (f"declares no {' and no '.join(missing)}; every scheme declares each of {', '.join(TRAITS)} "
                f"(see tokenizers_study.base.Tokenizer)")
    if not isinstance(name, str) or not name or any(c in ":," or c.isspace() for c in name):
        return "needs a family name without ':', ',' or whitespace (a scheme is written family:N, lists with commas)"
    if family.family != name:
        return f"is registered as {name!r} but its family is {family.family!r}: register it under its family"
    if not isinstance(family.title, str) or not family.title.strip() or "\n" in family.title:
        return "needs a title of one line: what the scheme is in words, for captions (\"byte-level BPE\")"
    if not all(isinstance(getattr(family, t), bool) for t in ("lossless_scheme", "swept", "pretrained")):
        return "needs True or False for lossless_scheme, swept and pretrained"
    if isinstance(family.sort_rank, bool) or not isinstance(family.sort_rank, int):
        return f"needs an integer sort_rank, not {family.sort_rank!r}"
    if family.min_size is not None and (isinstance(family.min_size, bool) or not isinstance(family.min_size, int)
                                        or family.min_size < 1):
        return f"needs min_size None (no size) or an integer of at least 1, not {family.min_size!r}"
    if family.pretrained and family.min_size is not None:
        return "is pretrained (named by its file's path) and so takes no size: set min_size = None"
    if family.swept and family.min_size is None:
        return "is swept over vocabulary sizes but takes no size: set min_size, or swept = False"
    if family.swept and not family.lossless_scheme:
        return "is a closed vocabulary (never compared) yet swept, drawn as comparable: set swept = False"
    if family.min_size is not None and not family.min_size_why:
        return "sets min_size without min_size_why (the error a too small N gets)"
    return None


def method_problem(family: type[Tokenizer]) -> str | None:
    """What a scheme class leaves out of the methods every scheme has (base.Tokenizer's docstring), or None: found
    here, not when a run first trains or measures the scheme (an instance error, an AttributeError)."""
    if missing := sorted(getattr(family, "__abstractmethods__", ())):
        return (f"does not implement {', '.join(missing)}; every scheme implements each of "
                f"{', '.join(sorted(Tokenizer.__abstractmethods__))} (see tokenizers_study.base.Tokenizer)")
    if not (hasattr(family, "_id_bytes") or family._id_byte_lengths is not Tokenizer._id_byte_lengths
            or family.byte_lengths is not Tokenizer.byte_lengths):
        return ("says nowhere how many bytes each id decodes to: give it a table _id_bytes (each id's bytes, indexed "
                "by id) or a method _id_byte_lengths(self) returning each id's byte count as an integer array "
                "(see tokenizers_study.base.Tokenizer)")
    return None


ENTRY_POINTS = "bench.tokenizations"  # the entry-point group of scheme families that installed packages declare
FAMILIES = SchemeRegistry("tokenization scheme", TokenizerError, [
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
], entry_points=ENTRY_POINTS)


def scheme_forms(installed: bool = True) -> str:
    """How each registered scheme is written, for help and errors: 'byte, char, bpe:N, ..., hf:PATH, spm:PATH';
    ``installed=False``: without loading installed plug-ins not yet asked for (a help text)."""
    return ", ".join(cls.form() for cls in (FAMILIES if installed else FAMILIES.loaded()).values())


MOST_SIZE = 2**31 - 1


def split_scheme_name(name: str) -> tuple[str, str]:
    """'bpe:4096' -> ('bpe', '4096'), 'hf:a:b' -> ('hf', 'a:b'): the one place a scheme name's text is cut."""
    family, _, argument = name.strip().partition(":")
    return family, argument


def parse_scheme(name: str) -> SchemeSpec:
    family, size_text = split_scheme_name(name)
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
    if not (size_text.isascii() and size_text.isdigit()):
        raise TokenizerError(f"scheme {name!r} needs a vocabulary size: write {family}:N with N an integer")
    size = int(size_text)
    if size < cls.min_size:
        raise TokenizerError(f"scheme {name!r}: N must be at least {cls.min_size} ({cls.min_size_why})")
    if size > MOST_SIZE:  # beyond what the trainers (32-bit) and an embedding can hold
        raise TokenizerError(f"scheme {name!r}: N must be at most {MOST_SIZE:,}")
    return SchemeSpec(family, size)


def lattice_forms(installed: bool = True) -> str:
    """The schemes whose segmentations can be enumerated (``bench eval --marginal``): each token stands for the
    same bytes wherever it occurs, a table of them (``_id_bytes``) that ``segmentations.piece_table`` reads."""
    families = (FAMILIES if installed else FAMILIES.loaded()).values()
    return ", ".join(cls.form() for cls in families if hasattr(cls, "_id_bytes"))


# A scheme name read back from results was checked when its run was made: these read its family's traits without
# parse_scheme's checks; a family no longer registered (a plug-in not imported) is an open vocabulary trained
# here, after every registered scheme.
UNREGISTERED_RANK = 99


def read_scheme(name: str) -> tuple[SchemeSpec, type[Tokenizer] | None]:
    """A recorded scheme name as its spec and its family's class (None where no longer registered)."""
    family, argument = split_scheme_name(name)
    cls = FAMILIES.get(family)
    if cls is not None and cls.pretrained:
        return SchemeSpec(family, path=argument), cls
    return SchemeSpec(family, int(argument) if argument.isascii() and argument.isdigit() else None), cls


def scheme_sort_key(name: str) -> tuple:
    """Where a scheme's runs come in tables, legends and colours: its family's sort rank, then its size."""
    spec, cls = read_scheme(name)
    return cls.sort_rank if cls else UNREGISTERED_RANK, spec.size or 0, name


def is_pretrained(name: str) -> bool:
    """Whether a scheme name names a tokenizer file (hf:PATH, spm:PATH) rather than a scheme trained here."""
    cls = read_scheme(name)[1]
    return cls is not None and cls.pretrained


def is_closed_vocabulary(name: str) -> bool:
    """Whether the scheme decodes words outside its vocabulary as <unk> (word:N): its class's trait."""
    cls = read_scheme(name)[1]
    return cls is not None and not cls.lossless_scheme


def lossless_on(name: str, gives_text_back: bool) -> bool:
    """The one rule of "lossy": whether a run's numbers on a text compare with other tokenizations' there.

    They do when the scheme's vocabulary is open (its class's ``lossless_scheme``) and decoding gave that text
    back (measured where it is scored: a tokenizer file that normalises is lossy on some texts only). A closed
    vocabulary is never compared, not even on a text it happens to cover: its model gives no probability to a
    word outside its vocabulary, so the same corpus's next text could have no code length at all. Every decision
    of the report, the comparisons, the figures and the results' comparability is this function's.
    """
    return gives_text_back and not is_closed_vocabulary(name)


def sweep_point(name: str) -> tuple[str, int] | None:
    """Where the scheme's runs sit in the vocabulary sweep, (line, vocabulary size); None: not swept."""
    spec, cls = read_scheme(name)
    return None if cls is None or cls.pretrained else cls.sweep_point(spec)


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
