"""The likelihood over all segmentations: the lattice, the importance-sampling estimate against the exact
dynamic program, and ``bench eval --marginal`` on a trained model."""

import json
import math

import numpy as np
import pytest

from bench.engine.score.marginal import estimate_line
from tokenizers_study import train_tokenizer
from tokenizers_study.segmentations import Lattice, piece_table


@pytest.fixture(scope="module")
def unigram(corpus_text):
    return train_tokenizer("sp-unigram:300", corpus_text)


def test_every_path_of_the_lattice_decodes_to_the_text(unigram):
    text = "the season of Zürich"
    lattice = Lattice.of(text, piece_table(unigram))
    draws = lattice.sample(np.zeros(unigram.vocab_size), 50, np.random.default_rng(0))
    assert all(unigram.decode(list(ids)) == text for ids, _ in draws)
    assert len({ids for ids, _ in draws}) > 10  # many segmentations
    total = math.exp(lattice.log_total(np.zeros(unigram.vocab_size)))  # uniform weights count the paths
    assert draws[0][1] == pytest.approx(-math.log(total))


def test_the_estimate_converges_to_the_exact_marginal_of_a_context_free_model(unigram):
    """With a model that scores each token alone, the marginal is a dynamic program over the lattice."""
    text = "the season"
    lattice = Lattice.of(text, piece_table(unigram))
    log_p = np.log(np.random.default_rng(2).dirichlet(np.ones(unigram.vocab_size)))  # the model
    exact = lattice.log_total(log_p)
    canonical = tuple(unigram.encode(text).tolist())
    canonical_log_p = float(log_p[list(canonical)].sum())
    proposal = np.log(np.random.default_rng(3).dirichlet(np.ones(unigram.vocab_size) * 5))  # any proposal
    estimates = []
    for draws_per_line in (10, 100, 10_000):
        draws = lattice.sample(proposal, draws_per_line, np.random.default_rng(draws_per_line))
        draw_log_p = np.array([log_p[list(ids)].sum() for ids, _ in draws])
        estimate = estimate_line(canonical, canonical_log_p, draws, draw_log_p)
        assert canonical_log_p <= estimate.log_p  # never below the canonical likelihood
        estimates.append(estimate)
    assert exact > canonical_log_p + 0.1  # the other segmentations matter here
    assert estimates[-1].log_p == pytest.approx(exact, abs=4 * estimates[-1].se_log_p + 1e-3)
    assert estimates[-1].se_log_p < estimates[0].se_log_p


def test_the_canonical_segmentation_is_counted_once_exactly(unigram):
    """A model that favours the canonical tokens, sampled through itself: the canonical path is drawn often, and
    its mass must come from the exact term alone."""
    text = "the season"
    lattice = Lattice.of(text, piece_table(unigram))
    canonical = tuple(unigram.encode(text).tolist())
    log_p = np.full(unigram.vocab_size, -8.0)
    log_p[list(canonical)] = -0.5
    draws = lattice.sample(log_p, 2000, np.random.default_rng(5))
    assert sum(ids == canonical for ids, _ in draws) > 200
    estimate = estimate_line(canonical, float(log_p[list(canonical)].sum()), draws,
                             np.array([log_p[list(ids)].sum() for ids, _ in draws]))
    assert estimate.log_p == pytest.approx(lattice.log_total(log_p), abs=4 * estimate.se_log_p + 1e-6)


def test_a_scheme_without_context_free_tokens_has_no_lattice(corpus_text):
    from tokenizers_study import TokenizerError

    with pytest.raises(TokenizerError, match="segmentations cannot be enumerated"):
        piece_table(train_tokenizer("word-open:50", corpus_text))


@pytest.mark.slow
def test_eval_marginal_on_a_trained_model(tmp_path_factory, make_toy_corpus, cli, one_line_error):
    from bench.engine.run import train
    from bench.engine.spec import RunSpec

    root = tmp_path_factory.mktemp("marginal")
    data = make_toy_corpus(root)
    settings = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 30, "eval_every": 10,
                "stop_if_not_learning": False}  # a toy run too short to leave its unigram floor
    for scheme in ("sp-unigram:300", "word-open:50"):
        train(RunSpec(model="sha-rnn", tokenizer=scheme, dataset="toy", overrides=settings, data_dir=str(data),
                      out_dir=str(root / scheme)), show_progress=False)
    done = cli("eval", str(root / "sp-unigram:300"), "--marginal", "8", "--marginal-lines", "6", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["marginal"]
    assert report["lines"] == 6 and report["draws_per_line"] == 8
    assert report["marginal_bits_per_byte"] <= report["canonical_bits_per_byte"] and report["marginal_se"] >= 0
    saved = root / "sp-unigram:300" / "marginal.test.json"
    assert json.loads(saved.read_text()) == {**report, "settings": {"checkpoint": "best.pt", "draws_per_line": 8,
                                                                    "lines_requested": 6}}
    one_line_error(cli("eval", str(root / "word-open:50"), "--marginal", "8"), "cannot be enumerated")
    # another estimate never replaces the saved one (the report reads it); the same settings make it again
    before = saved.read_bytes()
    one_line_error(cli("eval", str(root / "sp-unigram:300"), "--marginal", "16", "--marginal-lines", "6"),
                   "holds another estimate")
    assert saved.read_bytes() == before
    assert cli("eval", str(root / "sp-unigram:300"), "--marginal", "8", "--marginal-lines", "6").returncode == 0


def test_the_report_shows_the_main_table_number_beside_the_canonical_score_of_the_lines():
    from types import SimpleNamespace

    from bench.study.report.report_tables import marginal_rows

    estimate = {"lines": 40, "draws_per_line": 8, "canonical_bits_per_byte": 4.756, "marginal_bits_per_byte": 4.75,
                "marginal_se": 0.001, "relative_gap": 0.0013}
    run = SimpleNamespace(row={"model": "lstm", "tokenizer": "bpe:64", "seed": 0, "test_bits_per_byte": 5.848},
                          marginal=lambda split: estimate)
    row = marginal_rows({"r": run})[0]
    assert row["main table bits/byte"] == 5.848 and row["canonical, these lines"] == 4.756


def test_a_line_without_a_segmentation_is_named_with_the_fix(unigram, monkeypatch):
    import torch

    import bench.engine.score.marginal as marginal
    from tokenizers_study import TokenizerError

    monkeypatch.setattr(marginal, "piece_table", lambda tokenizer: {b"a": [5]})  # only "a" can be spelled
    monkeypatch.setattr(marginal, "sequence_log_p", lambda model, state, last, batch, *rest: (
        np.zeros(len(batch)), None))
    with pytest.raises(TokenizerError, match=r"line 2 .* has no segmentation into the tokens of sp-unigram:300.*"
                                             r"--marginal needs a lossless one"):
        marginal.score_lines(torch.nn.Linear(1, 1), unigram, "aaa\nbcd\n", {1}, 4, np.zeros(unigram.vocab_size),
                             16, torch.device("cpu"), None, np.random.default_rng(0))
