"""The extension test: a metric and a tokenization declared here once, and the tests' toy model family
(tests/toy_family.py), as docs/extending.md says, reach everything that lists, trains, records, reports, draws or
compares them: log.jsonl, result.json, runs.csv, the report's tables and every figure, bench compare, bench
config fields and bench models list. The family's GRU runs in float32 under bfloat16 autocast (the precision
policy wraps every recurrent module, not only the ones a family hands to a helper), a closed vocabulary that
covers the test text is still never compared, and a scheme class that forgets a trait is refused at
registration."""

from __future__ import annotations

import csv
import json
import random

import matplotlib.axes
import numpy as np
import pandas as pd
import pytest

from bench import metrics
from bench.metrics import Metric
from tests.toy_family import registered
from tokenizers_study import FAMILIES, TokenizerError
from tokenizers_study.char import CharTokenizer

# ---- the three declarations ---------------------------------------------------------------------------------

LINE = Metric("bits_per_line", "bits/line", "bits per line", lambda c: c.bits_per(c.lines), True,
              "L / (ln 2 · newlines)", name="line", count="lines")


class CharTop(CharTokenizer):
    """The N most frequent characters of train, bytes for the rest: lossless, swept over N."""

    family = "char-top"
    title = "the N most frequent characters"
    min_size = 1
    min_size_why = "at least one character"
    swept = True

    @classmethod
    def _train(cls, spec, text):
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        seen, counts = np.unique(points[(points < 0xD800) | (points > 0xDFFF)], return_counts=True)
        return cls(spec, np.sort(seen[np.argsort(-counts, kind="stable")[:spec.size]]))


# ---- a matrix that uses all three ----------------------------------------------------------------------------

TOKENIZERS = ["byte", "char-top:8", "char-top:16", "char-top:32", "word:60"]
MATRIX = f"""
[matrix]
name = "extended"
match = "chars"

[corpora.toy]
train = "train.txt"
valid = "valid.txt"
test = "test.txt"

[axes]
model = ["toy-gru", "lstm"]
tokenizer = {json.dumps(TOKENIZERS)}
dataset = ["toy"]
seed = [0]

[budget]
chars = 3_000

[context]
chars = 32

[shared]
preset = "tiny"
stop_if_not_learning = false  # toy runs too short to leave their unigram floor: machinery, not learning
batch_size = 4
eval_every = 10
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
precision = "bfloat16"
lstm_precision = "float32"  # recurrent modules in float32 on every CPU, also where oneDNN has bf16 LSTMs

[models.lstm]
emsize = 16
nhid = 8
"""
WORDS = [f"w{i}" for i in range(40)]  # fewer than word:60 keeps: the closed vocabulary covers every text


def _text(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + " .\n" for _ in range(lines))


@pytest.fixture(scope="module")
def declared():
    """The three declarations, registered for this module's tests and gone again after them."""
    from bench.study.report.figure_style import plt

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(metrics.METRICS, LINE.key, LINE)
        FAMILIES.register(CharTop.family, CharTop)
        try:
            with registered():
                yield patch
        finally:
            del FAMILIES[CharTop.family]
            plt.close("all")


@pytest.fixture(scope="module")
def extended(declared, tmp_path_factory):
    """The matrix run and reported in bits per line: (its folder, each figure's labels, legend and lines)."""
    from bench.study.matrix.execute import Execution, run_matrix

    root = tmp_path_factory.mktemp("extended")
    for split, lines, seed in (("train", 300, 0), ("valid", 40, 1), ("test", 40, 2)):
        (root / f"{split}.txt").write_text(_text(lines, seed))
    (root / "m.toml").write_text(MATRIX)
    outcome = run_matrix(root / "m.toml", root / "results", data_dir=root / "data",
                         execution=Execution(show_progress=False))
    assert outcome.counts == {"done": 2 * len(TOKENIZERS)}
    return root, _report(root, declared)


