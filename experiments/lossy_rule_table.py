"""The one rule of "lossy" (tokenizers_study.lossless_on), measured where it must fire and where it must not:
each case's scheme trait, whether decoding gave its text back, the old rule (the measurement alone) and the rule.

    python experiments/lossy_rule_table.py --data-dir DATA > results/reference/lossy-rule.md

DATA holds WikiText-2 (bench data fetch wikitext-2); the toy text and the Hugging Face tokenizers are made here.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from bench.data.cache import cached_tokenizer
from bench.data.store import open_split
from tokenizers_study import FAMILIES, is_closed_vocabulary, lossless_on, parse_scheme, train_tokenizer

WORDS = [f"w{i}" for i in range(40)]


def toy_text(lines: int, seed: int) -> str:
    """Fewer distinct words than word:60 keeps: a closed vocabulary covers it."""
    rng = random.Random(seed)
    return "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + " .\n" for _ in range(lines))


def hf_files(folder: Path, train: str) -> dict[str, Path]:
    """Two tokenizer files made with Hugging Face tokenizers: an uncased WordPiece (it lowercases: lossy on a text
    with capitals) and a byte-level BPE (nothing normalised)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.Lowercase()
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.train_from_iterator(train.splitlines(), trainers.WordPieceTrainer(vocab_size=2000,
                                                                                special_tokens=["[UNK]"]))
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(train.splitlines(keepends=True), trainers.BpeTrainer(
        vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    paths = {"uncased-wordpiece": folder / "uncased-wordpiece.json", "byte-level-bpe": folder / "byte-level-bpe.json"}
    wordpiece.save(str(paths["uncased-wordpiece"]))
    bpe.save(str(paths["byte-level-bpe"]))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args()
    wt2_train = open_split("wikitext-2", "train", args.data_dir).read_text()
    wt2_test = open_split("wikitext-2", "test", args.data_dir).read_text()
    toy_train, toy_test = toy_text(300, 0), toy_text(40, 2)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        files = hf_files(Path(scratch), wt2_train[:2_000_000])
        cases = [(scheme, "WikiText-2 test", lambda s=scheme: cached_tokenizer(s, "wikitext-2", args.data_dir), wt2_test,
                  expected) for scheme, expected in (("byte", True), ("bpe:1024", True), ("word-open:2048", True),
                                                     ("word:2048", False))]
        cases += [(scheme, "toy test (40 words)", lambda s=scheme: train_tokenizer(s, toy_train), toy_test, expected)
                  for scheme, expected in (("word-open:60", True), ("word:60", False))]
        cases += [(f"hf:{name}", "WikiText-2 test", lambda p=path: load_tokenizer_file(p), wt2_test, expected)
                  for (name, path), expected in zip(files.items(), (False, True))]
        for scheme, text_name, make, text, expected in cases:
            tokenizer = make()
            back = tokenizer.loss_report(text).lossless
            rule = lossless_on(tokenizer.spec.name, back)
            rows.append({"scheme": scheme, "text": text_name,
                         "vocabulary (class trait)": "closed" if is_closed_vocabulary(tokenizer.spec.name) else "open",
                         "decoding gives the text back": "yes" if back else "no",
                         "old rule (measured alone)": "compared" if back else "not compared",
                         "lossless_on": "compared" if rule else "not compared",
                         "must be": "compared" if expected else "not compared",
                         "right": "yes" if rule == expected else "NO"})
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")


def load_tokenizer_file(path: Path):
    spec = parse_scheme(f"hf:{path}")
    return FAMILIES[spec.family].load(spec)


if __name__ == "__main__":
    main()
