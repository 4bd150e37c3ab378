"""Running a documentation page's commands (tests/docs_pages.py says which): in a folder of their own holding
copies of the checkout's configs and scripts, `bench` in this process (a torch import saved per command), the rest
through bash; each under a time limit, its output kept for the failure message."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

from tests.docs_pages import REPO, Command

# What a page's folder holds from the checkout, as a user's checkout would have it: configs and scripts for the
# commands, the committed reference results, and what `make demo` / `make docs` read.
FROM_CHECKOUT = ("configs", "scripts", "results/reference", "cli.py", "Makefile", "pyproject.toml", "requirements",
                 "mkdocs.yml", "docs", "docs_hooks", "README.md")
# `make` in a page's folder uses this environment's venv, and the Makefile's set-up stamps are the folder's own,
# made after the copies it depends on: its set-up (`pip install -e .`) would otherwise install the page's folder
# as the package, into this venv. MAKEFLAGS' variables override the Makefile's, in sub-makes too.
MAKE_STAMPS = (".docs-test/installed-base", ".docs-test/installed")  # older first, as the Makefile's rules want
MAKEFLAGS = f"VENV={sys.prefix} BASE={MAKE_STAMPS[0]} STAMP={MAKE_STAMPS[1]}"
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Outcome:
    command: Command
    code: int | None  # None: stopped at the time limit
    output: str  # stdout and stderr together, as a terminal shows them
    seconds: float  # wall
    cpu_seconds: float
    left_running: int = 0  # worker processes still running when the command was over (then killed)

    def failure(self) -> str | None:
        """Why this command fails the page, or None."""
        if self.code is None:
            return "ran past the time limit"
        if self.code != 0:
            return f"exit status {self.code}"
        if TRACEBACK in self.output:
            return "printed a traceback"
        if self.left_running:
            return f"left {self.left_running} worker processes running"
        return None

    def report(self, lines: int = 30) -> str:
        how = "in this process" if self.command.in_process else "through bash"
        tail = self.output.rstrip().splitlines()[-lines:]
        return "\n".join([f"{self.command.where()}: {self.command.text}", f"  ({how}) {self.failure()} after "
                          f"{self.seconds:.1f} s; the last {len(tail)} lines of its output:",
                          *(f"  | {line}" for line in tail)])


def make_folder(folder: Path, shared_data: Path | None) -> None:
    """``folder`` as a fresh checkout's: copies of :data:`FROM_CHECKOUT` (their times kept), the set-up stamps of
    :data:`MAKEFLAGS` made after them, and a data/ folder with copies of the shared data folder's corpora (what a
    page's commands write there stays its own) and a link to its cache (every page uses the tokenizers and
    encoded splits trained once)."""
    for name in FROM_CHECKOUT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, folder / name)
    for stamp in MAKE_STAMPS:
        (folder / stamp).parent.mkdir(exist_ok=True)
        (folder / stamp).touch()
    data = folder / "data"
    data.mkdir()
    if shared_data is not None:
        (shared_data / "cache").mkdir(exist_ok=True)
        for entry in shared_data.iterdir():
            if entry.name == "cache":
                (data / "cache").symlink_to(entry, target_is_directory=True)
            elif entry.is_dir() and not entry.name.startswith("."):
                shutil.copytree(entry, data / entry.name)


def run(command: Command, seconds: float) -> Outcome:
    """Run one command in the current folder and environment."""
    started, cpu = time.perf_counter(), _cpu_seconds()
    if command.in_process:
        code, output, left_running = _in_process(command.argv(), seconds)
    else:
        (code, output), left_running = _through_bash(command.text, seconds), 0
    return Outcome(command, code, output, time.perf_counter() - started, _cpu_seconds() - cpu, left_running)


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children: what a command costs the suite, however busy the
    machine."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class _TimeLimit(BaseException):
    """Raised in a command that runs past its limit: not an Exception, which a run or a matrix catches to record
    it and go on."""


def _in_process(argv: list[str], seconds: float) -> tuple[int | None, str, int]:
    """``cli.main(argv)`` with every byte it and its child processes write to stdout and stderr caught (at the
    file descriptors, not only sys.stdout), an escaping exception turned into its traceback; then the worker
    processes it left running (a matrix stopped at the time limit) killed and counted, and the signal mask as
    it was."""
    import cli

    workers, mask = set(multiprocessing.active_children()), signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with tempfile.TemporaryFile() as sink, _descriptors_to(sink) as stream:
        try:
            with _time_limit(seconds), contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                code = cli.main(argv)
        except _TimeLimit:
            code = None
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:
            stream.write(traceback.format_exc())
            code = 1
        sink.seek(0)
        output = sink.read().decode("utf-8", errors="replace")
    left = [process for process in multiprocessing.active_children() if process not in workers]
    for process in left:
        process.kill()
        process.join()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return code, output, len(left)


@contextlib.contextmanager
def _descriptors_to(sink):
    """File descriptors 1 and 2 pointed at ``sink`` (a child process inherits them), and a text stream on it."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    os.dup2(sink.fileno(), 1)
    os.dup2(sink.fileno(), 2)
    stream = io.TextIOWrapper(os.fdopen(os.dup(sink.fileno()), "wb", buffering=0), encoding="utf-8",
                              write_through=True)
    try:
        yield stream
    finally:
        stream.close()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def _time_limit(seconds: float):
    """_TimeLimit raised after ``seconds``, and again every half second while the command goes on (a matrix
    records a failed run and starts the next); none outside the main thread, where signals cannot go."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = [True]

    def stop(signum, frame):
        if armed:  # a signal handled late, once the command is over, does nothing
            raise _TimeLimit()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        armed.clear()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _through_bash(line: str, seconds: float) -> tuple[int | None, str]:
    """``line`` through bash, with this environment's Python and `bench` first on the PATH; past the limit (or on
    Ctrl-C) its whole process group is killed, so that nothing it started runs on."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    process = subprocess.Popen(["bash", "-c", f"set -o pipefail\n{line}"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=seconds)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        code = None
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return code, output.decode("utf-8", errors="replace")


@contextlib.contextmanager
def page_state(folder: Path, environment: dict[str, str | None]):
    """The page's folder as the current one and ``environment`` applied (None: the variable unset); on leaving,
    the folder, the whole environment, torch's thread count and the warning filters as they were."""
    import torch

    before = (Path.cwd(), dict(os.environ), torch.get_num_threads())
    try:
        with warnings.catch_warnings():
            os.chdir(folder)
            for name, value in environment.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            yield
    finally:
        os.chdir(before[0])
        os.environ.clear()
        os.environ.update(before[1])
        torch.set_num_threads(before[2])
