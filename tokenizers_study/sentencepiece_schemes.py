"""``sp-bpe:N`` and ``sp-unigram:N``: sentencepiece models with byte fallback.

Trained with settings that make the model lossless and deterministic:
identity normalization (no NFKC), no dummy prefix, no whitespace collapsing,
byte fallback for characters outside the learned pieces, one thread. N is
sentencepiece's vocabulary size, which counts ``<unk>``, ``<bos>`` and the 256
byte pieces.

sentencepiece holds its whole input several times over (about 30 bytes per
character), so a train split of more than :data:`SAMPLE_CHARS` characters is
sampled: every k-th line, k = ceil(characters / SAMPLE_CHARS), with no random
draw. The sample is part of the tokenizer's identity: its state (and so its
hash) records k and the lines used. enwik8 (90 MB of train) and WikiText-2 are
used whole; WikiText-103 (540 MB) is every 6th line.

sentencepiece trains on sentences, here the lines of the train split, so it
never sees a newline; a newline is encoded as its byte piece between lines.
A literal U+2581 (sentencepiece's own whitespace mark) and undecodable bytes
are also spelled as byte pieces, so that decoding is exact.

sentencepiece does not learn the characters of its unknown piece's surface
from text that contains that surface (with the default ``<unk>``, WikiText's
``<`` and ``>`` would all fall back to bytes), so the unknown piece is named
``<sp-unk>``; with byte fallback it is never produced.
"""

from __future__ import annotations

import base64
import re
from functools import cached_property

import numpy as np

from tokenizers_study.base import BOS, SchemeSpec, Tokenizer
from tokenizers_study.errors import TokenizerError
from tokenizers_study.hf_json import with_bos
from tokenizers_study.text import line_blocks

SAMPLE_CHARS = 100_000_000  # a train split of more characters is sampled (see the module's docstring)
_SPACE_MARK = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")


