"""``bench report RESULTS_DIR``: the study as ``report.md``, a self-contained ``report.html``
and every figure as PNG and SVG, under ``reports/<matrix>/``.

The runs come from the matrix's run folders (bench.study.matrix.runs_table): each finished run's
``result.json`` and artefacts (bench.study.matrix.finished_run.FinishedRun), the others' status; the tables are
computed in bench.study.report.report_tables, the figures drawn in bench.study.report.figures.
"""

from __future__ import annotations

import datetime as _dt
import math
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench.arguments import optional_path, path_argument
from bench.engine.result import TRAINED
from bench.errors import BenchError
from bench.fileio import require_folder, write_text_atomic
from bench.metrics import BITS_PER_BYTE_CORPORA
from bench.run_files import MATRIX_CONFIG
from bench.ownership import claim_report_folder, record_report_owner
from bench.study.matrix.config import is_matrix_name
from bench.study.matrix.finished_run import FinishedRun
from bench.study.matrix.run_status import RunStatus
from bench.study.matrix.runs_table import read_runs_table
from bench.study.report import compressor_rows, convergence_figure, figures, intrinsic_section
from bench.study.report.export import export_table
from bench.study.report.figure_style import FigureStyle, metric_named, tokenizer_order
from bench.study.report.flags import flag_legend, gave_text_back, run_flags
from bench.study.report.rendering import ReportPage
from bench.study.report.report_appendix import definitions_section, provenance_section
from bench.study.report.report_tables import (TEXT_INTERVAL, closed_forms, closed_vocabulary_rows,
                                              covering_closed_vocabularies, main_columns, main_table, marginal_rows,
                                              matching_rows, paired_rows, power_line, pretrained_rows)
from bench.study.stats import analysis, convergence
from tokenizers_study import lossless_on


@dataclass
class Study:
    """A matrix's runs as the report reads them."""

    name: str
    table: pd.DataFrame  # every run with a folder
    done: pd.DataFrame  # the finished runs trained here, with report columns (flags, lossless_bool)
    pretrained: pd.DataFrame  # the finished [[pretrained]] runs, with the same columns
    axes: list[str]
    runs: dict[str, FinishedRun]  # by run folder name
    config_path: Path
    valid_only: list[str] = field(default_factory=list)  # finished runs not scored on test: left out, named
    left_out: list[str] = field(default_factory=list)  # folders whose records disagree, or outside the matrix


def load_study(results_dir: Path) -> Study:
    """Every run of the matrix from its folder: the finished ones with flags and their results."""
    results_dir = path_argument(results_dir, "the results folder")
    runs_table = read_runs_table(results_dir)
    for line in runs_table.left_out:
        print(f"note: {line}", file=sys.stderr)
    table = runs_table.rows
    done = runs_table.done()
    if done.empty:
        counts = ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
        raise BenchError(f"{results_dir}: no run has finished ({counts}: see each run folder's status.json); nothing "
                         f"to report yet")
    scored = pd.to_numeric(done.get("test_bits_per_byte", pd.Series(index=done.index, dtype=float)), errors="coerce")
    valid_only, done = list(done.loc[scored.isna(), "run_dir"]), done[scored.notna()].copy()
    if done.empty:
        raise BenchError(f"{results_dir}: no finished run was scored on the test split (final_eval_splits = valid); "
                         f"the report compares test numbers: score them with bench eval RUN --split test")
    done["comparable_bool"] = done["comparable"].astype(str).str.lower() == "true"
    done["lossless_bool"] = [lossless_on(str(r["tokenizer"]), gave_text_back(r)) for _, r in done.iterrows()]
    done["flags"] = [run_flags(r) for _, r in done.iterrows()]
    trained = done["run_dir"].map(lambda run_dir: runs_table.runs[run_dir].result.kind == TRAINED)
    pretrained, done = done[~trained], done[trained].copy()
    if done.empty:
        raise BenchError(f"{results_dir}: no trained run has finished yet (the report compares trained runs; "
                         f"pretrained models are shown beside them); run `bench run-matrix` first")
    done["seed"] = done["seed"].astype(int)  # a float column when pretrained rows (no seed) share the table
    name = str(table["matrix"].iloc[0])
    if not is_matrix_name(name):  # it names the default report folder: never a path
        raise BenchError(f"{results_dir}: matrix name {name!r} is not a matrix name (letters, digits, '-' and '_'); "
                         f"run `bench run-matrix CONFIG` again to rewrite the run folders' cell.json")
    runs = {run_dir: runs_table.runs[run_dir] for run_dir in done["run_dir"]}
    for run in runs.values():  # a damaged learning curve is refused here, before anything is computed or written
        _ = run.log
    return Study(name, table, done, pretrained, runs_table.axes, runs, results_dir / MATRIX_CONFIG, valid_only,
                 runs_table.left_out)


