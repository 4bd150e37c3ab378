"""Tokenizers trained elsewhere, as schemes: ``hf:PATH`` (a HuggingFace ``tokenizer.json``, or a folder
holding one) and ``spm:PATH`` (a sentencepiece ``.model``).

They are loaded, never retrained: their identity is the sha256 of the file. Losslessness is measured, not
assumed: many normalise text (NFKC, lower-casing, whitespace, a dummy prefix) or map characters to
``<unk>``, and ``loss_report`` says so. Text that spells one of their special tokens (``<|endoftext|>``) is
encoded as text, never as the special token. Where a tokenizer has no token to start a document from, one
more id, ``<bos>``, is added after its vocabulary.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import cached_property
from pathlib import Path

import numpy as np

from tokenizers_study.base import BOS, LossReport, SchemeSpec, Tokenizer, lost_bytes, lost_words
from tokenizers_study.bpe import byte_symbols
from tokenizers_study.errors import TokenizerError

START_TOKENS = ("<|endoftext|>", "<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def read_pretrained(spec: SchemeSpec, name: str) -> bytes:
    """The bytes of a pretrained tokenizer's file (``name`` inside the folder when the path is a folder)."""
    path = Path(spec.path)
    if path.is_dir():
        path = path / name
    if not path.is_file():
        raise TokenizerError(f"{spec.name}: no tokenizer file at {path}; give the file or a folder holding {name}")
    return path.read_bytes()


class _Pretrained(Tokenizer):
    # A file trained elsewhere: named by its path, not a size; lossless unless it normalises the text, which is
    # measured on each scored text (registry.lossless_on)
    min_size = None
    lossless_scheme = True
    sort_rank = 9  # after the schemes trained here
    swept = False
    pretrained = True
    escape_pattern = re.compile(r"[\udc80-\udcff]+")  # undecodable bytes: spelled in byte tokens where possible

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "Tokenizer":
        return cls.load(spec)

    @classmethod
    def load(cls, spec: SchemeSpec) -> "Tokenizer":
        raise NotImplementedError

    @property
    def hash(self) -> str:
        """The sha256 of the file: the same tokenizer whatever path names it."""
        return self.file_sha256

    def byte_id(self, value: int) -> int:
        byte_ids = self._byte_ids
        return byte_ids[value] if byte_ids else (self.unk_id if self.unk_id is not None else self.bos_id)

    def fallback_ids(self) -> np.ndarray:
        return np.asarray([i for i in self._byte_ids if i is not None], dtype=np.int64)

    def decode(self, ids) -> str:
        return self.table_text(ids)

    def pieces_text(self, ids) -> str:
        return self.table_text(ids)


