"""A run that does not learn says so and stops (bench.engine.learning): stalled at its unigram floor after warmup
and a share of its budget, it ends not-learning, in a matrix and its report too; a run that learns, however
late, is never stopped; gradients that stay zero are a warning."""

import json

import numpy as np
import pytest

from bench.engine import learning
from bench.engine.learning import TrainingNotLearning, clearly_below, unigram_log_probs, unigram_nll
from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.study.matrix.execute import Execution, run_matrix
from tests.test_bad_inputs import MATRIX

SETTINGS = {"emsize": 16, "nhid": 32, "bptt": 16, "batch_size": 4, "max_steps": 40, "warmup_steps": 4,
            "eval_every": 8, "checkpoint_every": 8, "eval_streams": 4, "log_every": 2, "eval_max_tokens": 400,
            "final_eval_splits": "test"}
STUCK = {"lr": 1e-12}  # nothing moves: the model stays where it started, far from anything learned
# a model that passes its floor early: 3.27 bits/char against a floor of 3.97 at step 40 (33% of its budget)
LEARNS = {"emsize": 64, "nhid": 128, "bptt": 32, "batch_size": 16, "lr": 5e-3, "max_steps": 120, "eval_every": 20}

# the catalogue's toy matrix with a budget past warmup and a quarter of it: 47 steps, validated every 5
STUCK_MATRIX = MATRIX.replace("chars = 2_000", "chars = 6_000").replace(
    "[shared]", "[shared]\nlr = 1e-12\nwarmup_steps = 4")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, make_toy_corpus):
    return make_toy_corpus(tmp_path_factory.mktemp("corpus"))


def spec(data_dir, out, **overrides):
    return RunSpec(model="lstm", preset="tiny", tokenizer="byte", dataset="toy", seed=2,
                   overrides={**SETTINGS, **overrides}, data_dir=str(data_dir), out_dir=str(out))


def test_a_run_that_cannot_learn_stops_naming_its_floor_value_and_share_of_budget(data_dir, tmp_path):
    with pytest.raises(TrainingNotLearning) as stopped:
        train(spec(data_dir, tmp_path / "run", **STUCK), show_progress=False)
    message = str(stopped.value)
    assert "not learning: validation has not come 2% below the unigram floor (" in message
    # validations at 8, 16, 24, 32: the first with three after warmup and one before them to measure progress
    assert "in the 3 validations from step 16 to step 32" in message and "80% of the budget" in message
    assert not (tmp_path / "run" / "result.json").exists()
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    validations = [r for r in log if "valid_floor_bits_per_char" in r]
    assert validations and validations[-1]["step"] == 32
    assert not clearly_below(validations[-1]["valid_bits_per_char"], validations[-1]["valid_floor_bits_per_char"],
                             learning.STARTED_BELOW)


def test_the_stop_can_be_turned_off_and_a_run_that_learns_is_not_stopped(data_dir, tmp_path):
    stuck = train(spec(data_dir, tmp_path / "stuck", stop_if_not_learning=False, **STUCK), show_progress=False)
    assert stuck.status == "done" and stuck.training.steps == 40
    learns = train(spec(data_dir, tmp_path / "learns", **LEARNS), show_progress=False)
    assert learns.status == "done" and learns.training.steps == 120


@pytest.mark.parametrize("waits_for", [{"not_learning_after": 0.9}, {"warmup_steps": 20}])
def test_the_check_waits_for_its_share_of_the_budget_and_the_end_of_warmup(data_dir, tmp_path, waits_for):
    with pytest.raises(TrainingNotLearning, match=r"from step 24 to step 40 \(.*100% of the budget\)"):  # not 32
        train(spec(data_dir, tmp_path / "late", **waits_for, **STUCK), show_progress=False)


def test_a_budget_with_too_few_validations_to_judge_says_so_and_is_not_stopped(data_dir, tmp_path, capsys):
    result = train(spec(data_dir, tmp_path / "short", max_steps=24, **STUCK))  # the note: not under --quiet
    assert result.status == "done" and result.training.steps == 24
    note = capsys.readouterr().err
    assert ("note: the not-learning stop cannot judge this run: it plans 3 validation(s) in 24 steps, 3 of them after "
            "warmup (4 steps), and needs 3 after warmup and one before them; it will not be stopped") in note


def test_the_validations_a_budget_has_to_judge_are_those_the_rule_needs():
    judge = learning.validations_to_judge
    assert judge(24, 4, 8) == (3, 3) and judge(25, 4, 8) == (4, 4)  # the last step is validated too
    assert judge(400, 0, 100) == (4, 4) and judge(400, 250, 100) == (4, 2)  # after warmup: 300 and 400
    assert judge(100, 20, 0) == (1, 1)  # eval_every 0: the last step alone
    stuck = [(step, 5.0) for step in range(100, 401, 100)]
    assert learning.stalled_at_floor(stuck, 4.0, warmup_steps=0)  # what (4, 4) says: judged at step 400
    assert not learning.stalled_at_floor(stuck, 4.0, warmup_steps=250)  # and (4, 2): not judged


