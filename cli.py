"""The ``bench`` command line (also ``python cli.py``).

The commands live in :mod:`bench.commands`, one module per group; this file
assembles them and turns errors the user can fix into one line (``error: ...``)
with a non-zero exit status, never a traceback (see :func:`main`).
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):
    # Nothing is written yet: leave at once. SystemExit raised here could be swallowed by an imported library's
    # bare `except:`, and the command would then run on as if Ctrl-C had never come.
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)


# Ctrl-C while the commands' modules are imported and the command line is built: a clean exit 130, as later,
# not a traceback; main() hands Ctrl-C back to KeyboardInterrupt once it can catch it
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

import typer  # noqa: E402

from bench.commands import config, data, models, records, runs, speed, study, tokenize  # noqa: E402
from bench.errors import USER_ERRORS, file_system_error  # noqa: E402

app = typer.Typer(
    help="Compare language models fairly across tokenizations: corpora, tokenization schemes, "
    "training, evaluation and normalized metrics (bits per byte/char, word perplexity).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: a flag is shown as a flag, not as an option taking <bool>
)
app.add_typer(data.app, name="data")
app.add_typer(tokenize.app, name="tokenize")
app.add_typer(models.app, name="models")
app.add_typer(config.app, name="config")
app.add_typer(records.app, name="records")
app.command("train")(runs.train_command)
app.command("eval")(runs.eval_command)
app.command("sample")(runs.sample_command)
app.command("speed")(speed.speed_command)
app.command("eval-hf")(runs.eval_hf_command)
app.command("export")(runs.export_command)
app.command("baselines")(data.baselines_command)
app.command("run-matrix")(study.run_matrix_command)
app.command("report")(study.report_command)
app.command("compare")(study.compare_command)
app.command("reproduce")(study.reproduce_command)


def _click_exceptions():
    """Click's exception classes: recent Typer versions vendor their own copy of click."""
    try:
        from typer._click import exceptions
    except ImportError:  # Typer that uses the click package
        from click import exceptions
    return exceptions


def _error(message: str) -> None:
    """A user error on stderr, once: under torchrun every process fails alike and the main one says so."""
    if os.environ.get("RANK", "0") == "0":
        print(message, file=sys.stderr)


# Options that name a file or folder: an empty value (an unset shell variable in `--out "$OUT"`) would mean the
# current folder, so it is refused instead.
PATH_OPTIONS = ("--out", "--results", "--data-dir", "--dump-token-losses", "--mirror", "--config", "--train",
                "--valid", "--test", "--records", "--reproduced")


def _empty_path_option(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        option, sep, value = arg.partition("=")
        if option in PATH_OPTIONS and (value if sep else argv[i + 1] if i + 1 < len(argv) else "x").strip() == "":
            return option
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors become one line on stderr and a non-zero exit, never a traceback."""
    errors = _click_exceptions()
    empty = _empty_path_option(sys.argv[1:] if argv is None else argv)
    if empty:
        _error(f"error: {empty} is empty; give a path, or leave {empty} out for its default")
        return 2
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:  # from here Ctrl-C is caught below
            signal.signal(signal.SIGINT, signal.default_int_handler)
        command = typer.main.get_command(app)
        result = command.main(args=argv, prog_name="bench", standalone_mode=False)
    except errors.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help())
        return 0
    except errors.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "bench"
        _error(f"error: {exc.format_message()} (see: {where} --help)")
        return 2
    except errors.ClickException as exc:
        _error(f"error: {exc.format_message()}")
        return exc.exit_code or 1
    except USER_ERRORS as exc:
        _error(f"error: {exc}")
        return getattr(exc, "exit_code", 1)
    except OSError as exc:
        message = file_system_error(exc)
        if message is None:
            raise
        _error(f"error: {message}")
        return 1
    except typer.Abort as exc:
        if isinstance(exc.__cause__, EOFError):  # click turns EOFError into Abort: a truncated file, not Ctrl-C
            _error(f"error: a file ended early ({exc.__cause__ or 'EOFError'}); it is truncated or corrupt")
            return 1
        print("interrupted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:
        if exc.exit_code == 130:  # Typer's form of Ctrl-C in some commands
            print("interrupted", file=sys.stderr)
        return exc.exit_code
    if result == 130:  # Typer's form of Ctrl-C: KeyboardInterrupt returned as Exit(130)
        print("interrupted", file=sys.stderr)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
