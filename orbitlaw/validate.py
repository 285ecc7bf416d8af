"""Checks for config fields, shared by every room's config dataclass.

A library error names the *field* (``max_steps must be >= 1, got 0``), since notebooks call the library
with keyword arguments; the command line knows which flag sets which field and names the flag instead
(``orbitlaw.cli``: ``--max-steps must be >= 1, got 0``). A toolkit-wide leaf module, like
:mod:`orbitlaw.provenance`: every room may import it, and it imports nothing of orbitlaw's.

    from orbitlaw.validate import at_least, one_of

    def validate(self):
        at_least(self, 1, "max_steps", "batch_size")   # None means "not set" and passes
        at_least(self, 0, "warmup_steps")
        one_of(self, "precision", PRECISIONS)
"""

from __future__ import annotations

import math
from collections.abc import Iterable


class FieldError(ValueError):
    """A field of a config holds a value it cannot take. ``field`` is the dataclass field (or the keyword
    argument) and the message starts with it; ``orbitlaw.cli`` swaps it for the flag that sets it."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field} {problem}")


def at_least(config, minimum: float, *names: str) -> None:
    """Each named field of ``config`` is None (unset) or a number >= ``minimum``; else :class:`FieldError`."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not value >= minimum:
            raise FieldError(name, f"must be >= {minimum}, got {value}")


def finite_at_least(config, minimum: float, *names: str, unit: str = "") -> None:
    """Each named field is a finite number >= ``minimum`` (``unit`` is named in the error, e.g. "AU")."""
    for name in names:
        value = getattr(config, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= minimum):
            raise FieldError(name, f"must be a finite number >= {minimum}{f' ({unit})' if unit else ''}, "
                             f"got {value}")


def positive(config, *names: str) -> None:
    """Each named field is a finite number > 0."""
    for name in names:
        value = getattr(config, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise FieldError(name, f"must be > 0, got {value}")


def one_of(config, name: str, choices: Iterable[str]) -> None:
    """The field's value is one of ``choices``."""
    choices = tuple(choices)
    value = getattr(config, name)
    if value not in choices:
        raise FieldError(name, f"must be one of {', '.join(map(str, choices))}; got {value!r}")
