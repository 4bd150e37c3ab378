"""The tokenizer of a model trained with the tokenization benchmark (``bench``), for transformers'
``trust_remote_code``: for schemes the ``tokenizers`` library cannot express exactly (open-vocabulary words spell an
unknown word as ``<oov>`` and its bytes; closed-vocabulary words, which lose such words as ``<unk>``;
sentencepiece's line handling).

It runs the scheme's own code, written beside this file by ``bench export``, on ``bench_tokenizer.json``: the ids
are those ``bench`` gave the model, and decoding gives the text back wherever the scheme is lossless. Each
encoding starts with ``<bos>``, the document start every text is scored from.
"""

from __future__ import annotations

import os

from transformers import PreTrainedTokenizer

from .bench_plugins import PLUGINS  # noqa: F401  (first: a plug-in scheme is registered before the file is read)
from .tokenizers_study_registry import tokenizer_from_bytes

VOCAB_FILE = "bench_tokenizer.json"


class BenchTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": VOCAB_FILE}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file: str, **kwargs):
        with open(vocab_file, "rb") as handle:
            self.vocab_bytes = handle.read()
        self.scheme = tokenizer_from_bytes(self.vocab_bytes)
        self.names = token_names(self.scheme)
        self.ids = {name: i for i, name in enumerate(self.names)}
        kwargs.setdefault("bos_token", self.names[self.scheme.bos_id])
        kwargs.setdefault("split_special_tokens", True)  # a literal "<bos>" in a text is text, as in bench
        super().__init__(**kwargs)

    @property
    def vocab_size(self) -> int:
        return self.scheme.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return dict(self.ids)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return [self.names[i] for i in self.scheme.encode(text).tolist()]

    def _convert_token_to_id(self, token: str) -> int:
        return self.ids[token]

    def _convert_id_to_token(self, index: int) -> str:
        return self.names[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return self.scheme.decode([self.ids[t] for t in tokens])

    def _decode(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        return self.scheme.decode([i for i in ids if i != self.scheme.bos_id])

    def build_inputs_with_special_tokens(self, token_ids_0: list[int], token_ids_1: list[int] | None = None):
        if token_ids_1 is not None:
            raise ValueError("one text at a time: a pair has no meaning for a language model's scoring")
        return [self.scheme.bos_id] + token_ids_0

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILE)
        with open(path, "wb") as handle:
            handle.write(self.vocab_bytes)
        return (path,)


def token_names(scheme) -> list[str]:
    """A distinct name for each id: the text it decodes to alone, else (empty or taken) ``<0xNN>`` for a byte
    token and ``<id:N>`` for any other."""
    names: list[str] = []
    taken: set[str] = set()
    byte_of = {}
    for value in range(256):
        try:
            byte_of[scheme.byte_id(value)] = value
        except ValueError:  # a closed vocabulary has no byte tokens
            break
    for i in range(scheme.vocab_size):
        if i == scheme.bos_id:
            name = "<bos>"
        elif i in byte_of:
            name = f"<0x{byte_of[i]:02X}>"
        else:
            name = scheme.decode([i]) or f"<id:{i}>"
        if name in taken:
            name = f"<id:{i}>"
        taken.add(name)
        names.append(name)
    return names