class _SentencePieceTokenizer(Tokenizer):
    library = "sentencepiece"
    model_type: str
    min_size = 300
    min_size_why = "256 byte pieces, <unk>, <bos> and some learned pieces"
    lossless_scheme = True
    swept = True
    pretrained = False
    escape_pattern = re.compile(r"[\udc80-\udcff\u2581]+")

    def __init__(self, spec: SchemeSpec, model_proto: bytes, sample: dict | None = None):
        super().__init__(spec)
        import sentencepiece as spm

        self.model_proto = model_proto
        self.sample = sample  # how the train split was sampled (None: used whole)
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def _train(cls, spec: SchemeSpec, text: str) -> "_SentencePieceTokenizer":
        import io

        import sentencepiece as spm

        clean = cls.escape_pattern.sub("", text)
        every = max(1, -(-len(clean) // SAMPLE_CHARS))  # k: 1 keeps every line
        lines, seen = [], 0
        for block in line_blocks(clean):
            for line in block.split("\n"):
                if line and seen % every == 0:
                    lines.append(line)
                seen += bool(line)
        sample = None if every == 1 else {"every_kth_line": every, "lines": len(lines), "of_lines": seen,
                                          "chars": sum(map(len, lines)), "rule": f"lines 0, k, 2k, ... of the "
                                          f"non-empty lines; k = ceil(characters / {SAMPLE_CHARS:,})"}
        longest = max((len(line.encode("utf-8")) for line in lines), default=1)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_writer=model,
                model_type=cls.model_type,
                vocab_size=spec.size,
                byte_fallback=True,
                character_coverage=0.9995,
                normalization_rule_name="identity",
                add_dummy_prefix=False,
                remove_extra_whitespaces=False,
                allow_whitespace_only_pieces=True,
                split_digits=False,
                max_sentence_length=max(longest, 4192),
                input_sentence_size=0,
                shuffle_input_sentence=False,
                num_threads=1,
                unk_id=0,
                bos_id=1,
                eos_id=-1,
                pad_id=-1,
                bos_piece=BOS,
                unk_piece="<sp-unk>",
                minloglevel=2,
            )
        except RuntimeError as exc:
            needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
            if needed:  # N must hold every character of the train split (with byte fallback's pieces)
                raise TokenizerError(f"{spec.name} needs N of at least {needed.group(1)}: the train split's characters "
                                     f"and the special pieces do not fit in {spec.size}; raise N") from None
            raise TokenizerError(f"sentencepiece could not train {spec.name}: {exc}".splitlines()[0]
                                 + "; try a smaller N or a larger train split") from None
        return cls(spec, model.getvalue(), sample)

    def state(self) -> dict:
        state = {"model_proto_base64": base64.b64encode(self.model_proto).decode("ascii")}
        return state if self.sample is None else {**state, "sentence_sample": self.sample}

    @classmethod
    def from_state(cls, spec: SchemeSpec, state: dict) -> "_SentencePieceTokenizer":
        return cls(spec, base64.b64decode(state["model_proto_base64"]), state.get("sentence_sample"))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id()

    @cached_property
    def _byte_ids(self) -> list[int]:
        return [self.sp.piece_to_id(f"<0x{b:02X}>") for b in range(256)]

    def byte_id(self, value: int) -> int:
        return self._byte_ids[value]

    @cached_property
    def _id_bytes(self) -> list[bytes]:
        table = []
        for i in range(self.vocab_size):
            piece = self.sp.id_to_piece(i)
            byte = _BYTE_PIECE.fullmatch(piece) if self.sp.is_byte(i) else None
            if byte:
                table.append(bytes([int(byte.group(1), 16)]))
            elif self.sp.is_control(i) or self.sp.is_unknown(i):
                table.append(b"")
            else:
                table.append(piece.replace(_SPACE_MARK, " ").encode("utf-8"))
        return table

    def _encode(self, text: str) -> np.ndarray:
        """The lines of about a MB of text at a time (the library's lists of ints for a whole split held GBs), a
        newline's byte piece between lines; every block ends after a newline, so the blocks' ids join exactly."""
        newline = self.byte_id(10)
        pieces = [np.zeros(0, dtype=np.int32)]
        for block in line_blocks(text):
            ids: list[int] = []
            for k, line_ids in enumerate(self.sp.encode(block.split("\n"))):
                if k:
                    ids.append(newline)
                ids.extend(line_ids)
            pieces.append(np.array(ids, dtype=np.int32))
        return np.concatenate(pieces)

    def decode(self, ids) -> str:
        return self.table_text(ids)


class SentencePieceBPETokenizer(_SentencePieceTokenizer):
    family = "sp-bpe"
    title = "SentencePiece BPE"
    sort_rank = 3
    model_type = "bpe"

    def hf_tokenizer_json(self) -> str:
        """The library's BPE with sentencepiece's merges: a piece is made of two pieces in the order of its score,
        as sentencepiece merges the adjacent pair whose piece scores highest; spaces become U+2581 and each line
        break is its own byte piece. It cannot take a literal U+2581, which the scheme spells in bytes."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, normalizers, pre_tokenizers

        sp = self.sp
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        ordinary = {piece: i for i, piece in enumerate(pieces)
                    if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i))}
        merges = sorted((i, ordinary[piece[:k]], piece[:k], piece[k:]) for piece, i in ordinary.items()
                        for k in range(1, len(piece)) if piece[:k] in ordinary and piece[k:] in ordinary)
        hf = HFTokenizer(models.BPE(vocab={piece: i for i, piece in enumerate(pieces)},
                                    merges=[(a, b) for *_, a, b in merges], byte_fallback=True,
                                    unk_token=pieces[sp.unk_id()]))
        hf.normalizer = normalizers.Replace(" ", _SPACE_MARK)
        hf.pre_tokenizer = pre_tokenizers.Split("\n", behavior="isolated")
        hf.decoder = decoders.Sequence([decoders.Replace(_SPACE_MARK, " "), decoders.ByteFallback(), decoders.Fuse()])
        hf.add_special_tokens([BOS])
        return with_bos(hf, self.bos_id)


class SentencePieceUnigramTokenizer(_SentencePieceTokenizer):
    """No tokenizer.json (``hf_tokenizer_json``): the library's unigram model breaks ties between equally scored
    segmentations otherwise (WikiText-2's test "VIII" as V, I, II where sentencepiece gives V, II, I)."""

    family = "sp-unigram"
    title = "SentencePiece unigram"
    sort_rank = 4
    model_type = "unigram"
