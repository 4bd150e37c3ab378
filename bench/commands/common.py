"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from bench.errors import BenchError
from bench.plugins import PLUGIN_HELP, load_plugins
from tokenizers_study import scheme_forms

DATA_DIR_HELP = "Data folder (default: $BENCH_DATA_DIR or ./data)."
MODEL_HELP = "Model family, e.g. sha-rnn (`bench models list` lists them all)."
PRESET_HELP = "Preset: tiny (seconds on CPU), small (minutes on CPU) or paper (GPU)."
SET_HELP = ("KEY=VALUE: override any model or training field of the preset (e.g. --set attention=all, "
            "--set max_steps=500, --set lr=1e-3). Repeatable; a key given twice takes its last value.")
TOKENIZER_HELP = (f"Tokenization scheme: {scheme_forms(installed=False)}, or a plug-in's (N: the vocabulary size; "
                  f"PATH: a pretrained tokenizer).")


def plugin_option() -> list[str]:
    """--plugin, loaded as soon as it is parsed (before any other option is checked), by bench.plugins."""
    return typer.Option([], "--plugin", metavar="MODULE|FILE.py", help=PLUGIN_HELP, callback=_load_plugins,
                        is_eager=True, show_default=False)


def _load_plugins(values: list[str] | None) -> list[str]:
    load_plugins(values or [])
    return values or []


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


PAIR_EXAMPLES = {"--file": "--file train=path/to/file", "--set": "--set lr=1e-3 (KEY=none unsets an optional "
                 "setting)"}


def parse_pairs(values: list[str], option: str) -> dict[str, str]:
    """KEY=VALUE options. A ``--set`` key given twice takes its last value (so a script can append overrides); any
    other option's key given twice (two files for one split) is refused rather than one silently dropped."""
    pairs = {}
    example = PAIR_EXAMPLES.get(option, f"{option} KEY=VALUE")
    for value in values:
        key, sep, rest = (part.strip() for part in value.partition("="))
        if not sep or not key:
            raise BenchError(f"{option} {value!r}: write it as KEY=VALUE, e.g. {example}")
        if not rest:
            raise BenchError(f"{option} {value!r} has no value: write it as KEY=VALUE, e.g. {example}")
        if key in pairs and option != "--set":
            raise BenchError(f"{option} {key} is given twice ({pairs[key]}, {rest}); give it once")
        pairs[key] = rest
    return pairs


def split_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def each_once(values: list[str] | tuple[str, ...], option: str) -> None:
    """A list option that names a value twice (``--splits valid,valid``, ``bpe:300,bpe:0300``) is refused: it
    would be measured again and printed twice."""
    repeated = sorted({v for v in values if list(values).count(v) > 1})
    if repeated:
        raise BenchError(f"{option} lists {', '.join(repeated)} more than once; give each once")


def split_schemes(text: str) -> tuple[str, ...]:
    """A comma-separated list of schemes, where an ``hf:`` or ``spm:`` path may itself hold commas: a piece that
    does not begin with a scheme's family continues the path before it."""
    from tokenizers_study import FAMILIES, is_pretrained, split_scheme_name

    schemes: list[str] = []
    for piece in text.split(","):
        if schemes and is_pretrained(schemes[-1]) and split_scheme_name(piece)[0] not in FAMILIES:
            schemes[-1] += "," + piece
        else:
            schemes.append(piece)
    return tuple(s.strip() for s in schemes if s.strip())


def metrics_table(metrics: dict[str, dict]) -> str:
    """Split metrics (JSON form) as a terminal table."""
    from bench.metrics import shown_metrics
    from bench.text_tables import text_table

    rows = [{"split": split, **values} for split, values in metrics.items()]
    columns = ["split", *(m.key for m in shown_metrics()), "n_tokens", "n_bytes", "lossless"]
    return text_table(rows, columns)


def print_metrics(corpus: str, metrics: dict[str, dict]) -> None:
    """The splits' metrics as a table and, on a corpus whose published bpc is per byte, which column that is."""
    from bench.metrics import field_convention

    print(metrics_table(metrics))
    convention = field_convention(corpus, metrics)
    if convention:
        print(f"NOTE: {convention}")


def print_comparability(comparable: bool, notes: list[str]) -> None:
    for note in notes:
        print(f"{'NOTE' if comparable else 'NOT COMPARABLE'}: {note}")
