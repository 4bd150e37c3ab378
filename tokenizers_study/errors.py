"""The exception for mistakes a user can fix: a bad scheme name, a missing or corrupt tokenizer file."""


class TokenizerError(Exception):
    """A user-facing error; its message names the problem and the fix."""
