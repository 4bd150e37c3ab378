"""The tokenization reference: every scheme family registered in ``tokenizers_study.registry.FAMILIES`` with each
trait its class declares (``tokenizers_study.base.TRAITS``) and the library it runs on."""

from __future__ import annotations

from bench.reference_pages.markdown import NO_CONTENTS, code, generated_from, table, text
from tokenizers_study.base import TRAITS, Tokenizer
from tokenizers_study.registry import FAMILIES

INTRO = ("A scheme is written as its form: N is the vocabulary size, PATH a tokenizer file trained elsewhere. "
         "What each column means is under the tables.")
# Each trait's column and its meaning (the traits' comments in tokenizers_study.base.Tokenizer, in words); the family
# is the form's first word, the least size has a table of its own with its reason. A trait added to TRAITS without a
# column here fails the build (KeyError): listed, not lost.
COLUMNS = {
    "title": ("What it is", "the scheme in words, as captions and legends name it."),
    "lossless_scheme": ("Open vocabulary", "whether every text decodes back; a closed vocabulary decodes unknown "
                                           "words as `<unk>`, and its runs are never compared with other "
                                           "tokenizations'."),
    "sort_rank": ("Order", "where its runs come in tables, legends and colours (then by size)."),
    "swept": ("Swept", "each size N is a point of the report's vocabulary sweep, one line per family."),
    "pretrained": ("Pretrained", "loaded from a file (`family:PATH`), never trained here."),
    "library": ("Library", "the package that trains or runs it, where it is not this toolkit."),
    "min_size": ("Least N", "the smallest vocabulary size a scheme that takes a size accepts, and why."),
}
SHOWN = [trait for trait in TRAITS if trait not in ("family", "min_size")] + ["library"]


def tokenizations_page() -> str:
    rows = [[code(cls.form()), *(_cell(cls, trait) for trait in SHOWN)] for cls in FAMILIES.loaded().values()]
    sizes = [[code(cls.form()), f"{cls.min_size:,}", text(cls.min_size_why)]
             for cls in FAMILIES.loaded().values() if cls.min_size is not None]
    meanings = "\n\n".join(f"{title}\n:   {meaning}" for title, meaning in (COLUMNS[t] for t in [*SHOWN, "min_size"]))
    return "\n\n".join([
        NO_CONTENTS, "# Tokenization families",
        generated_from("the scheme classes registered in `tokenizers_study.registry`"), INTRO,
        table(["Scheme", *(COLUMNS[trait][0] for trait in SHOWN)], rows),
        table(["Scheme", COLUMNS["min_size"][0], "Why"], sizes), meanings]) + "\n"


def _cell(cls: type[Tokenizer], trait: str) -> str:
    value = getattr(cls, trait)
    if trait == "library" and value is not None:
        return code(value)
    if trait == "lossless_scheme" and not value:
        return "**no**"  # a closed vocabulary: never compared
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else text(str(value))
