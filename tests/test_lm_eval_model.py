"""A trained run as lm-evaluation-harness's model ``bench`` (bench.engine.lm_eval_model): on the same text (a
local-file task, no hub), lm-eval's word_perplexity, byte_perplexity and bits_per_byte equal ``bench eval``'s with
one stream within 1e-6, for a recurrent byte model and a windowed BPE one; loglikelihood agrees with itself."""

import json
import math

import pytest

lm_eval = pytest.importorskip("lm_eval")  # the dev extra (make test) installs it

from bench.data.user import add_user_corpus  # noqa: E402
from bench.engine.inference import evaluate_checkpoint  # noqa: E402
from bench.engine.lm_eval_model import BenchLM  # noqa: E402
from bench.engine.run import train  # noqa: E402
from bench.engine.spec import RunSpec  # noqa: E402

RUNS = {"sha-rnn-byte": ("sha-rnn", "byte", {"emsize": 16, "nhid": 64}),
        "transformer-bpe": ("transformer", "bpe:300", {"d_model": 16, "nheads": 2})}
SHARED = {"bptt": 16, "batch_size": 4, "max_steps": 8, "eval_every": 0, "eval_streams": 2, "eval_max_tokens": 300,
          "stop_if_not_learning": False, "final_eval_splits": "valid"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, make_text):
    """A user corpus whose test text neither begins nor ends with whitespace: where the two word counts agree."""
    root = tmp_path_factory.mktemp("plain")
    paths = {split: root / f"{split}.txt" for split in ("train", "valid", "test")}
    for seed, (split, path) in enumerate(paths.items()):
        path.write_text(make_text(n_lines=200 if split == "train" else 30, seed=seed).strip())
    add_user_corpus("plain", paths, root / "data")
    return root / "data", paths["test"].read_text()


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, corpus, tmp_path_factory):
    model, scheme, sizes = RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param) / "run"
    train(RunSpec(model=model, preset="tiny", tokenizer=scheme, dataset="plain", seed=0,
                  overrides={**SHARED, **sizes}, data_dir=str(corpus[0]), out_dir=str(out)), show_progress=False)
    return out


def lm_eval_scores(run, text, tmp_path) -> dict:
    from lm_eval.tasks import TaskManager

    (tmp_path / "doc.jsonl").write_text(json.dumps({"text": text}) + "\n")
    (tmp_path / "task.yaml").write_text(
        "task: bench_plain_test\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {tmp_path / 'doc.jsonl'}\ntest_split: test\noutput_type: loglikelihood_rolling\n"
        "doc_to_text: ''\ndoc_to_target: text\nmetric_list:\n  - metric: word_perplexity\n"
        "  - metric: byte_perplexity\n  - metric: bits_per_byte\n")
    results = lm_eval.simple_evaluate(model="bench", model_args=f"run={run},device=cpu", tasks=["bench_plain_test"],
                                      task_manager=TaskManager(include_path=str(tmp_path)))  # registered by name
    return {k.split(",")[0]: v for k, v in results["results"]["bench_plain_test"].items()}


@pytest.mark.slow
def test_lm_eval_scores_a_run_as_bench_eval_does(run, corpus, tmp_path):
    data_dir, text = corpus
    ours = evaluate_checkpoint(run / "best.pt", "test", data_dir, streams=1, device="cpu").metrics
    theirs = lm_eval_scores(run, text, tmp_path)
    assert theirs["word_perplexity"] == pytest.approx(ours.word_perplexity, rel=1e-6)
    assert theirs["bits_per_byte"] == pytest.approx(ours.bits_per_byte, rel=1e-6)
    assert theirs["byte_perplexity"] == pytest.approx(2 ** ours.bits_per_byte, rel=1e-6)


@pytest.mark.slow
def test_loglikelihood_of_a_continuation_adds_up(run, corpus):
    model = BenchLM(run=str(run), device="cpu")
    text = corpus[1][:300]
    context, continuation = text[:120], text[120:]

    def request(*args):
        return type("Request", (), {"args": args})()

    (whole, _), (before, _), (after, _) = model.loglikelihood(
        [request("", text), request("", context), request(context, continuation)])
    (rolling,) = model.loglikelihood_rolling([request(text)])
    assert whole == pytest.approx(rolling, rel=1e-9)  # the whole text after no context: the rolling score
    if "byte" in run.parent.name:  # bytes: the continuation's tokens are exactly those after the context's
        assert before + after == pytest.approx(whole, rel=1e-9)
    assert math.isfinite(after) and after < 0
