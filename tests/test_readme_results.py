"""The README's results table is the one generated from the study's runs.csv (scripts/readme_results.py), never a
copy typed or re-rounded by hand; and the generator reads the runs as the report does."""

import importlib.util

import pandas as pd
import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("readme_results", REPO / "scripts" / "readme_results.py")
readme_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_results)


def test_the_readmes_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme_results.readme_with_table(readme) == readme, "run python scripts/readme_results.py --write"


def test_a_hand_edited_cell_is_caught():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    edited = readme.replace("1.6425 ± 0.0318", "1.643 ± 0.032")
    assert edited != readme and readme_results.readme_with_table(edited) != edited


def test_cells_are_seed_means_with_their_t_interval_and_say_when_seeds_are_missing():
    runs = pd.DataFrame({"model": ["lstm"] * 3 + ["sha-rnn"] * 2, "tokenizer": ["byte"] * 5, "seed": [0, 1, 2, 0, 1],
                         "status": ["done"] * 4 + ["failed"], "test_bits_per_byte": [1.0, 1.1, 1.2, 1.5, 9.9],
                         "test_token_perplexity": [2.0, 2.1, 2.2, 2.8, 99.0]})
    table = readme_results.results_table(runs)
    # mean 1.1, sd 0.1, t(0.975, 2) = 4.303: half-width 0.2484; one finished seed of three: no interval
    assert "| sha-rnn bits/byte | lstm bits/byte |" in table  # the families in their registry's order
    assert "| byte | 1.5000 (1 seed) | 1.1000 ± 0.2484 | 2-2.8 |" in table, table


def test_markers_missing_are_refused():
    with pytest.raises(SystemExit, match="markers"):
        readme_results.readme_with_table("no markers here")
