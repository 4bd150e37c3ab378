"""``bench tokenize stats``: every scheme on every split of one corpus."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.data.cache import cached_tokenizer, save_encoded
from bench.data.manifest import STATUS_USER
from bench.data.store import SplitData, open_split
from bench.provenance import git_commit, library_versions
from bench.text_tables import markdown_table, text_table
from tokenizers_study.stats import SchemeStats, scheme_stats

STATS_TITLE = "# Tokenization statistics"  # the first line of the Markdown report
# Its last line: what `--out` replaces is a report of this command, unchanged since (a title proves nothing: a
# user's notes may start with it)
MARK_START, MARK_END = "<!-- written by bench tokenize stats; sha256 of the text above: ", " -->\n"

COLUMNS = ["scheme", "split", "vocab_size", "tokens", "bytes_per_token", "chars_per_token", "tokens_per_word",
           "unk_rate", "fallback_rate", "lossless", "lost_words", "lost_bytes", "unigram_entropy_bits",
           "unigram_entropy_bits_per_byte", "renyi_efficiency", "vocab_used", "mb_per_s", "verified"]


@dataclass
class StatsResult:
    dataset: str
    records: list[SchemeStats]
    splits: dict[str, SplitData]


def run_stats(dataset: str, schemes: list[str], splits: tuple[str, ...], data_dir: str | Path | None) -> StatsResult:
    opened = {s: open_split(dataset, s, data_dir) for s in dict.fromkeys(("train",) + tuple(splits))}
    texts = {s: opened[s].read_text() for s in splits}
    records = []
    for scheme in schemes:
        tokenizer = cached_tokenizer(scheme, dataset, train=opened["train"])
        for split in splits:
            print(f"measuring {scheme} on {dataset} {split}", file=sys.stderr)
            stats, ids = scheme_stats(tokenizer, texts[split], split)
            # A scheme trained on unverified data is as unverified as the split it encodes (one loaded: not).
            stats.verified = opened[split].verified and (tokenizer.pretrained or opened["train"].verified)
            save_encoded(opened[split], tokenizer, ids)
            records.append(stats)
    return StatsResult(dataset, records, {s: opened[s] for s in opened})


def stats_table(result: StatsResult) -> str:
    return text_table([r.to_json() for r in result.records], COLUMNS) + "\n" + _notes(result)


def _notes(result: StatsResult) -> str:
    lines = []
    unverified = [s for s, d in result.splits.items() if not d.verified and d.status != STATUS_USER]
    user = [s for s, d in result.splits.items() if d.status == STATUS_USER]
    if user:
        lines.append(f"USER CORPUS: {result.dataset} has no official copy; its rows say verified: NO (compare them "
                     "only with measurements of the same files, by their sha256).")
    if unverified:
        lines.append(f"UNVERIFIED data: {result.dataset} {', '.join(unverified)} "
                     "is not the official file; every row computed from it says verified: NO "
                     "(tokenizers are trained on train, so an unverified train split marks every row of a scheme "
                     "trained here; a pretrained scheme's rows follow their own split).")
    lossy = sorted({r.scheme for r in result.records if not r.lossless})
    if lossy:
        lines.append(f"LOSSY: {', '.join(lossy)} cannot give the text back (lost_words: words that do not "
                     "decode back, e.g. as <unk>; lost_bytes: bytes of the split that decoding does not give "
                     "back); numbers computed under them are not comparable with lossless schemes.")
    return "\n".join(lines)


def stats_markdown(result: StatsResult) -> str:
    commit = git_commit()
    data_rows = [d.provenance() for d in result.splits.values()]
    parts = [
        f"{STATS_TITLE}: {result.dataset}",
        "",
        "Every scheme is trained on the train split only (a pretrained `hf:` or `spm:` scheme is loaded, never "
        "trained). `tokens_per_*` divide the token count by the split's "
        "UTF-8 bytes, Unicode characters and whitespace-separated words; `unk_rate` is the share of tokens that "
        "are `<unk>`; `fallback_rate` the share that are byte-fallback tokens; `lossless` says whether "
        "decoding gives the split back byte for byte, and if not `lost_words` (words that do not decode back, "
        "as `<unk>` or changed) and `lost_bytes` (bytes of the split that decoding does not give back); "
        "`unigram_entropy_bits` is the Shannon entropy of the tokens' unigram distribution and "
        "`renyi_efficiency` its Rényi entropy of order 2.5 divided by log2 of the vocabulary size (Zouhar et al. "
        "2023); `mb_per_s` is encoding throughput (10^6 bytes/s).",
        "",
        markdown_table([r.to_json() for r in result.records], COLUMNS),
        "",
        _notes(result),
        "",
        "## Provenance",
        "",
        f"- git commit: `{commit['commit']}`" + (" (uncommitted changes)" if commit["dirty"] else ""),
        "- libraries: " + ", ".join(f"{k} {v}" for k, v in library_versions().items()),
        "",
        markdown_table(data_rows, ["corpus", "split", "size", "sha256", "status", "verified"]),
        "",
        "Tokenizer hashes (sha256 of the saved tokenizer): "
        + ", ".join(sorted({f"`{r.scheme}` {r.tokenizer_hash[:16]}" for r in result.records})),
        "",
    ]
    text = "\n".join(parts)
    return text + MARK_START + hashlib.sha256(text.encode()).hexdigest() + MARK_END


def own_report(path: Path) -> bool:
    """Whether ``path`` is a report of this command as it wrote it: its last line records the sha256 of the rest."""
    mark_size = len((MARK_START + "0" * 64 + MARK_END).encode())
    if path.is_symlink() or not path.is_file():  # refused by --out's checks; a FIFO is never opened
        return False
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - mark_size, 0))
            mark = handle.read().decode("ascii", "replace")
            if size < mark_size or not (mark.startswith(MARK_START) and mark.endswith(MARK_END)):
                return False  # not read further: a large file of the user's is not hashed
            handle.seek(0)
            return hashlib.sha256(handle.read(size - mark_size)).hexdigest() == mark[len(MARK_START):-len(MARK_END)]
    except OSError:
        return False