def build_report(results_dir: str | Path, out_dir: str | Path | None = None, metric: str = "byte") -> Path:
    results_dir, out_dir = path_argument(results_dir, "the results folder"), optional_path(out_dir, "out_dir")
    metric_named(metric)  # a bad --metric is refused before anything is read or written
    study = load_study(results_dir)
    out = require_folder(out_dir or Path("reports") / study.name, "report folder")
    claim_report_folder(out, Path(results_dir))
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    record_report_owner(out, Path(results_dir))
    try:
        return _write_report(study, out, FigureStyle.of(_everyone(study)["tokenizer"], metric))
    except BaseException:
        if created:  # a failed report leaves no folder behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def _write_report(study: Study, out: Path, style: FigureStyle) -> Path:
    floors, profiles, unk = analysis.token_analyses(study.done, study.runs)
    data_dirs = {run.row["dataset"]: run.result.spec.data_dir for run in study.runs.values()}
    baselines = compressor_rows.study_baselines(study.done, data_dirs)
    study.done["flags"] = compressor_rows.flag_worse_than_compressors(study.done, baselines)
    doc = ReportPage(f"Tokenization study: {study.name}")
    _summary(doc, study)
    _main_table_section(doc, study, floors, baselines, out)
    _attack_and_sweep_sections(doc, study, out, compressor_rows.figure_lines(baselines, study.done, style.metric),
                               style)
    _word_sections(doc, study, out, profiles, unk, style)
    _training_sections(doc, study, out, style)
    intrinsic_section.section(doc, study, out, style, _figure)
    _paired_section(doc, study, out)
    _marginal_section(doc, study)
    failed = study.table[study.table["status"] != RunStatus.DONE.value]
    if not failed.empty:
        doc.heading("Runs that did not finish")
        failed = failed.assign(error=failed["error"].fillna("") if "error" in failed else "")  # no "nan"
        doc.table([dict(r) for _, r in failed.iterrows()], study.axes + ["status", "error"])
    provenance_section(doc, study.table, study.done, study.runs, study.config_path)
    definitions_section(doc)
    write_text_atomic(out / "report.md", doc.markdown())
    write_text_atomic(out / "report.html", doc.html())
    return out / "report.md"


