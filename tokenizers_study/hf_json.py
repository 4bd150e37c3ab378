"""What every scheme's ``tokenizers`` library file (``tokenizer.json``) shares: ``<bos>`` before each encoding, the
document start every text is scored from.

Two inputs such a file cannot take as the scheme does: undecodable bytes (they cannot cross into Rust) and a
literal ``<bos>`` in the text, which the scheme spells in ordinary tokens and the library reads as the special token
(transformers' ``split_special_tokens`` reads it as text, but not with the scheme's ids).
"""

from __future__ import annotations

from tokenizers_study.base import BOS


def with_bos(tokenizer, bos_id: int) -> str:
    """``tokenizer`` (a ``tokenizers.Tokenizer``) with ``<bos>`` put before every encoding, as JSON text."""
    from tokenizers import processors

    tokenizer.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos_id)])
    return tokenizer.to_str()
