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

A message that names a field mid-sentence, or names several, writes each name in backticks and is raised
with ``FieldError(message=...)``; the library's message keeps the backticks, the command line puts each field's
flag in their place (a name no flag of the command sets loses its backticks)::

    raise FieldError(message=f"`prompt_steps` {prompt_steps} + `steps` {steps} = {total} steps, but ...")
    # library:      `prompt_steps` 100 + `steps` 500 = 600 steps, but ...
    # command line: --prompt-steps 100 + --steps 500 = 600 steps, but ...

Backticks in such a message mean a field and nothing else (a name the user sets by that keyword or field).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

FIELD_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
"""A field named in a ``FieldError(message=...)``: an identifier in backticks."""


class FieldError(ValueError):
    """A field of a config holds a value it cannot take. ``field`` is the dataclass field (or the keyword
    argument) and the message starts with it; ``orbitlaw.cli`` swaps it for the flag that sets it.

    ``FieldError(message=...)`` is the error of a whole message that names its fields in backticks (see the
    module's docstring); ``field`` is then the first of them and ``problem`` the message. :meth:`render` names
    each field by its flag."""

    def __init__(self, field: str | None = None, problem: str | None = None, *, message: str | None = None):
        self.message = message
        if message is None:
            if field is None or problem is None:
                raise TypeError("FieldError takes a field and a problem, or a message")
            self.field, self.problem = field, problem
            super().__init__(f"{field} {problem}")
            return
        named = FIELD_NAME.findall(message)
        if not named or field is not None or problem is not None:
            raise TypeError(f"FieldError(message=...) names its fields in backticks, and only there: {message!r}")
        self.field, self.problem = named[0], message
        super().__init__(message)

    @property
    def fields(self) -> list[str]:
        """The fields the message names, in order."""
        return [self.field] if self.message is None else FIELD_NAME.findall(self.message)

    def render(self, flags: dict[str, str]) -> str:
        """The message with each field named by its entry in ``flags`` ({field: flag}); a field with none keeps
        its name (without the backticks)."""
        if self.message is None:
            return f"{flags.get(self.field, self.field)} {self.problem}"
        return FIELD_NAME.sub(lambda m: flags.get(m[1], m[1]), self.message)


def at_least(config, minimum: float, *names: str) -> None:
    """Each named field of ``config`` is None (unset) or a number >= ``minimum``; else :class:`FieldError`."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not value >= minimum:
            raise FieldError(name, f"must be >= {minimum}, got {value}")


def at_most(config, maximum: float, *names: str, why: str = "") -> None:
    """Each named field of ``config`` is None (unset) or a number <= ``maximum`` (``why`` says what the bound is
    for); else :class:`FieldError`. Sizes have upper bounds too, so a typo costs a one-line error, not a machine."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not value <= maximum:
            raise FieldError(name, f"must be <= {maximum:,}{f' ({why})' if why else ''}, got {value:,}")


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