def _main_table_section(doc: ReportPage, study: Study, floors: dict, baselines, out: Path) -> None:
    done, axes = study.done, study.axes
    rows = (main_table(done, axes, floors, study.runs) + pretrained_rows(study.pretrained) +
            compressor_rows.reference_rows(baselines, done))
    text = any(TEXT_INTERVAL in r for r in rows)
    columns = [a for a in axes if a != "seed" and done[a].nunique() > 1 or a in ("model", "tokenizer")] + \
        (["phase"] if done["phase"].astype(str).str.len().gt(0).any() else []) + \
        ["seeds"] + main_columns(text) + ["unigram floor bits/char", "below floor", "last doubling", "flags"]
    doc.heading("Main table (test split)")
    doc.table(rows, columns, "Mean over seeds ± the 95% interval over seeds (Student t): the uncertainty of "
              "training, shown only with two or more seeds. Perplexities are the perplexity of the mean loss "
              "(the geometric mean over seeds) with the loss's interval carried through exp [low, high]. " + (
                  f"'{TEXT_INTERVAL}': the 95% interval over the {_documents(study)} of the test text "
                  "(bootstrap), the uncertainty of the text sample. " if text else
                  f"No interval over the text: {_no_text_interval(study)}. ") + "Rows in italics are classical "
              "compressors (bench baselines): bits for the test text given the train text, size(train + test) - "
              "size(train); 'alone': the test file compressed by itself. 'last doubling': validation bits per "
              "byte gained over the last doubling of training characters (mean over seeds), 'still improving' "
              f"above {convergence.IMPROVING}. " + flag_legend(_everyone(study)), anchor="main-table")
    doc.para("The same table for a paper: " + ", ".join(f"`{f}`" for f in export_table(
        rows, columns, out, "main-table", "Test split: mean over seeds with the 95% interval over seeds, bits per "
        "byte and per character from one total loss; per-token perplexity is not comparable across "
        "tokenizations.")) + " (LaTeX with booktabs).")
    doc.para(compressor_rows.summary(baselines, done))
    doc.para(convergence.summary(done, {d: run.log for d, run in study.runs.items()}))


def _everyone(study: Study) -> pd.DataFrame:
    """The runs trained here and the pretrained models: for the main table and the attack figure only."""
    return pd.concat([study.done, study.pretrained]) if not study.pretrained.empty else study.done


def _documents(study: Study) -> str:
    """What the text is resampled by, e.g. '62 articles'."""
    from bench.data.documents import document_starts

    run = next(iter(study.runs.values()))
    starts, kind = document_starts(run.split_data("test").read_text())
    return f"{len(starts)} {kind}{'s' if len(starts) > 1 else ''}"


def _no_text_interval(study: Study) -> str:
    from bench.data.documents import MIN_RESAMPLED

    if not any(run.token_nll("test") is not None for run in study.runs.values()):
        return "no per-token losses were saved (dump_token_losses = true saves them)"
    return f"the test text has {_documents(study)}, fewer than the {MIN_RESAMPLED} a bootstrap needs"


def _attack_and_sweep_sections(doc: ReportPage, study: Study, out: Path, compressor_lines: dict,
                               style: FigureStyle) -> None:
    done, metric = study.done, style.metric.label
    doc.heading("1. The tokenization attack")
    doc.figure(*_save(figures.attack_figure(_everyone(study), compressor_lines, style), out,
                     "1-tokenization-attack"),
               f"Per-token perplexity (left) against {metric}: runs with nearly the same {metric} "
               "have per-token perplexities that differ by orders of magnitude, because a token means "
               "something different under each tokenization. Word perplexity (right) is the same total loss "
               f"divided by the number of words, so it ranks runs exactly as {metric} does on one text. Each point is "
               "a mean over seeds; with two or more seeds, bars show the 95% interval over seeds. " +
               ("Diamonds are pretrained models (◊). " if not study.pretrained.empty else "") +
               ("Dotted vertical lines: gzip -9 on the test text alone, and the best classical compressor primed "
                "with the train text; a run right of them codes the text worse than that compressor. "
                if compressor_lines else "") +
               flag_legend(_everyone(study)))
    doc.para(_attack_sentence(done))
    doc.heading("2. Vocabulary sweep")
    _figure(doc, lambda: figures.vocab_sweep_figure(done, style), out, "2-vocabulary-sweep",
            f"{metric.capitalize()} and per-token perplexity against {figures.sweep_caption(done['tokenizer'])}, one "
            "row of panels per text and matching rule, a line per model and family (means over seeds, bars: 95% "
            "interval over seeds).")


