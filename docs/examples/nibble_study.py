"""Train the nibble matrix and build its report, from a checkout with
WikiText-2 fetched: python docs/examples/nibble_study.py"""

from pathlib import Path

from bench import api

import nibble  # registers the scheme, here and in every --jobs worker

MATRIX = Path(__file__).parent / "nibble-matrix.toml"

if __name__ == "__main__":  # what the workers, importing this file, skip
    outcome = api.run_matrix(MATRIX)  # results/nibble
    runs = api.load_runs(outcome.results_dir)
    columns = ["model", "tokenizer", "test_bits_per_byte",
               "test_token_perplexity"]
    print(runs[columns].to_string(index=False))
    print(api.build_report(outcome.results_dir))  # reports/nibble/report.md
