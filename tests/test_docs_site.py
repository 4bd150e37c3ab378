"""The documentation site: it builds in strict mode with no warning, and its reference pages are generated from the
code's own declarations. A setting, a metric, a scheme and a model family declared here, with no edit of docs/,
appear in the built pages, and so does every command and option of the command line."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import typer.main
from mkdocs.commands.build import build
from mkdocs.config import load_config

from bench import metrics
from bench.metrics import Metric
from bench.models import MODELS
from bench.models.common import LanguageModel
from bench.settings import Allowed, check_settings, setting
from tests.conftest import REPO
from tokenizers_study import FAMILIES
from tokenizers_study.char import CharTokenizer

# material prints its end-of-life notice at every build; it is no warning about this site
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}

# ---- the four declarations -----------------------------------------------------------------------------------

TOY_METRIC = Metric("bits_per_toy_unit", "bits/toy", "bits per toy unit", lambda c: c.bits_per(c.lines), True,
                    "L / (ln 2 · toy units)")


class ToyChars(CharTokenizer):
    family = "toy-chars"
    title = "the toy's most frequent characters"
    min_size = 7
    min_size_why = "the toy keeps seven characters at least"
    swept = True
    sort_rank = 1


@dataclass
class ToyConfig:  # the family's settings: toy_gate_width is the declared run setting
    vocab_size: int = setting(256, "set from the tokenizer when a run is resolved", Allowed(low=1))
    toy_gate_width: int = setting(24, "width of the toy's gate, units", Allowed(low=3, high=96))

    def __post_init__(self) -> None:
        check_settings(self)


class ToyLM(LanguageModel):
    config_class = ToyConfig
    marker = "p"
    presets = {"toy-preset": {"model": {"toy_gate_width": 24}, "train": dict(batch_size=4, max_steps=10)}}

    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.toy_gate_width)
        self.gate = nn.Linear(config.toy_gate_width, config.toy_gate_width)
        self.add_tied_output_bias(config.vocab_size)

    def forward(self, tokens: torch.Tensor, state=None):
        return self.gate(self.embedding(tokens)), None

    def flops_per_token(self, segment: int) -> float:
        w = self.config.toy_gate_width
        return 2 * w * w + 2 * w * self.config.vocab_size


# ---- the site --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_site_builds_in_strict_mode_with_no_warning(tmp_path):
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                           cwd=REPO, env=QUIET, capture_output=True, text=True)
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "WARNING" not in output, output


@pytest.fixture(scope="module")
def reference_site(tmp_path_factory):
    """The reference pages built by mkdocs (the real mkdocs.yml, its hooks and its nav's Reference section, from an
    empty docs folder) with the four declarations registered: each page's HTML by its name."""
    empty, site = tmp_path_factory.mktemp("docs"), tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(metrics.METRICS, TOY_METRIC.key, TOY_METRIC)
        FAMILIES.register(ToyChars.family, ToyChars)
        MODELS.register("toy-lm", ToyLM)
        try:
            config = load_config(str(REPO / "mkdocs.yml"), docs_dir=str(empty), site_dir=str(site))
            config.nav = [section for section in config.nav if "Reference" in section]
            build(config)
        finally:
            del FAMILIES[ToyChars.family]
            del MODELS["toy-lm"]
    return {path.parent.name: path.read_text() for path in (site / "reference").glob("*/index.html")}


def shown(page: str) -> str:
    """A page's text as a reader sees it: no tags nor headings' permalinks, entities read, white space single."""
    page = re.sub(r'<a class="headerlink".*?</a>', "", page)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_reference_section_is_the_five_generated_pages(reference_site):
    assert set(reference_site) == {"cli", "settings", "metrics", "tokenizations", "models"}


def test_a_declared_setting_is_on_the_settings_page_with_its_type_default_range_and_meaning(reference_site):
    page = shown(reference_site["settings"])
    assert "model: toy-lm" in page
    assert "toy_gate_width int 24 in [3, 96] width of the toy's gate, units" in page


def test_a_declared_metric_is_on_the_metrics_page(reference_site):
    page = shown(reference_site["metrics"])
    assert "bits_per_toy_unit bits/toy bits per toy unit yes" in page
    assert "bits_per_toy_unit bits/toy = L / (ln 2 · toy units)" in page


def test_a_declared_scheme_is_on_the_tokenizations_page_with_its_traits(reference_site):
    page = shown(reference_site["tokenizations"])
    assert "toy-chars:N the toy's most frequent characters yes 1 yes no" in page  # open, order, swept, pretrained
    assert "toy-chars:N 7 the toy keeps seven characters at least" in page


def test_a_declared_family_is_on_the_models_page_with_its_presets_parameter_count(reference_site):
    page = shown(reference_site["models"])
    params = sum(p.numel() for p in ToyLM(ToyConfig(vocab_size=256)).parameters())
    assert "toy-lm Kind: recurrent Figure marker p" in page
    assert f"toy-preset {params:,}" in page


def test_every_command_is_on_the_command_line_page_with_each_of_its_options(reference_site):
    import cli

    # the page's sections by their heading's id: "bench-models-describe"
    parts = re.split(r'<h[2-6] id="([^"]+)"', reference_site["cli"])
    sections = dict(zip(parts[1::2], parts[2::2]))
    missing = []

    def walk(group, path):
        for name, command in group.commands.items():
            words = [*path, name]
            section = sections.get("-".join(words))
            if section is None:
                missing.append(" ".join(words))
                continue
            # an option by its flags, an argument by its metavar or name (as usage writes it)
            names = [n for p in command.params
                     for n in (p.opts if p.param_type_name == "option" else [p.metavar or p.name])]
            missing.extend(" ".join([*words, n]) for n in names if f"<code>{n}</code>" not in section)
            if hasattr(command, "commands"):
                walk(command, words)

    walk(typer.main.get_command(cli.app), ["bench"])
    assert not missing