def _report(root, patch) -> dict:
    """Builds the report with --metric line; returns each figure's axis labels and legend entries by name."""
    from bench.study.report import figure_style, report

    drawn: dict[str, dict] = {}
    legend = matplotlib.axes.Axes.legend
    entries: list = []

    def recording_legend(ax, *args, handles=(), **kwargs):
        entries.extend(h.get_label() for h in handles)
        return legend(ax, *args, handles=handles, **kwargs) if handles else legend(ax, *args, **kwargs)

    def recording_save(fig, folder, name):
        labels = {text for ax in fig.axes for text in (ax.get_xlabel(), ax.get_ylabel(), ax.get_title())}
        lines = {(line.get_label(), line.get_color()) for ax in fig.axes for line in ax.get_lines()}
        drawn[name] = {"labels": labels, "legend": set(entries) | {label for label, _ in lines}, "lines": lines}
        entries.clear()
        return save(fig, folder, name)

    save = figure_style.save
    patch.setattr(matplotlib.axes.Axes, "legend", recording_legend)
    patch.setattr(report.figures, "save", recording_save)
    report.build_report(root / "results", root / "report", metric="line")
    return drawn


def _runs(root) -> list[dict]:
    with open(root / "results" / "runs.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_the_metric_reaches_the_log_the_result_and_the_runs_table(extended):
    root, _ = extended
    for run in _runs(root):
        folder = root / "results" / run["run_dir"]
        validations = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()
                       if "valid_loss" in line]
        assert validations and all("valid_bits_per_line" in v for v in validations), run["run_dir"]
        test = json.loads((folder / "result.json").read_text())["metrics"]["test"]
        assert test["bits_per_line"] == pytest.approx(test["total_nll_bits"] / test["n_lines"], rel=1e-12)
        assert float(run["test_bits_per_line"]) == pytest.approx(test["bits_per_line"], rel=1e-9)


def test_the_family_and_the_scheme_reach_the_runs_table_and_the_reports_main_table(extended):
    root, _ = extended
    assert {(r["model"], r["tokenizer"]) for r in _runs(root)} == {(m, t) for m in ("toy-gru", "lstm")
                                                                    for t in TOKENIZERS}
    with open(root / "report" / "main-table.csv", newline="") as f:
        main = list(csv.DictReader(f))
    assert "bits/line" in main[0]
    assert {(r["model"], r["tokenizer"].split(" ")[0]) for r in main} >= {("toy-gru", "char-top:16"), ("lstm", "byte")}
    page = (root / "report" / "report.md").read_text()
    assert "- bits/line = L / (ln 2 · newlines)." in page


def test_every_figure_draws_the_declared_metric_family_and_scheme(extended):
    _, drawn = extended
    metric_figures = {name for name, seen in drawn.items() if any("bits per line" in label for label in seen["labels"])}
    assert {"1-tokenization-attack", "2-vocabulary-sweep", "5-learning-curves"} <= metric_figures, drawn.keys()
    assert not any("bits per byte" in label for seen in drawn.values() for label in seen["labels"])
    for name in metric_figures:  # the family in a legend, or a panel of its own
        assert any("toy-gru" in entry for entry in drawn[name]["legend"] | drawn[name]["labels"]), name
    sweep = drawn["2-vocabulary-sweep"]["lines"]
    assert {label for label, _ in sweep} >= {"toy-gru char-top", "lstm char-top"}


def test_a_closed_vocabulary_that_covers_the_text_is_never_compared(extended):
    root, _ = extended
    covered = [r for r in _runs(root) if r["tokenizer"] == "word:60"]
    assert covered and all(r["test_lossless"] == "True" for r in covered)  # measured: it gives the text back
    page = (root / "report" / "report.md").read_text()
    comparisons = page[page.index("## Comparisons between tokenizations"):page.index("## Beyond the canonical")]
    assert "| byte | char-top:8 |" in comparisons and "word:60" not in comparisons
    assert "word:60 covered the test text" in page
    with open(root / "report" / "main-table.csv", newline="") as f:
        flagged = {r["tokenizer"] for r in csv.DictReader(f) if "‡" in r["flags"]}
    assert flagged == {"word:60"}


def test_the_declared_metric_is_compared_side_by_side(extended, cli_here):
    root, _ = extended
    runs = [root / "results" / r["run_dir"] for r in _runs(root) if r["tokenizer"] in ("byte", "char-top:16")
            and r["model"] == "toy-gru"]
    rows = {row["metric"]: row for row in json.loads(cli_here("compare", *map(str, runs), "--json").stdout)["rows"]}
    assert "bits/line" in rows


