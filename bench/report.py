"""``bench report RESULTS_DIR``: the study as ``report.md``, a self-contained ``report.html``
and every figure as PNG and SVG, under ``reports/<matrix>/``."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench import analysis, figures
from bench.errors import BenchError
from bench.fileio import write_text_atomic
from bench.tables import format_value, markdown_table

FLAG_NOTES = {
    "†": "unverified data: a split of this run does not match the official file",
    "‡": "lossy tokenization (closed vocabulary): not comparable with lossless schemes",
    "§": "user or derived corpus: no official reference; compare only within this study",
}


# ------------------------------------------------------------------------------------------ a document


@dataclass
class Document:
    """Blocks rendered twice: as Markdown and as one self-contained HTML page."""

    title: str
    blocks: list[tuple] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", level, text))

    def para(self, text: str) -> None:
        self.blocks.append(("para", text))

    def items(self, items: list[str]) -> None:
        self.blocks.append(("items", items))

    def table(self, rows: list[dict], columns: list[str], caption: str = "") -> None:
        self.blocks.append(("table", rows, columns, caption))

    def figure(self, name: str, png: bytes, caption: str) -> None:
        self.blocks.append(("figure", name, png, caption))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "para":
                out += [block[1], ""]
            elif kind == "items":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "table":
                rows, columns, caption = block[1:]
                if caption:
                    out += [f"*{caption}*", ""]
                out += [markdown_table(rows, columns) if rows else "(no rows)", ""]
            elif kind == "figure":
                name, _, caption = block[1:]
                out += [f"![{name}]({name}.png)", "", f"*{caption}* ([SVG]({name}.svg))", ""]
            elif kind == "code":
                out += ["```", block[1].rstrip(), "```", ""]
        return "\n".join(out)

    def html(self) -> str:
        esc = html.escape
        body = [f"<h1>{esc(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                body.append(f"<h{block[1]}>{esc(block[2])}</h{block[1]}>")
            elif kind == "para":
                body.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "items":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
            elif kind == "table":
                rows, columns, caption = block[1:]
                head = "".join(f"<th>{esc(c)}</th>" for c in columns)
                cells = "".join("<tr>" + "".join(f"<td>{esc(format_value(r.get(c)))}</td>" for c in columns)
                                + "</tr>" for r in rows)
                cap = f"<caption>{_inline(caption)}</caption>" if caption else ""
                body.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
            elif kind == "figure":
                name, png, caption = block[1:]
                data = base64.b64encode(png).decode("ascii")
                body.append(f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                            f"<figcaption>{_inline(caption)}</figcaption></figure>")
            elif kind == "code":
                body.append(f"<pre>{esc(block[1])}</pre>")
        style = ("body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;"
                 "padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;"
                 "font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
                 "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}caption{text-align:left;"
                 "font-style:italic;padding:4px 0}img{max-width:100%}figure{margin:1.5em 0}"
                 "figcaption{font-style:italic;font-size:13px}pre{background:#f6f6f6;padding:8px;overflow:auto;"
                 "font-size:12px}code{background:#f3f3f3;padding:0 3px}")
        return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(self.title)}</title>"
                f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _inline(text: str) -> str:
    """Markdown inline code (`x`) and bold (**x**) to HTML; everything else escaped."""
    out = html.escape(text)
    parts = out.split("`")
    out = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    parts = out.split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


# ------------------------------------------------------------------------------------------ loading


def load_runs(results_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """All rows of runs.csv, the finished ones with flags, and the axis columns."""
    path = results_dir / "runs.csv"
    if not path.is_file():
        raise BenchError(f"{path} does not exist; run `bench run-matrix CONFIG` first (or give its results folder)")
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if table.empty:
        raise BenchError(f"{path} has no runs")
    axes = list(table.columns[: list(table.columns).index("phase")])
    table["results_dir"] = str(results_dir)  # run folders are named relative to the results folder
    done = table[table["status"] == "done"].copy()
    if done.empty:
        raise BenchError(f"{path}: no run has finished yet; nothing to report")
    done["comparable_bool"] = done["comparable"].astype(str).str.lower() == "true"
    done["lossless_bool"] = done["test_lossless"].astype(str).str.lower() == "true"
    done["flags"] = [_flags(r) for _, r in done.iterrows()]
    return table, done, axes


def _flags(row) -> str:
    statuses = {str(row.get(f"data_status_{s}", "")) for s in ("train", "valid", "test")}
    flags = ""
    if "unverified" in statuses:
        flags += "†"
    if str(row.get("test_lossless", "")).lower() == "false":
        flags += "‡"
    if "user" in statuses:
        flags += "§"
    return flags


def _run_data(row) -> analysis.RunData:
    run_dir = Path(row["results_dir"]) / row["run_dir"]
    result = run_dir / "result.json"
    if not result.is_file():
        raise BenchError(f"runs.csv lists {row['run_dir']} as done but {result} does not exist; run `bench "
                         f"run-matrix` on the config again to rebuild runs.csv from the run folders")
    return analysis.RunData(dict(row), json.loads(result.read_text()), run_dir)


# ------------------------------------------------------------------------------------------ tables


def main_table(done: pd.DataFrame, axes: list[str], floors: dict) -> list[dict]:
    keys = [a for a in axes if a != "seed"] + ["phase"]
    rows = []
    for key, group in done.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key))
        row["seeds"] = len(group)
        for metric, label in (("test_bits_per_byte", "bits/byte"), ("test_bits_per_char", "bits/char"),
                              ("test_word_perplexity", "word ppl"), ("test_word_perplexity_eos", "word ppl (eos)"),
                              ("test_token_perplexity", "token ppl")):
            mean, half, _ = analysis.mean_ci(group[metric].tolist())
            row[label] = _with_ci(mean, half)
            row["_" + metric] = mean
        floor = floors.get((row["dataset"], row["tokenizer"]))
        if floor is not None:
            row["unigram floor bits/char"] = round(floor["bits_per_char"], 4)
            gain = 1 - row["_test_bits_per_char"] / floor["bits_per_char"]
            row["below floor"] = f"{100 * gain:.0f}%" + ("" if gain >= 0.1 else " (NOT clearly below)")
        row["flags"] = "".join(sorted(set("".join(group["flags"]))))
        rows.append(row)
    return rows


def _with_ci(mean: float, half: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    digits = 4 if abs(mean) < 100 else 1
    text = f"{mean:,.{digits}f}"
    return text + (f" ± {half:,.{digits}f}" if half is not None else "")


def paired_rows(done: pd.DataFrame, axes: list[str], runs: dict[str, analysis.RunData]) -> list[dict]:
    """Paired comparisons between tokenizations of the same model, data and matching rule."""
    group_keys = [a for a in axes if a not in ("seed", "tokenizer")] + ["phase"]
    blocks: dict[str, np.ndarray | None] = {}  # a run takes part in several pairs

    def block_bits(run_dir: str) -> np.ndarray | None:
        if run_dir not in blocks:
            blocks[run_dir] = analysis.block_bits(runs[run_dir])
        return blocks[run_dir]

    rows = []
    comparable = done[done["lossless_bool"]]  # the runs of a group share their data; lossy ones are left out
    for key, group in comparable.groupby(group_keys, sort=False, dropna=False):
        context = dict(zip(group_keys, key))
        tokenizers = sorted(group["tokenizer"].unique(), key=figures._tokenizer_order)
        for a, b in itertools.combinations(tokenizers, 2):
            ga = group[group["tokenizer"] == a].set_index("seed")
            gb = group[group["tokenizer"] == b].set_index("seed")
            seeds = sorted(set(ga.index) & set(gb.index))
            if not seeds:
                continue
            if len(seeds) >= 2:
                test = analysis.paired_comparison(ga.loc[seeds, "test_bits_per_char"].tolist(),
                                                  gb.loc[seeds, "test_bits_per_char"].tolist(),
                                                  f"paired t-test over {len(seeds)} seeds")
                unit = "bits/char"
            else:
                blocks_a = block_bits(ga.loc[seeds[0], "run_dir"])
                blocks_b = block_bits(gb.loc[seeds[0], "run_dir"])
                if blocks_a is None or blocks_b is None:
                    continue
                test = analysis.paired_comparison(blocks_a.tolist(), blocks_b.tolist(),
                                                  f"paired t-test over {len(blocks_a)} text blocks (one seed)")
                unit = "bits/byte"
            # a matrix without phases has no phase to show (an empty cell reads back as NaN)
            rows.append({**{k: v for k, v in context.items() if k != "phase" or (isinstance(v, str) and v)},
                         "A": a, "B": b,
                         "method": test["method"], f"mean A - B": round(test["mean_difference"], 4),
                         "unit": unit, "p-value": test["p_value"]})
    return rows


# ------------------------------------------------------------------------------------------ the report


def build_report(results_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    results_dir = Path(results_dir)
    table, done, axes = load_runs(results_dir)
    name = str(table["matrix"].iloc[0]) if "matrix" in table else results_dir.name
    runs = {row["run_dir"]: _run_data(row) for _, row in done.iterrows()}
    out = Path(out_dir) if out_dir else Path("reports") / name
    out.mkdir(parents=True, exist_ok=True)
    config_path = results_dir / "matrix.toml"

    # Numbers from the runs' artefacts.
    floors = {}
    for (dataset, tokenizer), group in done.groupby(["dataset", "tokenizer"]):
        floors[(dataset, tokenizer)] = analysis.unigram_floor(runs[group["run_dir"].iloc[0]])
    profiles, unk = {}, {}
    for key, group in done.groupby(["model", "tokenizer", "dataset"]):
        run = runs[group.sort_values("seed")["run_dir"].iloc[0]]
        nll = run.token_nll("test")
        if nll is None:
            continue
        tokenizer, ids = run.tokenizer, run.ids("test")
        if len(ids) != len(nll):
            continue
        if group["match"].iloc[0] == done["match"].iloc[0]:
            profiles[f"{key[0]} {key[1]}"] = analysis.piece_profile(tokenizer, ids, nll)
        share = analysis.unk_share(tokenizer, ids, nll)
        if share is not None:
            for run_dir in group["run_dir"]:
                unk[run_dir] = share

    doc = Document(f"Tokenization study: {name}")
    _summary(doc, table, done, name, config_path)
    rows = main_table(done, axes, floors)
    columns = [a for a in axes if a != "seed" and done[a].nunique() > 1 or a in ("model", "tokenizer")] + \
        (["phase"] if done["phase"].astype(str).str.len().gt(0).any() else []) + \
        ["seeds", "bits/byte", "bits/char", "word ppl", "word ppl (eos)", "token ppl", "unigram floor bits/char",
         "below floor", "flags"]
    doc.heading("Main table (test split)")
    doc.table(rows, columns, "Mean over seeds ± 95% confidence interval (Student t; no interval with one seed). "
                             + _flag_legend(done))

    doc.heading("1. The tokenization attack")
    fig = figures.attack_figure(done)
    doc.figure(*_save(fig, out, "1-tokenization-attack"),
               "Per-token perplexity (left) against bits per character: runs with nearly the same bits per "
               "character have per-token perplexities that differ by orders of magnitude, because a token means "
               "something different under each tokenization. Word perplexity (right) is the same total loss "
               "divided by the number of words, so it ranks runs exactly as bits per character do. " +
               _flag_legend(done))
    doc.para(_attack_sentence(done))

    doc.heading("2. Vocabulary sweep")
    doc.figure(*_save(figures.vocab_sweep_figure(done), out, "2-vocabulary-sweep"),
               "Bits per character and per-token perplexity against the byte-level BPE vocabulary size; "
               "the byte runs are the 256 point (byte-level BPE with no merges).")

    doc.heading("3. Teacher forcing inside words")
    doc.figure(*_save(figures.teacher_forcing_figure(profiles), out, "3-teacher-forcing"),
               "Left: the share of a word's loss that falls on its first piece, by the number of pieces; right: "
               "mean loss by piece position within the word (for byte and character models: by byte/character). "
               "A model predicting a word piece by piece pays for most of the word on the first piece; later "
               "pieces are nearly free under teacher forcing, so a per-piece average is not a per-word cost. "
               "Late positions exist only in long words, which are rarer and harder: the right panel mixes "
               "position with word length, most visibly for subword pieces.")
    doc.table([{"run": k, "mean pieces per word": round(v.get("mean_pieces_per_word", math.nan), 3),
                "share of word loss on first piece": round(v.get("first_piece_share_all", math.nan), 3)}
               for k, v in sorted(profiles.items())],
              ["run", "mean pieces per word", "share of word loss on first piece"])

    doc.heading("4. Closed vocabulary")
    doc.figure(*_save(figures.closed_vocabulary_figure(done, unk), out, "4-closed-vocabulary"),
               "Test word perplexity of every run; hatched bars are closed-vocabulary word models (word:N), "
               "labelled with the share of their loss that falls on <unk>.")
    _closed_vocabulary_section(doc, done, unk)

    doc.heading("5. Learning curves")
    curves = [(dict(r), runs[r["run_dir"]].log()) for _, r in done.iterrows()]
    doc.figure(*_save(figures.learning_curves_figure(curves), out, "5-learning-curves"),
               "Validation bits per character against training characters seen (solid: equal characters, "
               "dashed: equal tokens). " + _flag_legend(done))

    doc.heading("6. Equal tokens vs equal characters")
    doc.figure(*_save(figures.matching_figure(done), out, "6-matching-rule"),
               "Test bits per character of each tokenization when runs are matched on equal training tokens and "
               "context in tokens, and on equal training characters and context in characters. Equal tokens "
               "give long-token schemes more text and more context.")
    _matching_table(doc, done)

    doc.heading("Paired comparisons between tokenizations")
    paired = paired_rows(done, axes, runs)
    if paired:
        doc.table(paired, list(paired[0]),
                  "Negative differences favour A. With several seeds the test pairs runs by seed; with one seed it "
                  "pairs the two runs' losses on the same 50 blocks of test text (blocks treated as independent "
                  "samples of text, which understates the uncertainty of training). Runs with a lossy tokenization "
                  "are left out.")
    else:
        doc.para("No pair of comparable runs to compare.")

    failed = table[table["status"] != "done"]
    if not failed.empty:
        doc.heading("Runs that did not finish")
        doc.table([dict(r) for _, r in failed.iterrows()], [a for a in axes] + ["status", "error"])

    _provenance(doc, table, done, config_path, runs)
    _definitions(doc)

    write_text_atomic(out / "report.md", doc.markdown())
    write_text_atomic(out / "report.html", doc.html())
    return out / "report.md"


def _save(fig, out: Path, name: str) -> tuple[str, bytes]:
    png_name, _, png = figures.save(fig, out, name)
    return name, png


def _flag_legend(done: pd.DataFrame) -> str:
    present = sorted(set("".join(done["flags"])))
    if not present:
        return "Every run is comparable: verified data, lossless tokenization."
    everyone = {f"{r.model}/{r.tokenizer}" for r in done.itertuples()}
    parts = []
    for flag in present:
        labels = sorted({f"{r.model}/{r.tokenizer}" for r in done.itertuples() if flag in r.flags})
        which = "all runs" if set(labels) == everyone else ", ".join(labels)
        parts.append(f"{flag} {FLAG_NOTES[flag]} ({which})")
    return "Flags: " + "; ".join(parts) + "."


def _summary(doc: Document, table, done, name, config_path) -> None:
    counts = table["status"].value_counts().to_dict()
    doc.para(f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from "
             f"`{config_path}`: {len(table)} runs ({', '.join(f'{n} {s}' for s, n in counts.items())}). "
             f"Models: {', '.join(sorted(done['model'].unique()))}; tokenizations: "
             f"{', '.join(sorted(done['tokenizer'].unique(), key=figures._tokenizer_order))}; data: "
             f"{', '.join(sorted(done['dataset'].unique()))}; matching: {', '.join(sorted(done['match'].unique()))}.")
    doc.para("Every number is computed from one total negative log-likelihood over the whole test split (the first "
             "token predicted too) and normalized by the text: bits per byte, bits per character and word "
             "perplexity compare across tokenizations; per-token perplexity does not.")


def _attack_sentence(done: pd.DataFrame) -> str:
    ok = done[done["lossless_bool"]]  # runs of one study share their data; lossy tokenizations never compare
    if len(ok) < 2:
        return "Too few runs with a lossless tokenization to quantify the effect."
    lo, hi = ok["test_token_perplexity"].min(), ok["test_token_perplexity"].max()
    bpc_lo, bpc_hi = ok["test_bits_per_char"].min(), ok["test_bits_per_char"].max()
    best_bpc = ok.loc[ok["test_bits_per_char"].idxmin()]
    best_tok = ok.loc[ok["test_token_perplexity"].idxmin()]
    text = (f"Across runs with lossless tokenizations, per-token perplexity spans {lo:,.2f} to {hi:,.1f} "
            f"(x{hi / lo:,.0f}) while bits per character span {bpc_lo:.3f} to {bpc_hi:.3f}. The best model by "
            f"bits per character is **{best_bpc['model']}/{best_bpc['tokenizer']}** "
            f"({best_bpc['test_bits_per_char']:.3f}); the lowest per-token perplexity belongs to "
            f"**{best_tok['model']}/{best_tok['tokenizer']}** "
            f"({best_tok['test_token_perplexity']:,.2f} per token, {best_tok['test_bits_per_char']:.3f} bits/char).")
    if best_bpc["run_dir"] != best_tok["run_dir"]:
        text += " Ranked by per-token perplexity, the table would name the wrong winner."
    return text


def _closed_vocabulary_section(doc: Document, done: pd.DataFrame, unk: dict) -> None:
    closed = done[done["tokenizer"].str.startswith("word:")]
    if closed.empty:
        doc.para("No closed-vocabulary run in this matrix.")
        return
    rows = []
    for _, r in closed.iterrows():
        n = r["tokenizer"].split(":")[1]
        same_text = done[(done["model"] == r["model"]) & (done["dataset"] == r["dataset"]) &
                         (done["match"] == r["match"]) & (done["seed"] == r["seed"]) & done["lossless_bool"]]
        best_open = same_text.loc[same_text["test_word_perplexity"].idxmin()] if not same_text.empty else None
        share = unk.get(r["run_dir"], {})
        rows.append({"model": r["model"], "closed": r["tokenizer"], "closed word ppl": r["test_word_perplexity"],
                     "<unk> share of tokens": share.get("unk_token_share"),
                     "<unk> share of NLL": share.get("unk_nll_share"),
                     "best open-vocabulary run": None if best_open is None else best_open["tokenizer"],
                     "its word ppl": None if best_open is None else best_open["test_word_perplexity"],
                     "words lost": f"word:{n} decodes OOV words as <unk>"})
    doc.table(rows, list(rows[0]))
    doc.para("**The closed-vocabulary numbers are not comparable.** A word:N model predicts `<unk>` in place of "
             "every word outside its vocabulary, so it never pays for spelling those words; its word perplexity is "
             "the cost of a different, easier text. Only the open-vocabulary runs (word-open:N spells unknown "
             "words in bytes) and the subword and byte runs are scored on the real text.")


def _matching_table(doc: Document, done: pd.DataFrame) -> None:
    rules = sorted(done["match"].unique())
    if len(rules) < 2:
        doc.para("This matrix uses one matching rule; no ranking comparison.")
        return
    rows = []
    for (model, dataset), group in done.groupby(["model", "dataset"]):
        pivot = group.groupby(["tokenizer", "match"])["test_bits_per_char"].mean().unstack("match").dropna()
        if pivot.shape[1] < 2 or pivot.empty:
            continue
        for tokenizer, values in pivot.iterrows():
            row = {"model": model, "dataset": dataset, "tokenizer": tokenizer}
            for rule in pivot.columns:
                row[f"bits/char (equal {rule})"] = round(values[rule], 4)
                row[f"rank (equal {rule})"] = int(pivot[rule].rank().loc[tokenizer])
            rows.append(row)
    if rows:
        doc.table(rows, list(rows[0]))


def _provenance(doc: Document, table, done, config_path: Path, runs: dict) -> None:
    from bench.provenance import git_commit

    doc.heading("Provenance")
    commits = sorted({f"{r.git_commit}{' (uncommitted changes)' if str(r.git_dirty) == 'True' else ''}"
                      for r in done.itertuples()})
    devices = sorted({f"{r.device} {r.device_name} (torch {r.torch})" for r in done.itertuples()})
    libraries = sorted({json.dumps(run.result["provenance"]["libraries"], sort_keys=True) for run in runs.values()})
    data = sorted({(r.dataset, s, getattr(r, f"data_sha256_{s}"), getattr(r, f"data_status_{s}"))
                   for r in done.itertuples() for s in ("train", "valid", "test")})
    here = git_commit()
    doc.items([
        f"code: {', '.join(commits)}; report built at {here['commit']}" + (" (uncommitted changes)" if here["dirty"]
                                                                           else ""),
        f"devices: {', '.join(devices)}",
        f"libraries: {'; '.join(libraries)}",
        f"config: `{config_path}` (sha256 {table['config_sha256'].iloc[0]})",
        f"runs table: `{config_path.parent / 'runs.csv'}`; every run folder holds result.json, spec.json, "
        "log.jsonl and its checkpoints",
    ])
    doc.table([{"dataset": d, "split": s, "sha256": h, "status": st} for d, s, h, st in data],
              ["dataset", "split", "sha256", "status"], "Data: official = matches the published checksum; "
                                                        "unverified = it does not; user = a user or derived corpus.")
    if config_path.is_file():
        doc.code(config_path.read_text())


def _definitions(doc: Document) -> None:
    doc.heading("Metric definitions")
    doc.items([
        "L = total negative log-likelihood (nats) of every token of the test split, the first one predicted from "
        "`<bos>`; the split is cut into the recorded number of streams, each with its state carried chunk to "
        "chunk (the Transformer: a sliding window of the recorded stride).",
        "bits/byte = L / (ln 2 · UTF-8 bytes of the text); bits/char = L / (ln 2 · Unicode code points).",
        "word ppl = exp(L / words), words = `len(text.split())` (lm-evaluation-harness's word unit); word ppl "
        "(eos) = exp(L / (words + newlines)), the AWD-LSTM/WikiText convention of published word-level "
        "perplexities.",
        "token ppl = exp(L / tokens): depends on what a token is, so it is **not comparable across "
        "tokenizations**.",
        "unigram floor = the same metrics for a unigram model of the tokens fitted on train (add-one smoothing); "
        "'below floor' is how far a run's bits/char is below it (a run less than 10% below is flagged).",
        "Runs are matched on equal training characters and equal context in characters unless the matching rule "
        "says tokens or steps.",
    ])