class HFTokenizerFile(_Pretrained):
    family = "hf"
    title = "a Hugging Face tokenizer file"
    library = "tokenizers"

    def __init__(self, spec: SchemeSpec, tokenizer_json: str):
        super().__init__(spec)
        from tokenizers import Tokenizer as HFTokenizer

        self.tokenizer_json = tokenizer_json
        self.file_sha256 = hashlib.sha256(tokenizer_json.encode("utf-8")).hexdigest()
        try:
            self.hf = HFTokenizer.from_str(tokenizer_json)
        except Exception as exc:  # the tokenizers library raises a bare Exception for a file it cannot read
            raise TokenizerError(f"{spec.name}: the file is not a HuggingFace tokenizer.json "
                                 f"({str(exc).splitlines()[0][:120]}); give a tokenizer.json saved by "
                                 f"`tokenizers` or `transformers`") from None
        doc = json.loads(tokenizer_json)
        self.unk_token = doc.get("model", {}).get("unk_token")
        self.specials = [t["content"] for t in doc.get("added_tokens", []) if t.get("special")]
        doc["added_tokens"] = [t for t in doc.get("added_tokens", []) if not t.get("special")]
        self.encoder = HFTokenizer.from_str(json.dumps(doc))  # matches no special token in the text
        for tokenizer in (self.hf, self.encoder):  # a file saved for a model may cut or pad every text
            tokenizer.no_truncation()
            tokenizer.no_padding()
        self.byte_level = "ByteLevel" in json.dumps(doc.get("decoder"))
        ids = sorted(set(self.hf.get_vocab(with_added_tokens=True).values()))
        if ids != list(range(len(ids))):  # an embedding has a row per id: the ids must be 0..N-1
            raise TokenizerError(f"{spec.name}: its token ids are not 0..N-1 ({len(ids):,} tokens, largest id "
                                 f"{ids[-1] if ids else 'none'}); give a tokenizer whose ids are contiguous")

    @classmethod
    def load(cls, spec: SchemeSpec) -> "HFTokenizerFile":
        try:
            return cls(spec, read_pretrained(spec, "tokenizer.json").decode("utf-8"))
        except UnicodeDecodeError:
            raise TokenizerError(f"{spec.name}: the file is not text, so not a tokenizer.json") from None

    def state(self) -> dict:
        return {"tokenizer_json": self.tokenizer_json}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "HFTokenizerFile":
        return cls(spec, state["tokenizer_json"])

    @cached_property
    def _own_bos(self) -> int | None:
        return next((self.hf.token_to_id(t) for t in START_TOKENS if self.hf.token_to_id(t) is not None), None)

    def hf_tokenizer_json(self) -> str:
        """The file as this scheme encodes with it: no truncation or padding, its special tokens never read in the
        text, and its start token (or ``<bos>``, one id past its vocabulary) before every encoding."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import processors

        tokenizer = HFTokenizer.from_str(self.encoder.to_str())
        start = next((t for t in START_TOKENS if self.hf.token_to_id(t) is not None), BOS)
        tokenizer.post_processor = processors.TemplateProcessing(single=f"{start} $A",
                                                                 special_tokens=[(start, self.bos_id)])
        return tokenizer.to_str()

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True) + (self._own_bos is None)

    @property
    def bos_id(self) -> int:
        return self._own_bos if self._own_bos is not None else self.hf.get_vocab_size(with_added_tokens=True)

    @property
    def unk_id(self) -> int | None:
        return self.hf.token_to_id(self.unk_token) if self.unk_token else None

    @cached_property
    def _byte_ids(self) -> list[int | None]:
        if self.byte_level:
            return [self.hf.token_to_id(s) for s in byte_symbols()]
        ids = [self.hf.token_to_id(f"<0x{b:02X}>") for b in range(256)]
        return ids if all(i is not None for i in ids) else []

    @cached_property
    def _id_bytes(self) -> list[bytes]:
        """What each id stands for in the text (specials and the added <bos>: nothing)."""
        to_byte = {s: b for b, s in enumerate(byte_symbols())}
        table = [b""] * self.vocab_size
        for token, i in self.hf.get_vocab(with_added_tokens=True).items():
            if token in self.specials:
                continue
            if self.byte_level:
                table[i] = bytes(to_byte[c] for c in token if c in to_byte)
            elif byte := _BYTE_PIECE.fullmatch(token):
                table[i] = bytes([int(byte.group(1), 16)])
            else:
                table[i] = token.replace("\u2581", " ").removeprefix("##").encode("utf-8")
        return table

    def fallback_ids(self) -> np.ndarray:
        if self.byte_level:
            return np.zeros(0, dtype=np.int64)  # byte symbols are ordinary tokens of a byte-level BPE
        return super().fallback_ids()

    def _encode(self, text: str) -> np.ndarray:
        return np.asarray(self.encoder.encode(text, add_special_tokens=False).ids, dtype=np.int32)

    def loss_report(self, text: str, ids: np.ndarray | None = None) -> LossReport:
        """As the base class; a tokenizer whose decoding drops line breaks (WordPiece) is aligned line by line,
        each line encoded apart, and the line breaks it drops counted as lost."""
        decoded_lines = self.decode(self.encode(text) if ids is None else ids).count("\n")
        if decoded_lines == text.count("\n"):
            return super().loss_report(text, ids)
        lines = text.split("\n")
        back = [self.hf.decode(e.ids, skip_special_tokens=False)
                for e in self.encoder.encode_batch(lines, add_special_tokens=False)]
        lost = len(lines) - 1 - decoded_lines + sum(lost_bytes(a, b) for a, b in zip(lines, back) if a != b)
        words = sum(lost_words(a, b) for a, b in zip(lines, back) if a != b)
        dropped = len(lines) - 1 - decoded_lines
        return LossReport(False, lost_words=words, lost_bytes=lost,
                          detail=f"decoding drops {dropped} line breaks (the lines measured one by one)")

    def decode(self, ids) -> str:
        if self.byte_level:
            return super().decode(ids)
        ids = [i for i in np.asarray(ids).tolist() if i < self.hf.get_vocab_size(with_added_tokens=True)]
        return self.hf.decode(ids, skip_special_tokens=False)


class SentencePieceModelFile(_Pretrained):
    family = "spm"
    title = "a SentencePiece model file"
    library = "sentencepiece"

    def __init__(self, spec: SchemeSpec, model: bytes):
        super().__init__(spec)
        import sentencepiece as spm

        self.model = model
        self.file_sha256 = hashlib.sha256(model).hexdigest()
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=model)
            if not self.sp.get_piece_size():  # an empty file parses as an empty model
                raise RuntimeError
        except RuntimeError:
            raise TokenizerError(f"{spec.name}: the file is not a sentencepiece model; give a .model file "
                                 f"written by sentencepiece") from None

    @classmethod
    def load(cls, spec: SchemeSpec) -> "SentencePieceModelFile":
        return cls(spec, read_pretrained(spec, "tokenizer.model"))

    def state(self) -> dict:
        return {"model": base64.b64encode(self.model).decode("ascii")}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "SentencePieceModelFile":
        return cls(spec, base64.b64decode(state["model"]))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size() + (self.sp.bos_id() < 0) + self._added_newline

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id() if self.sp.bos_id() >= 0 else self.sp.get_piece_size()

    @property
    def unk_id(self) -> int | None:
        return self.sp.unk_id() if self.sp.unk_id() >= 0 else None

    @cached_property
    def _byte_ids(self) -> list[int | None]:
        ids = [self.sp.piece_to_id(f"<0x{b:02X}>") for b in range(256)]
        return ids if all(self.sp.is_byte(i) for i in ids) else []

    @cached_property
    def _added_newline(self) -> bool:
        """A model with neither a line-break piece nor byte pieces gets one more id for the line break."""
        return not self._byte_ids and self.sp.piece_to_id("\n") == self.sp.unk_id()

    @cached_property
    def _newline_id(self) -> int:
        if self._byte_ids:
            return self._byte_ids[10]
        if self._added_newline:
            return self.sp.get_piece_size() + (self.sp.bos_id() < 0)
        return self.sp.piece_to_id("\n")

    @cached_property
    def _id_bytes(self) -> list[bytes]:
        table = [b""] * self.vocab_size
        for i in range(self.sp.get_piece_size()):
            piece = self.sp.id_to_piece(i)
            if self.sp.is_byte(i):
                table[i] = bytes([int(_BYTE_PIECE.fullmatch(piece).group(1), 16)])
            elif not (self.sp.is_control(i) or self.sp.is_unknown(i)):
                table[i] = piece.replace("\u2581", " ").encode("utf-8")
        table[self._newline_id] = b"\n"
        return table

    def _encode(self, text: str) -> np.ndarray:
        """Line by line (sentencepiece reads lines), joined by the newline's token."""
        pieces = []
        for k, ids in enumerate(self.sp.encode(text.split("\n"))):
            if k:
                pieces.append([self._newline_id])
            pieces.append(ids)
        return np.asarray([i for part in pieces for i in part], dtype=np.int32)

    def decode(self, ids) -> str:
        """Each line decoded by sentencepiece itself (which undoes its dummy prefix), lines joined by newlines."""
        lines, line = [], []
        for i in np.asarray(ids).tolist():
            if i == self._newline_id:
                lines.append(self.sp.decode(line))
                line = []
            elif i < self.sp.get_piece_size():
                line.append(i)
        return "\n".join(lines + [self.sp.decode(line)])