def test_the_gru_runs_in_float32_under_bfloat16_and_its_precision_is_recorded(extended):
    root, _ = extended
    run = next(r for r in _runs(root) if r["model"] == "toy-gru")
    precision = json.loads((root / "results" / run["run_dir"] / "result.json").read_text())["training"]["precision"]
    assert precision["ran"] == "bfloat16 autocast, RNNs float32"
    assert precision["observed"]["Linear"]["outputs"] == ["bfloat16"]  # autocast is on around it
    assert precision["observed"]["GRU"]["outputs"] == ["float32"]


def test_the_family_is_listed_with_its_settings(declared, cli_here):
    listed = json.loads(cli_here("models", "list", "--json").stdout)
    fields = json.loads(cli_here("config", "fields", "--model", "toy-gru", "--json").stdout)
    assert {"model": "toy-gru", "kind": "recurrent", "presets": ["tiny"], "compiled parts": [], "marker": "v"} in listed
    assert {f["name"] for f in fields if f["section"] == "model: toy-gru"} == {"width"}


def test_two_swept_families_of_one_model_are_two_lines_in_their_own_colours(declared):
    from bench.study.report.figure_style import FigureStyle
    from bench.study.report.figures import vocab_sweep_figure

    schemes = ["char-top:8", "char-top:16", "char-top:32", "bpe:300", "bpe:400", "bpe:500"]
    rows = [dict(model="lstm", tokenizer=t, dataset="toy", match="chars", seed=0, flags="", lossless_bool=True,
                 run_dir=t, test_bits_per_byte=2.0 + i / 10, test_token_perplexity=3.0 + i)
            for i, t in enumerate(schemes)]
    style = FigureStyle.of(schemes)
    fig = vocab_sweep_figure(pd.DataFrame(rows), style)
    lines = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert set(lines) == {"lstm char-top", "lstm bpe"}
    assert lines["lstm char-top"] != lines["lstm bpe"]
    assert style.colors["char-top:8"] != style.colors["bpe:300"]


@pytest.mark.parametrize("forgets, message", [
    ("title", r"declares no title"),
    ("swept", r"declares no swept"),
])
def test_a_scheme_class_that_forgets_a_trait_is_refused_in_one_line(forgets, message):
    from tokenizers_study.base import TRAITS, Tokenizer

    traits = {trait: getattr(CharTop, trait) for trait in TRAITS if trait != forgets}
    traits["family"] = "forgetful"
    forgetful = type("Forgetful", (Tokenizer,), traits)
    with pytest.raises(TokenizerError, match=rf"^tokenization scheme 'forgetful': Forgetful {message}[^\n]*$"):
        FAMILIES.register("forgetful", forgetful)
    assert "forgetful" not in FAMILIES


def test_a_scheme_class_with_contradictory_traits_is_refused(declared):
    class SweptWithoutSize(CharTop):
        family = "no-size"
        min_size = None

    with pytest.raises(TokenizerError, match=r"swept over vocabulary sizes but takes no size"):
        FAMILIES.register("no-size", SweptWithoutSize)
    with pytest.raises(TokenizerError, match=r"registered as 'other' but its family is 'char-top'"):
        FAMILIES.register("other", CharTop)


def test_a_figure_metric_must_be_a_comparable_loss_per_a_count_of_the_text():
    with pytest.raises(ValueError, match="a figure metric"):
        Metric("per_token", "x", "x", lambda c: c.bits_per(c.tokens), False, "x", name="token", count="tokens")


@pytest.mark.parametrize("traits, message", [
    ({"min_size": "300"}, "needs min_size None"),
    ({"min_size": 0}, "needs min_size None"),
    ({"min_size": True}, "needs min_size None"),
    ({"sort_rank": True}, "needs an integer sort_rank"),
    ({"title": " "}, "needs a title of one line"),
    ({"title": "two\nlines"}, "needs a title of one line"),
    ({"lossless_scheme": False}, "is a closed vocabulary (never compared) yet swept"),
])
def test_a_scheme_class_whose_trait_is_of_the_wrong_kind_is_refused_in_one_line(traits, message):
    wrong = type("Wrong", (CharTop,), {"family": "wrong", **traits})
    with pytest.raises(TokenizerError) as refused:
        FAMILIES.register("wrong", wrong)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert "wrong" not in FAMILIES


@pytest.mark.parametrize("name", ["with,comma", "with space", 5])
def test_a_scheme_family_name_a_list_or_a_scheme_name_could_not_hold_is_refused(name):
    named = type("Named", (CharTop,), {"family": name})
    with pytest.raises(TokenizerError, match="needs a family name without"):
        FAMILIES.register(name, named)
