"""The exception types the CLI turns into a one-line message.

Raise :class:`BenchError` for anything the *user* can fix (an unknown name, a
bad value, a missing or corrupt file); ``tokenizers_study`` raises its own
:class:`~tokenizers_study.errors.TokenizerError` for the same kind of mistake.
The message should name the problem and the fix. Bugs stay ordinary exceptions
and keep their tracebacks.
"""

import errno

from tokenizers_study.errors import TokenizerError


class BenchError(Exception):
    """A user-facing error: printed as ``error: <message>`` with a non-zero exit."""

    exit_code = 1


# The exceptions the CLI prints as one line.
USER_ERRORS = (BenchError, TokenizerError)

_FILE_SYSTEM_FIXES = {
    errno.EACCES: "check the permissions or choose another folder",
    errno.EPERM: "check the permissions or choose another folder",
    errno.EROFS: "the file system is read-only; choose a writable folder",
    errno.ENOSPC: "the disk is full; free some space or choose another disk",
    errno.EDQUOT: "the disk quota is exhausted; free some space or choose another disk",
    errno.EFBIG: "the file is larger than this system allows; free space or raise the limit",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
    errno.EISDIR: "it is a folder; give a file",
    errno.ENOENT: "a folder on the path does not exist or cannot be made there; choose another path",
    errno.ENAMETOOLONG: "a name in the path is longer than the file system allows; choose a shorter path",
}


def file_system_error(exc: OSError) -> str | None:
    """One line for an OSError the user can fix (permissions, read-only or full disk), else None."""
    fix = _FILE_SYSTEM_FIXES.get(exc.errno)
    if fix is None:
        return None
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}; {fix}"