def _word_sections(doc: ReportPage, study: Study, out: Path, profiles: dict, unk: dict, style: FigureStyle) -> None:
    doc.heading("3. Teacher forcing inside words")
    _figure(doc, lambda: figures.teacher_forcing_figure(profiles, style), out, "3-teacher-forcing",
            "Left: the share of a word's loss that falls on its first piece, by the number of pieces; right: "
            "mean loss by piece position within the word (for byte and character models: by byte/character); the "
            "first seed of each model and tokenization. A token that spans no byte (as a nibble's low half) is a "
            "piece of the word of the token before it. "
            + analysis.teacher_forcing_sentence(profiles) + " Late positions exist only in long words, which are "
            "rarer and harder: the right panel mixes position with word length, most visibly for subword pieces.")
    several = len(profiles) > 1
    doc.table([{"run": " ".join(k) + (f" ({key[0]}, {key[1]})" if several else ""),
                "mean pieces per word": round(v.get("mean_pieces_per_word", math.nan), 3),
                "first-piece share, all words": round(v.get("first_piece_share_all", math.nan), 3)}
               for key, group in sorted(profiles.items()) for k, v in sorted(group.items())],
              ["run", "mean pieces per word", "first-piece share, all words"],
              "The mean over every word of the share of its loss on its first piece: one-piece words (share 1) "
              "are included, so it is higher than the shares the figure and the sentence give for words of two or "
              "more pieces.")
    doc.heading("4. Closed vocabulary")
    _figure(doc, lambda: figures.closed_vocabulary_figure(study.done, unk, style), out, "4-closed-vocabulary",
            "Test word perplexity of every run on the text and matching rule of the closed-vocabulary runs "
            "(one panel each), a bar per model and tokenization (the mean over seeds, with the 95% interval over seeds "
            f"as a bar where there are two or more); hatched bars are closed-vocabulary models ({closed_forms()}), "
            "labelled with the share of their loss that falls on <unk>.")
    rows = closed_vocabulary_rows(study.done, unk)
    if not rows:  # the figure's line says why
        return
    doc.table(rows, list(rows[0]))
    doc.para(f"**The closed-vocabulary numbers are not comparable.** A {closed_forms()} model predicts `<unk>` in "
             "place of every word outside its vocabulary, so it never pays for spelling those words; its word "
             "perplexity is the cost of a different, easier text. Only the runs of lossless schemes (an open "
             "vocabulary spells unknown words, in bytes) are scored on the real text.")
    if covered := covering_closed_vocabularies(study.done):  # the trait decides, whatever this text measured
        doc.para(f"{', '.join(covered)} covered the test text (no word outside the vocabulary; decoding gives it "
                 "back) and is still not compared: a closed vocabulary gives no probability to a word outside it, so "
                 "its code length exists on this text only, not on the corpus it stands for.")


def _training_sections(doc: ReportPage, study: Study, out: Path, style: FigureStyle) -> None:
    done, metric = study.done, style.metric.label
    doc.heading("5. Learning curves")
    curves = [(dict(r), study.runs[r["run_dir"]].log) for _, r in done.iterrows()]
    _figure(doc, lambda: figures.learning_curves_figure(curves, style), out, "5-learning-curves",
            f"Validation {metric} against training characters seen, one panel per text and matching rule; a "
            "line per model and tokenization, the mean over seeds (each seed's curve faint behind it) with the 95% "
            "interval over seeds as an error bar at the last validation, where there are two or more seeds. "
            + flag_legend(done))
    doc.heading("6. Equal tokens vs equal characters")
    _figure(doc, lambda: figures.matching_figure(done, style), out, "6-matching-rule",
            f"Test {metric} of each tokenization (mean over seeds, bars: 95% interval over seeds) when runs are "
            "matched on equal training tokens and context in tokens, and on equal training characters and context "
            "in characters. Equal tokens give long-token schemes more text and more context.")
    if done["match"].nunique() > 1 and (rows := matching_rows(done)):
        doc.table(rows, list(rows[0]))
    doc.heading("7. Equal compute")
    _figure(doc, lambda: figures.compute_figure(curves, style), out, "7-equal-compute",
            f"Validation {metric} against training FLOPs (the model's FLOPs per token, forward and backward, "
            "times the tokens seen): at equal compute, which tokenization and model reach the lower loss. "
            "One panel per text and matching rule; `match = \"flops\"` gives every cell of a matrix the same "
            "training FLOPs.")
    doc.heading("8. Does the verdict depend on the budget?")
    logs = {d: run.log for d, run in study.runs.items()}
    _figure(doc, lambda: convergence_figure.ranking_figure(done, logs, style), out, "8-ranking-against-budget",
            f"Each model's tokenizations, validation {metric} against training characters and training "
            "FLOPs (a pair of rows per text and matching rule), one line per seed; dotted verticals mark where "
            "the ranking of the lossless tokenizations' seed-mean curves changes. A ranking that still changes "
            "near the end of training is a verdict about this budget only.")


