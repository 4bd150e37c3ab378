"""Shared test helpers, as fixtures: a synthetic corpus, adversarial strings, the command line and its
one-line errors, and the offline mirror when present."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Strings every lossless scheme must give back byte for byte.
ADVERSARIAL = [
    "",
    " ",
    "a",
    "hello world",
    "  two  spaces  ",
    "\ttabs\tbetween\t",
    "windows\r\nline\r\nends\r\n",
    "e\u0301 combining acute, n\u0303",
    "中文字符 日本語のテキスト 한국어",
    "emoji 😀 👍🏽 family 👨‍👩‍👧",
    "\n\n\nempty lines\n\n\n",
    "literal <unk> in text <unk>",
    "special tokens as text: <bos> <oov> <sp-unk> <bos><bos>",
    "  leading and trailing  ",
    "no-break\u00a0space and ideographic\u3000space",
    "sentencepiece mark \u2581 literal",
    "control \x00 \x0b \x0c \x1f chars",
    "unseen chars: ☃ ∮ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    " = Heading = \n \n Text with @-@ tokens , and <unk> . \n",
]

# `make test` hands whole modules to its workers in collection order: these go first, longest first, so that the
# workers end together (seconds on one 2-core machine, 2026-11-27: 170, 87, 58, 46, 43, 39; the next is under 30).
LONGEST_MODULES = ("test_gpu_runbook.py", "test_docs_commands.py", "test_matrix.py", "test_data_safety.py",
                   "test_export_hf.py", "test_plugin_package.py", "test_train.py", "test_scale_out.py")
for _name in LONGEST_MODULES:  # a renamed module would silently go back to the end
    assert (REPO / "tests" / _name).is_file(), f"tests/conftest.py's LONGEST_MODULES names a missing {_name}"


def pytest_configure(config):
    # One CPU thread per worker (the runs each starts take it from here): two workers on two cores, not four threads
    # fighting over them. A thread count the user set is kept.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


_WORDS = ("the of and to in a is was for on as by with from that at his her it an were are which this "
          "game season album song film river city war army ship team first second new one two three").split()


def synthetic_text(n_lines: int = 400, seed: int = 0) -> str:
    """A deterministic English-like corpus with some multi-byte characters."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 14))]
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), rng.choice(["café", "naïve", "Zürich", "東京", "<unk>"]))
        lines.append(" " + " ".join(words) + " . ")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def make_text():
    """``make_text(n_lines=400, seed=0)``: a deterministic English-like text."""
    return synthetic_text


@pytest.fixture
def toy_gru():
    """The toy GRU family (tests/toy_family.py) registered as ``toy-gru`` for the test: its name."""
    from tests.toy_family import registered

    with registered() as name:
        yield name


@pytest.fixture(scope="session")
def make_toy_corpus():
    """``make_toy_corpus(root) -> data folder``: a small user corpus "toy" (train 300 lines, valid and test 60)
    written under ``root`` and added to ``root / "data"``."""
    from bench.data.user import add_user_corpus

    def make(root: Path) -> Path:
        paths = {}
        for i, split in enumerate(("train", "valid", "test")):
            paths[split] = root / f"{split}.txt"
            paths[split].write_text(synthetic_text(n_lines=300 if split == "train" else 60, seed=i))
        add_user_corpus("toy", paths, root / "data")
        return root / "data"

    return make


@pytest.fixture(scope="session")
def corpus_text() -> str:
    return synthetic_text()


@pytest.fixture(scope="session")
def adversarial_texts() -> list[str]:
    return list(ADVERSARIAL)


def pytest_generate_tests(metafunc):
    """A test that takes ``adversarial_text`` runs once per adversarial string."""
    if "adversarial_text" in metafunc.fixturenames:
        metafunc.parametrize("adversarial_text", ADVERSARIAL, ids=[f"adversarial{i}" for i in range(len(ADVERSARIAL))])


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def _run_cli(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], capture_output=True, text=True,
                          env=env, cwd=cwd or REPO, timeout=600)


