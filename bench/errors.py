"""The one exception type the CLI turns into a one-line message.

Raise :class:`BenchError` for anything the *user* can fix (an unknown name, a
bad value, a missing or corrupt file). The message should name the problem and
the fix. Bugs stay ordinary exceptions and keep their tracebacks.
"""


class BenchError(Exception):
    """A user-facing error: printed as ``error: <message>`` with a non-zero exit."""

    exit_code = 1
