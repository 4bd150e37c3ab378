"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from bench.errors import BenchError

DATA_DIR_HELP = "Data folder (default: $BENCH_DATA_DIR or ./data)."
MODEL_HELP = "Model: sha-rnn, lstm or transformer."
PRESET_HELP = "Preset: tiny (seconds on CPU), small (minutes on CPU) or paper (GPU)."
SET_HELP = ("KEY=VALUE: override any model or training field of the preset (e.g. --set attention=all, "
            "--set max_steps=500, --set lr=1e-3). Repeatable.")
TOKENIZER_HELP = "Tokenization scheme, e.g. byte, bpe:4096, word-open:33278, hf:PATH, spm:PATH."


def data_dir_option() -> Optional[Path]:
    return typer.Option(None, "--data-dir", help=DATA_DIR_HELP, show_default=False)


def sizing_tokenizer_option() -> Optional[str]:
    return typer.Option(None, "--tokenizer", help=TOKENIZER_HELP + " With --dataset: the vocabulary and "
                        "characters per token of the tokenized corpus.")


def sizing_dataset_option() -> Optional[str]:
    return typer.Option(None, "--dataset", help="Corpus for --tokenizer.")


def vocab_size_option() -> Optional[int]:
    return typer.Option(None, "--vocab-size", help="Vocabulary size without a corpus (default 256: bytes).")


def echo_err(message: str) -> None:
    print(message, file=sys.stderr)


def parse_pairs(values: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise BenchError(f"{option} {value!r}: write it as KEY=VALUE, e.g. {option} train=path/to/file")
        pairs[key.strip()] = rest.strip()
    return pairs


def split_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def split_schemes(text: str) -> tuple[str, ...]:
    """A comma-separated list of schemes, where an ``hf:`` or ``spm:`` path may itself hold commas: a piece that
    does not begin with a scheme's family continues the path before it."""
    from tokenizers_study import FAMILIES

    schemes: list[str] = []
    for piece in text.split(","):
        previous = FAMILIES.get(schemes[-1].strip().partition(":")[0]) if schemes else None
        if previous is not None and previous.pretrained and piece.strip().partition(":")[0] not in FAMILIES:
            schemes[-1] += "," + piece
        else:
            schemes.append(piece)
    return tuple(s.strip() for s in schemes if s.strip())


def metrics_table(metrics: dict[str, dict]) -> str:
    """Split metrics (JSON form) as a terminal table."""
    from bench.tables import text_table

    rows = [{"split": split, **values} for split, values in metrics.items()]
    columns = ["split", "bits_per_byte", "bits_per_char", "word_perplexity", "word_perplexity_eos",
               "token_perplexity", "n_tokens", "n_bytes", "lossless"]
    return text_table(rows, columns)


def print_comparability(comparable: bool, notes: list[str]) -> None:
    for note in notes:
        print(f"{'NOTE' if comparable else 'NOT COMPARABLE'}: {note}")
