"""The error a user can fix (a bad flag value, a bad file): the CLI prints it as one line and exits 2."""


class UserError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for a one-line error that quotes it (its type's name when the
    message is empty, where ``str(exc).splitlines()[0]`` would itself fail)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