def test_a_plateau_is_judged_by_its_progress_not_by_where_it_sits():
    floor, stalled = 4.68, learning.stalled_at_floor
    falling = [(10, 5.0), (20, 4.70), (30, 4.69), (40, 4.68)]
    assert not stalled(falling, floor, warmup_steps=0)  # at the floor, but 6% better than the validation before
    assert stalled(falling + [(50, 4.68)], floor, warmup_steps=0)  # three without 0.5% progress: judged
    assert not stalled(falling + [(50, 4.68)], floor, warmup_steps=30)  # one of the three is not after warmup
    creeping = [(10 * k, 4.75 * 0.997 ** k) for k in range(8)]  # 0.3% better at each: 0.9% by a window's third
    assert not any(stalled(creeping[:n], floor, warmup_steps=0) for n in range(1, 9))
    learned = [(10, 5.0), (20, 4.2), (30, 4.2), (40, 4.2)]  # stalled, but 10% below the floor: not this rule's
    assert not stalled(learned, floor, warmup_steps=0)
    assert not stalled(falling[:3], floor, warmup_steps=0)  # nothing before the three to measure progress by


@pytest.mark.mirror
@pytest.mark.slow
@pytest.mark.parametrize("lr, stops", [(None, False), (1e-9, True)])
def test_the_issues_tiny_sharnn_learns_unstopped_and_at_lr_1e_9_is_stopped(wt2_data_dir, tmp_path, lr, stops):
    """The 100-step tiny SHA-RNN on WikiText-2 bytes (batch 4 x 64, validated every 20 steps) that the rule before
    stopped at step 40 (4.76 bits/char against a floor of 4.68) ends 11% below its floor."""
    settings = {"batch_size": 4, "context_chars": 64, "max_steps": 100, "eval_every": 20, "eval_max_chars": 10_000,
                "final_eval_splits": "valid", "threads": 1, **({"lr": lr} if lr else {})}
    run = RunSpec("sha-rnn", "tiny", "byte", "wikitext-2", 0, settings, data_dir=str(wt2_data_dir),
                  out_dir=str(tmp_path / "run"))
    if stops:
        with pytest.raises(TrainingNotLearning, match="from step 40 to step 80"):
            train(run, show_progress=False)
    else:
        assert train(run, show_progress=False).status == "done"


def test_gradients_that_stay_zero_are_a_warning_in_the_log_and_the_result(data_dir, tmp_path, monkeypatch, capsys):
    import bench.models.lstm as lstm_module

    original = lstm_module.run_lstm
    monkeypatch.setattr(lstm_module, "run_lstm", lambda lstm, x, state, **w: (
        lambda out, new: (out * 0.0, new))(*original(lstm, x, state, **w)))  # the LSTMs' output multiplied by 0
    monkeypatch.setattr(learning, "ZERO_GRADIENT_STEPS", 10)
    result = train(spec(data_dir, tmp_path / "run", stop_if_not_learning=False, max_steps=16), show_progress=False)
    # the LSTMs, and the embedding (tied with the softmax, which now sees only zeros), not the output bias
    assert [w.split(" were")[0] for w in result.training.warnings] == ["the gradients of every Embedding",
                                                                       "the gradients of every LSTM"]
    assert "exactly zero for the 10 steps up to step 10" in result.training.warnings[1]
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "warning" in r] == [10, 10]
    assert "warning: the gradients of every LSTM" in capsys.readouterr().err
    monkeypatch.setattr(lstm_module, "run_lstm", original)
    healthy = train(spec(data_dir, tmp_path / "healthy", lr=1e-2, max_steps=16, stop_if_not_learning=False),
                    show_progress=False)
    assert healthy.training.warnings == []


def test_a_not_learning_run_is_labelled_in_the_matrix_and_its_report_and_never_drawn(data_dir, tmp_path, cli_here):
    import pandas as pd

    config = tmp_path / "stuck.toml"
    config.write_text(STUCK_MATRIX)
    outcome = run_matrix(config, tmp_path / "results", data_dir=data_dir, execution=Execution(show_progress=False))
    assert outcome.counts == {"not-learning": 1}
    table = pd.read_csv(tmp_path / "results" / "runs.csv")
    assert list(table["status"]) == ["not-learning"] and "unigram floor" in table["error"][0]
    refused = cli_here("report", str(tmp_path / "results"), "--out", str(tmp_path / "report"))
    assert refused.returncode != 0 and "no run has finished (1 not-learning" in refused.stderr


def test_the_floor_the_trainer_checks_is_the_reports_unigram_model():
    train_ids = np.array([1, 2, 2, 3, 3, 3])
    log_p = unigram_log_probs(train_ids, vocab_size=5, bos_id=0)
    assert log_p[0] == -np.inf and np.isclose(np.exp(log_p[1:]).sum(), 1.0)
    assert np.isclose(np.exp(log_p[3]), 4 / 10)  # add-one: (3 + 1) / (6 + 4)
    assert np.isclose(unigram_nll(log_p, np.array([3, 4])), -np.log(0.4) - np.log(0.1))
    assert clearly_below(0.9, 1.0) and not clearly_below(0.91, 1.0)
    assert clearly_below(0.98, 1.0, learning.STARTED_BELOW) and not clearly_below(0.99, 1.0, learning.STARTED_BELOW)
