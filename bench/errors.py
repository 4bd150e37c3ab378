"""The exception types the CLI turns into a one-line message.

Raise :class:`BenchError` for anything the *user* can fix (an unknown name, a
bad value, a missing or corrupt file); ``tokenizers_study`` raises its own
:class:`~tokenizers_study.errors.TokenizerError` for the same kind of mistake.
The message should name the problem and the fix. Bugs stay ordinary exceptions
and keep their tracebacks.
"""

from tokenizers_study.errors import TokenizerError


class BenchError(Exception):
    """A user-facing error: printed as ``error: <message>`` with a non-zero exit."""

    exit_code = 1


# The exceptions the CLI prints as one line.
USER_ERRORS = (BenchError, TokenizerError)