def _paired_section(doc: ReportPage, study: Study, out: Path) -> None:
    doc.heading("Comparisons between tokenizations")
    paired = paired_rows(study.done, study.axes, study.runs)
    if not paired:
        doc.para("No pair of comparable runs to compare.")
        return
    tested = sum(row["p (Holm)"] is not None for row in paired)
    files = export_table(paired, list(paired[0]), out, "comparisons", "A - B in test bits per byte with its 95% "
                         "interval; p-values from Welch t over seeds, Holm-adjusted.")
    doc.table(paired, list(paired[0]),
              "A - B: the difference of the seed means of test bits per byte (negative favours A), its 95% "
              f"interval first, the p-value second. The unit of replication is the trained model. With one seed "
              f"on a side there is no test: the difference is descriptive, and its interval, a paired bootstrap "
              f"over the {_documents(study)} of the test text, covers the text sample only, not training noise. "
              "With two or more seeds on each side, one method gives the interval and the p-value: Student's t "
              "with the standard error of the seed means (Welch: each side's own variance; seeds unpaired, since "
              "under different vocabularies a seed shares neither initial weights nor data order) combined with "
              "the text's (the bootstrap standard error of the same difference over documents, the same "
              "documents for both sides), Welch-Satterthwaite degrees of freedom; so the interval excludes 0 "
              "exactly when p < 0.05" + (
                  f". 'p (Holm)': the p-values of the {tested} tested pairs adjusted together" if tested else "") +
              ". Runs with a lossy tokenization are left out. Also as " + " and ".join(f"`{f}`" for f in files) + ".")
    if not tested:
        doc.para("**No p-value is shown: every comparison has one seed on a side.** Train two or more seeds "
                 "per tokenization (a `seed` axis in the config) to test the differences.")
    power = power_line(study.done, study.axes)
    if power:
        doc.para(power)


def _marginal_section(doc: ReportPage, study: Study) -> None:
    doc.heading("Beyond the canonical segmentation")
    rows = marginal_rows(study.runs)
    if not rows:
        doc.para("No run has an estimate of the likelihood over all segmentations (`bench eval RUN --marginal K` "
                 "makes one, for BPE and sentencepiece schemes).")
        return
    doc.table(rows, list(rows[0]), "The test lines' likelihood summed over every segmentation in the scheme's "
              "lattice against that of the canonical segmentation alone. The canonical probability is exact and "
              "the rest is importance-sampled, so the marginal is never worse; the log of a sampled mean "
              "underestimates in expectation, so the gap shown is, in expectation, a lower bound (± one Monte "
              "Carlo standard error). 'canonical, these lines' scores the chosen lines as one stream, each line "
              "from its start, so it differs from the main table's number (the whole split, the run's own "
              "evaluation layout), shown beside it.")


def _figure(doc: ReportPage, draw, out: Path, name: str, caption: str) -> None:
    """A figure, or where it has nothing to draw, one line saying why (and no file of an earlier report left)."""
    try:
        fig = draw()
    except figures.NoData as why:
        for suffix in (".png", ".svg"):
            (out / f"{name}{suffix}").unlink(missing_ok=True)
        doc.para(f"*Figure {name.partition('-')[0]} is left out: {why}.*")
        return
    doc.figure(*_save(fig, out, name), caption)


def _save(fig, out: Path, name: str) -> tuple[str, bytes]:
    return name, figures.save(fig, out, name)


