"""Bad input to ``bench speed`` (and the same layer_overlap to ``bench train``), each refused in one line before
anything is allocated or written: evaluation streams whose logits cannot fit in memory, more overlapped chunks than a
segment has positions; and the variant a measurement ran with, named in its lines. CATALOGUE follows the form of
tests/test_bad_inputs.py's CASES, for the catalogue script."""

from pathlib import Path

import pytest

from bench.data.facts import load_data_facts
from tests.test_bad_inputs import call, expand
from tests.verdict_catalogues import WORKS, check_case


QUICK = ["--steps", "1", "--warmup", "0", "--set", "threads=1"]
TRAIN = ["train", "--dataset", "toy", "--data-dir", "{data}", "--quiet", "--out", "{new}", "--set", "max_steps=2"]
CATALOGUE = [
    ("speed: more evaluation streams than memory holds", ["speed", *QUICK, "--eval-streams", "100000000"],
     "--eval-streams 100,000,000 in chunks of 128 tokens: evaluation needs at least"),
    ("speed: one stream count of several beyond memory", ["speed", *QUICK, "--eval-streams", "2,100000000"],
     "--eval-streams 100,000,000 in chunks of 128 tokens: evaluation needs at least"),
    ("speed: layer_overlap beyond the segment", ["speed", *QUICK, "--set", "layer_overlap=300"],
     "layer_overlap (300) is more chunks than the 64 positions of a segment (bptt 64)"),
    ("speed: layer_overlap beyond the evaluation chunk", ["speed", *QUICK, "--set", "layer_overlap=64", "--set",
                                                         "eval_chunk=32"],
     "layer_overlap (64) is more chunks than the 32 positions of a segment (eval_chunk 32)"),
    ("train: layer_overlap beyond the segment", [*TRAIN, "--set", "layer_overlap=300"],
     "set layer_overlap to at most 64, or raise bptt"),
    ("speed: the variant measured is named", ["speed", *QUICK, "--eval-streams", "2", "--set", "layer_overlap=4"],
     WORKS + "train [threads=1 layer_overlap=4]: "),
]


def places(box: Path, sandbox_places: dict) -> dict:
    """The cases use the sandbox's {data} and {new} only."""
    return {}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, make_toy_corpus) -> dict:
    """The places of tests/test_bad_inputs.py's sandbox these cases use ({sandbox}, {data}, {new}), without its
    runs."""
    root = tmp_path_factory.mktemp("speed-refusals")
    make_toy_corpus(root)
    load_data_facts("toy", "byte", root / "data")  # the corpus tokenized once, as the sandbox's runs leave it
    found = {"sandbox": root, "data": root / "data", "new": root / "new-run"}
    return {key: str(value) for key, value in {**found, **places(root, found)}.items()}


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CATALOGUE],
                         ids=[name for name, _, _ in CATALOGUE])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(sandbox, args, fragment, one_thread):
    check_case(Path(sandbox["sandbox"]), [expand(a, sandbox) for a in args], fragment, call)