@pytest.fixture(scope="session")
def cli():
    """``cli(*args)``: run ``python cli.py ARGS`` in a subprocess; returns the CompletedProcess."""
    return _run_cli


def run_cli_here(*args) -> subprocess.CompletedProcess:
    import contextlib
    import io

    import cli as entry

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = entry.main(list(args))
    return subprocess.CompletedProcess(["cli.py", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def cli_here():
    """``cli_here(*args)``: ``cli.py ARGS`` in this process (no interpreter and imports to start: for refusals,
    which need no process of their own); an escaping exception fails the test. Returns a CompletedProcess."""
    return run_cli_here


def _assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str, code: int | None = None) -> None:
    assert result.returncode != 0
    if code is not None:
        assert result.returncode == code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="session")
def one_line_error():
    """``one_line_error(result, *fragments, code=None)``: the command failed with one line naming the fragments."""
    return _assert_one_line_error


def find_mirror() -> Path | None:
    candidates = [os.environ.get("BENCH_DATA_MIRROR"), REPO.parent / "shared" / "data"]
    for c in candidates:
        if c and (Path(c) / "wikitext-2" / "wiki.valid.tokens").is_file():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def mirror() -> Path:
    path = find_mirror()
    if path is None:
        pytest.skip("the offline corpus mirror (../shared/data or $BENCH_DATA_MIRROR) is not available")
    return path


@pytest.fixture(scope="session")
def wt2_data_dir(tmp_path_factory, mirror) -> Path:
    """A data folder with WikiText-2 fetched from the mirror (train: the partial copy, unverified)."""
    from bench.data.fetch import fetch

    data_dir = tmp_path_factory.mktemp("data")
    files = {}
    partial = mirror / "wikitext-2" / "wiki.train.first565.tokens"
    if not (mirror / "wikitext-2" / "wiki.train.tokens").is_file() and partial.is_file():
        files["train"] = partial
    fetch("wikitext-2", data_dir=data_dir, mirror=mirror, files=files, allow_unverified=True)
    return data_dir


@pytest.fixture()
def sigterm_after_step(monkeypatch):
    """``sigterm_after_step(n)``: training sends itself SIGTERM after step n, as a scheduler would; the function
    it returns puts the normal training step back."""
    from bench.engine.trainer import Trainer

    original = Trainer.train_step

    def arm(step: int):
        def step_then_signal(self):
            loss = original(self)
            if self.progress.step == step:
                os.kill(os.getpid(), signal.SIGTERM)
            return loss

        monkeypatch.setattr(Trainer, "train_step", step_then_signal)
        return lambda: monkeypatch.setattr(Trainer, "train_step", original)

    return arm


@pytest.fixture(autouse=True)
def signals_as_found():
    """Every test leaves Ctrl-C as it found it: a SIGINT blocked or ignored in this process is inherited by every
    command a later test starts, whose Ctrl-C then never arrives (a matrix whose workers alone stopped)."""
    before = (signal.getsignal(signal.SIGINT), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    yield
    after = (signal.getsignal(signal.SIGINT), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    signal.signal(signal.SIGINT, before[0])
    signal.pthread_sigmask(signal.SIG_UNBLOCK if not before[1] else signal.SIG_BLOCK, {signal.SIGINT})
    assert after == before, f"this test left SIGINT {after} (handler, blocked); it found it {before}"


@pytest.fixture()
def one_thread():
    """Steps of a tiny model: hundreds of small operations, where a second thread only waits for the first (or, on a
    busy machine, for another job's: 50 times longer seen)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture()
def crash_at_step(monkeypatch):
    """``crash_at_step(n)``: the trainer raises RuntimeError("killed") when it is about to train step n, as a process
    killed there stops; ``crash_at_step(None)`` trains on again."""
    from bench.engine.trainer import Trainer

    original = Trainer.train_step

    def arm(step: int | None) -> None:
        def crash(self):
            if self.progress.step == step:
                raise RuntimeError("killed")
            return original(self)

        monkeypatch.setattr(Trainer, "train_step", original if step is None else crash)

    return arm
