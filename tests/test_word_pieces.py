"""Which word each token belongs to (bench.study.stats.analysis.word_of_tokens, the report's piece profiles) and how
many bytes a word scheme's token decodes to (words.byte_lengths): both vectorised, checked here against plain
loops over the tokens, on text with runs of spaces, tabs, line breaks and Unicode spaces."""

import re

import numpy as np
import pytest

from bench.study.stats.analysis import word_of_tokens
from tokenizers_study.registry import train_tokenizer
from tokenizers_study.text import text_bytes

AWKWARD = " = Zürich = \n \n  two  spaces\tand a tab\u00a0no-break\u3000ideographic ok \n\nend . "


def words_by_loop(tokenizer, ids) -> list[int]:
    """Each token's word: the whitespace-separated word holding its first non-whitespace byte, or -1."""
    text = tokenizer.decode(ids)
    spans, at = [], 0
    for match in re.finditer(r"\S+", text):
        start = len(text_bytes(text[:match.start()]))
        spans.append((start, start + len(text_bytes(match.group()))))
    data, out, offset = text_bytes(text), [], 0
    for length in tokenizer.byte_lengths(ids):
        solid = next((p for p in range(offset, offset + length) if data[p] > 0x20), None)
        out.append(next((k for k, (a, b) in enumerate(spans) if a <= solid < b), -1) if solid is not None else -1)
        offset += length
    return out


def byte_lengths_by_loop(tokenizer, ids) -> list[int]:
    """Bytes of each token: the decoded text grows by them, an implicit space going with the word after it."""
    return [len(text_bytes(tokenizer.decode(ids[:k + 1]))) - len(text_bytes(tokenizer.decode(ids[:k])))
            for k in range(len(ids))]


@pytest.mark.parametrize("scheme", ["byte", "bpe:300", "word-open:40", "word:40", "char"])
def test_each_token_belongs_to_the_word_of_its_first_solid_byte(scheme, corpus_text):
    tokenizer = train_tokenizer(scheme, corpus_text)
    for text in (AWKWARD, corpus_text[:3000]):
        ids = tokenizer.encode(text)
        assert word_of_tokens(tokenizer, ids).tolist() == words_by_loop(tokenizer, ids)


@pytest.mark.parametrize("scheme", ["word-open:40", "word:40"])
def test_word_scheme_byte_lengths_are_what_decoding_adds(scheme, corpus_text):
    tokenizer = train_tokenizer(scheme, corpus_text)
    for text in (AWKWARD, "unknownword alone", corpus_text[:1500]):
        ids = np.concatenate([[tokenizer.bos_id], tokenizer.encode(text), [tokenizer.bos_id], tokenizer.encode(text)])
        assert tokenizer.byte_lengths(ids).tolist() == byte_lengths_by_loop(tokenizer, ids)
    assert tokenizer.byte_lengths(np.zeros(0, dtype=np.int64)).tolist() == []
