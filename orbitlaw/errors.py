"""The error a user can fix (a bad flag value, a bad file): the CLI prints it as one line and exits 2."""


class UserError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""