def _summary(doc: ReportPage, study: Study) -> None:
    table, done, config_path = study.table, study.done, study.config_path
    counts = table["status"].value_counts().to_dict()
    doc.para(f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from "
             f"`{config_path}`: {len(table)} runs ({', '.join(f'{n} {s}' for s, n in counts.items())}). "
             f"Models: {', '.join(sorted(done['model'].unique()))}; tokenizations: "
             f"{', '.join(sorted(done['tokenizer'].unique(), key=tokenizer_order))}; data: "
             f"{', '.join(sorted(done['dataset'].unique()))}; matching: {', '.join(sorted(done['match'].unique()))}.")
    for line in study.left_out:
        doc.para(f"Left out: {line}.")
    if study.valid_only:
        doc.para(f"{len(study.valid_only)} finished run(s) were scored on the valid split only (final_eval_splits) and "
                 f"are left out of every table and figure: {', '.join(study.valid_only)}.")
    doc.para("Every number is computed from one total negative log-likelihood over the whole test split (the first "
             "token predicted too) and normalized by the text: bits per byte, bits per character and word "
             "perplexity compare across tokenizations; per-token perplexity does not.")
    for corpus in sorted(set(done["dataset"]) & set(BITS_PER_BYTE_CORPORA)):
        doc.para(f"On {corpus}, published 'bpc' (SHA-RNN's 1.068 on test) counts bytes: compare bits/byte with it; "
                 f"bits/char counts Unicode characters.")


def _attack_sentence(done: pd.DataFrame) -> str:
    """The attack in numbers, one sentence per text and matching rule: runs of different texts or rules never
    share a range or a winner."""
    ok = done[done["lossless_bool"]]  # lossy tokenizations never compare
    groups = [(key, group) for key, group in ok.groupby(["dataset", "match"], sort=True) if len(group) >= 2]
    if not groups:
        return "Too few runs with a lossless tokenization to quantify the effect."
    return " ".join((f"*{dataset}, matched on {match}:* " if len(groups) > 1 else "") + _attack_numbers(group)
                    for (dataset, match), group in groups)


def _attack_numbers(runs: pd.DataFrame) -> str:
    """The sentence's numbers are the main table's: seed means (perplexity of the mean loss) of each cell."""
    ok = runs.assign(log_ppl=np.log(runs["test_token_perplexity"].astype(float))).groupby(
        ["model", "tokenizer"], as_index=False).agg(test_bits_per_char=("test_bits_per_char", "mean"),
                                                     log_ppl=("log_ppl", "mean"))
    ok["test_token_perplexity"] = np.exp(ok["log_ppl"])
    if len(ok) < 2:
        return "Too few cells with a lossless tokenization to quantify the effect."
    lo, hi = ok["test_token_perplexity"].min(), ok["test_token_perplexity"].max()
    bpc_lo, bpc_hi = ok["test_bits_per_char"].min(), ok["test_bits_per_char"].max()
    best_bpc = ok.loc[ok["test_bits_per_char"].idxmin()]
    best_tok = ok.loc[ok["test_token_perplexity"].idxmin()]
    text = (f"Across cells with lossless tokenizations (means over seeds, as in the main table), per-token "
            f"perplexity spans {lo:,.2f} to {hi:,.1f} "
            f"(x{hi / lo:,.0f}) while bits per character span {bpc_lo:.3f} to {bpc_hi:.3f}. The best model by "
            f"bits per character is **{best_bpc['model']}/{best_bpc['tokenizer']}** "
            f"({best_bpc['test_bits_per_char']:.3f}); the lowest per-token perplexity belongs to "
            f"**{best_tok['model']}/{best_tok['tokenizer']}** "
            f"({best_tok['test_token_perplexity']:,.2f} per token, {best_tok['test_bits_per_char']:.3f} bits/char).")
    if (best_bpc["model"], best_bpc["tokenizer"]) != (best_tok["model"], best_tok["tokenizer"]):
        text += " Ranked by per-token perplexity, the table would name the wrong winner."
    return text
