"""Every shell command of the documentation runs: README.md and docs/**/*.md, each page in a fresh folder, its
commands in page order; one that exits non-zero, prints a traceback or runs past COMMAND_SECONDS fails the page,
named with its line, its command and the end of its output. A page runs on past a failing command, so that its
test reports every failure at once (a later one may follow from an earlier).

The convention for page writers:

* Only fenced blocks whose info string's first word is ``bash`` run (```` ```bash ````); ``console``,
  ``text``, ``toml``, ``python`` and every other block never run.
* A block's lines are joined at trailing backslashes into logical lines. A logical line runs when its words begin
  (after any ``NAME=value`` assignments) with ``bench``, ``python cli.py``, ``python -m bench``,
  ``python scripts/``, ``scripts/``, ``./scripts/``, ``make demo`` or ``make docs`` (tests/docs_pages.py,
  RUN_PREFIXES). Every other line (pip install, cd, export, torchrun, tensorboard, make test...) is not run and
  is counted as "not a bench command"; comment lines are neither. A trailing ``# comment`` is fine.
* ``bench ...`` and ``python cli.py ...`` run in this process (``cli.main``, exactly what the ``bench`` command
  runs), unless the line needs a shell: a ``NAME=value`` first, or outside quotes one of ``| & ; < > ( ) $ ` * ?
  [ ] { } ~`` (so also ``runs/<run>``), or ``$``/backquote inside double quotes. Those lines, and every other
  line that runs, go through ``bash -c`` (with ``set -o pipefail``), with this environment's python and bench
  first on the PATH.
* ``<!-- docs-test: skip REASON -->`` on its own line just before a block's opening fence (blank lines between
  allowed): the block does not run. The marker is counted with its reason and the commands it holds (none, for a
  torchrun block); a skip without a reason is an error.
* ``<!-- docs-test: replace "OLD" "NEW" -->``, one marker line per substitution, one or more before a block:
  every OLD in the block becomes NEW before it runs (e.g. ``"--jobs 2" "--dry-run"``, ``"--preset paper"
  "--preset tiny --set max_steps=4"``). An OLD not found in its block is an error (a stale substitution), and so
  is a replace on a skipped block. The strings are read as shell words, so either quote works.
* A marker not followed by a ```bash fence, or not of these two forms, is an error. Marker errors fail the page's
  test before anything runs.
* Then the global substitutions of SUBSTITUTIONS below apply to every block, and every command runs with
  ENVIRONMENT below. A command runs for at most COMMAND_SECONDS; worker processes an in-process command leaves
  running fail it too (and are stopped).

Each page's folder holds copies of the checkout's configs/, scripts/, results/reference/ and what ``make demo`` and
``make docs`` read (tests/docs_run.py, FROM_CHECKOUT), and a data/ folder with WikiText-2 fetched once per session
from the offline mirror (its train split the partial copy, unverified) and the tokenizer cache shared by all pages.
The page's own ``bench data fetch`` commands still run.

The counts (commands run, lines not run, skipped blocks with their reasons, replacements): printed by
test_the_markers_of_the_documentation_are_well_formed_and_counted (shown with ``pytest -rA`` or ``-s``) and by
``python -m tests.test_docs_commands``. Each page's commands and their seconds are printed by its test.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
import torch

import bench.data.store
from tests.conftest import find_mirror
from tests.docs_pages import REPO, documentation_pages, line_runs, parse, plan, read_page, summary
from tests.docs_run import MAKEFLAGS, make_folder, page_state, run

pytestmark = pytest.mark.mirror

# Wall seconds, with room for a busy 2-core machine: a command that needs more belongs under a replace marker (a
# tiny preset, --dry-run, fewer steps); each page's test prints its commands' seconds.
COMMAND_SECONDS = 120
MIRROR = find_mirror()  # None: the pages' tests are skipped (the mirror fixture)

# The global substitutions, OLD -> NEW in every block that runs, after its own replace markers; counted.
SUBSTITUTIONS = {
    "../shared/data": str(MIRROR or "../shared/data"),  # the mirror, beside the checkout in the docs
}
# Every command's environment beside this process's (None: unset): the data folder is the page's ./data; the
# mirror is there for a `bench data fetch` without --mirror and for `make demo`; `make` uses this venv and never
# sets it up (tests/docs_run.py, MAKEFLAGS).
ENVIRONMENT = {"BENCH_DATA_DIR": None, "BENCH_DATA_MIRROR": str(MIRROR), "MAKEFLAGS": MAKEFLAGS}


def run_page(page, folder: Path, shared_data: Path | None, env: dict, seconds: float = COMMAND_SECONDS):
    if not page.commands:
        return []
    make_folder(folder, shared_data)
    with page_state(folder, env):
        return [run(command, seconds) for command in page.commands]


def _fail_on(outcomes) -> None:
    for outcome in outcomes:
        print(f"{outcome.seconds:6.1f} s {outcome.cpu_seconds:6.1f} s CPU  {outcome.command.where()}: "
              f"{outcome.command.text}")
    failed = [outcome.report() for outcome in outcomes if outcome.failure()]
    if failed:
        pytest.fail(f"{len(failed)} of {len(outcomes)} commands failed:\n\n" + "\n\n".join(failed), pytrace=False)


PAGES = documentation_pages()


@pytest.mark.parametrize("path", PAGES, ids=[path.relative_to(REPO).as_posix() for path in PAGES])
def test_every_command_of_the_page_runs(path, tmp_path, mirror, wt2_data_dir):
    page = read_page(path, SUBSTITUTIONS)
    assert not page.errors, "docs-test markers:\n" + "\n".join(page.errors)
    _fail_on(run_page(page, tmp_path / "page", wt2_data_dir, ENVIRONMENT))


def test_the_markers_of_the_documentation_are_well_formed_and_counted():
    pages = [read_page(path, SUBSTITUTIONS) for path in PAGES]
    assert [error for page in pages for error in page.errors] == []
    assert all(reason.strip() for page in pages for _, reason, _ in page.skipped)
    print(summary(pages))


# The runner's own tests, on pages written here.

def page_of(markdown: str):
    return plan(parse("page.md", markdown), {"../shared/data": "/mirror"})


@pytest.mark.parametrize("line, expected", [
    ("bench data list", (True, True)),
    ("bench data list   # a | b > c", (True, True)),
    ('bench sample runs/a --prompt "a > b"', (True, True)),
    ("python cli.py data list", (True, True)),
    ("python -m bench.engine.score.lm_eval_model --model bench", (True, False)),
    ("python scripts/demo_split.py a b", (True, False)),
    ("scripts/gpu/runbook.sh prove OUT", (True, False)),
    ("./scripts/demo.sh", (True, False)),
    ("make demo", (True, False)),
    ("make docs", (True, False)),
    ("OMP_NUM_THREADS=2 bench train", (True, False)),
    ("bench eval runs/<run>/best.pt", (True, False)),
    ("bench report results/quick | head", (True, False)),
    ('bench eval "$RUN"', (True, False)),
    ("make docs-serve", (False, False)),
    ("make test", (False, False)),
    ("pip install 'tokenization-bench[hf]'", (False, False)),
    ("torchrun --nproc-per-node 4 cli.py train", (False, False)),
    ("cd somewhere && bench data list", (False, False)),
    ("benchmark data", (False, False)),
])
def test_which_lines_run_and_where(line, expected):
    assert line_runs(line) == expected


def test_continuation_lines_are_joined_and_a_trailing_comment_is_left_out():
    page = page_of("text\n\n```bash\npip install x\nbench data list \\\n    --data-dir data   # a comment\n"
                   "# a comment line\n\nbench models list\n```\n")
    assert [(c.line, c.argv()) for c in page.commands] == [(5, ["data", "list", "--data-dir", "data"]),
                                                          (9, ["models", "list"])]
    assert page.not_run == 1 and page.errors == []


def test_only_bash_blocks_run():
    blocks = "".join(f"```{info}\nbench data list\n```\n\n" for info in ("console", "text", "toml", "python", "sh", ""))
    page = page_of(blocks + '  ```bash title="indented, with a title"\n  bench models list\n  ```\n')
    assert [c.text for c in page.commands] == ["bench models list"]
    assert page.other_blocks == 6


def test_a_skip_marker_keeps_its_block_from_running_and_is_counted_with_its_reason():
    page = page_of("<!-- docs-test: skip needs a GPU -->\n\n```bash\nbench train --preset paper\npip install x\n```\n"
                   "```bash\nbench models list\n```\n<!-- docs-test: skip several GPUs -->\n```bash\ntorchrun x\n```\n")
    assert [c.text for c in page.commands] == ["bench models list"]
    assert page.skipped == [(3, "needs a GPU", 1), (11, "several GPUs", 0)] and page.errors == []
    assert "skipped page.md:3 (1 commands): needs a GPU" in summary([page])
    assert "1 commands in 2 skipped blocks" in summary([page])


def test_replacements_then_global_substitutions_apply_and_are_counted():
    page = page_of('<!-- docs-test: replace "--jobs 2" "--dry-run" -->\n'
                   "<!-- docs-test: replace '--preset paper' '--preset tiny --set \"max_steps=4\"' -->\n"
                   "```bash\nbench run-matrix configs/a.toml --jobs 2 --preset paper --mirror ../shared/data\n```\n")
    assert [c.text for c in page.commands] == [
        'bench run-matrix configs/a.toml --dry-run --preset tiny --set "max_steps=4" --mirror /mirror']
    assert (page.replaced, page.substituted) == (2, {"../shared/data": 1})
    assert "2 replacements, global substitutions: '../shared/data' x1" in summary([page])


@pytest.mark.parametrize("markdown, problem", [
    ('<!-- docs-test: replace "--jobs 4" "--dry-run" -->\n```bash\nbench run-matrix a.toml --jobs 2\n```\n',
     "page.md:1: replace '--jobs 4': not in its block"),
    ("<!-- docs-test: skip -->\n```bash\nbench models list\n```\n", "page.md:1: a skip marker needs its reason"),
    ("<!-- docs-test: skip slow -->\n\nA paragraph.\n\n```bash\nbench models list\n```\n",
     "page.md:1: a docs-test marker must come just before"),
    ("text\n<!-- docs-test: skip slow -->\n", "page.md:2: a docs-test marker must come just before"),
    ("<!-- docs-test: skip slow -->\n```console\n$ bench models list\n```\n", "a docs-test marker before a ```console"),
    ("<!-- docs-test: skipp slow -->\n```bash\nbench models list\n```\n", "page.md:1: not a docs-test marker"),
    ('<!-- docs-test: replace "only-old" -->\n```bash\nbench models list\n```\n', "a replace marker takes two"),
    ('<!-- docs-test: skip slow -->\n<!-- docs-test: replace "a" "b" -->\n```bash\nbench a\n```\n',
     "a skipped block takes no replace marker"),
], ids=["stale-replace", "skip-without-reason", "orphan", "at-the-end", "before-console", "unknown-verb",
        "replace-one-string", "skip-and-replace"])
def test_a_marker_mistake_is_an_error(markdown, problem):
    assert any(problem in error for error in page_of(markdown).errors), page_of(markdown).errors


def run_fixture_page(markdown: str, folder: Path, seconds: float = COMMAND_SECONDS):
    page = page_of(markdown)
    assert page.errors == []
    return run_page(page, folder, None, ENVIRONMENT, seconds)


def test_a_failing_command_fails_with_its_line_command_and_output(tmp_path):
    failing, passing = run_fixture_page("```bash\nbench data verify nosuch\nbench data list\n```\n", tmp_path)
    assert failing.failure() == "exit status 1" and passing.failure() is None
    assert failing.report().startswith("page.md:2: bench data verify nosuch\n  (in this process) exit status 1")
    assert "| error: " in failing.report()  # the one-line error, caught from stderr
    assert "wikitext-2" in passing.output  # stdout caught


def test_a_traceback_fails_even_when_the_exit_status_is_0(tmp_path, monkeypatch):
    def prints_a_traceback_and_returns(data_dir):
        try:
            raise ValueError("caught")
        except ValueError:
            traceback.print_exc()
        return []

    monkeypatch.setattr(bench.data.store, "list_corpora", prints_a_traceback_and_returns)
    [outcome] = run_fixture_page("```bash\nbench data list\n```\n", tmp_path)
    assert outcome.code == 0 and outcome.failure() == "printed a traceback"


def test_an_exception_escaping_a_command_fails_it_with_its_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.data.store, "list_corpora", lambda data_dir: 1 / 0)
    [outcome] = run_fixture_page("```bash\nbench data list\n```\n", tmp_path)
    assert outcome.failure() == "exit status 1" and "ZeroDivisionError" in outcome.output


def test_output_written_to_the_descriptors_and_by_child_processes_is_caught(tmp_path, monkeypatch):
    def writes_everywhere(data_dir):
        os.write(2, b"straight to descriptor 2\n")
        subprocess.run(["echo", "from a child process"], check=True)
        return []

    monkeypatch.setattr(bench.data.store, "list_corpora", writes_everywhere)
    [outcome] = run_fixture_page("```bash\nbench data list\n```\n", tmp_path)
    assert "straight to descriptor 2" in outcome.output and "from a child process" in outcome.output


ADD_MINE = "bench data add mine --train README.md --valid pyproject.toml --test Makefile"  # three texts that share no passage


def test_blocks_run_in_page_order_in_the_page_folder_with_its_checkout_copies(tmp_path):
    in_order = run_fixture_page(f"```bash\n{ADD_MINE}\n```\n\n```bash\nbench data verify mine\n```\n", tmp_path / "a")
    assert [o.failure() for o in in_order] == [None, None], in_order[-1].output
    assert (tmp_path / "a" / "data" / "mine").is_dir()
    reversed_order = run_fixture_page(f"```bash\nbench data verify mine\n```\n\n```bash\n{ADD_MINE}\n```\n",
                                      tmp_path / "b")
    assert reversed_order[0].failure() == "exit status 1"


def test_lines_that_need_a_shell_run_through_bash_in_the_page_folder(tmp_path):
    outcomes = run_fixture_page(f"```bash\n{ADD_MINE}\nbench data verify mine | grep -c mine\nscripts/missing.sh\n"
                                "bench data list | grep -c nothing-like-this\n```\n", tmp_path)
    assert [(o.command.in_process, o.failure()) for o in outcomes] == [
        (True, None), (False, None), (False, "exit status 127"), (False, "exit status 1")]


def test_a_command_past_its_time_limit_fails_and_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.data.store, "list_corpora", lambda data_dir: time.sleep(30))
    started = time.perf_counter()
    outcomes = run_fixture_page("```bash\nbench data list\nbench data list && sleep 30\n```\n", tmp_path, seconds=1)
    assert [(o.command.in_process, o.failure()) for o in outcomes] == [(True, "ran past the time limit"),
                                                                      (False, "ran past the time limit")]
    assert time.perf_counter() - started < 10


def test_worker_processes_a_command_leaves_running_fail_it_and_are_stopped(tmp_path, monkeypatch):
    started = []

    def starts_a_worker(data_dir):
        started.append(multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,)))
        started[0].start()
        return []

    monkeypatch.setattr(bench.data.store, "list_corpora", starts_a_worker)
    [outcome] = run_fixture_page("```bash\nbench data list\n```\n", tmp_path)
    assert outcome.failure() == "left 1 worker processes running" and started[0].exitcode == -signal.SIGKILL


def test_make_in_a_page_folder_uses_this_venv_and_never_sets_it_up(tmp_path):
    make_folder(tmp_path, None)
    env = {**os.environ, **{k: v for k, v in ENVIRONMENT.items() if v is not None}}
    for target, command in (("demo", f'./scripts/demo.sh "{sys.prefix}/bin" "{MIRROR}"'),
                            ("docs", f"{sys.prefix}/bin/mkdocs build")):
        dry_run = subprocess.run(["make", "-n", target], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert command in dry_run.stdout, dry_run.stdout + dry_run.stderr
        assert "pip install" not in dry_run.stdout and "-m venv" not in dry_run.stdout, dry_run.stdout


def test_the_page_leaves_the_folder_environment_and_threads_as_it_found_them(tmp_path):
    before = (Path.cwd(), dict(os.environ), torch.get_num_threads())
    run_fixture_page("```bash\nbench data list\n```\n", tmp_path)
    assert (Path.cwd(), dict(os.environ), torch.get_num_threads()) == before


if __name__ == "__main__":
    print(summary([read_page(path, SUBSTITUTIONS) for path in PAGES]))
