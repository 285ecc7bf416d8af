"""What several commands' parsers share: the sub-parser of a command, and the flags and values they spell alike.

Light on purpose, like :mod:`orbitlaw.commands._choices`: building the parser imports neither torch nor numba.
"""

from __future__ import annotations

import os


def command(sub, name: str, run, **texts):
    """The sub-parser of command ``name`` (``texts``: its ``help`` and ``description``), which runs ``run(args)``."""
    parser = sub.add_parser(name, **texts)
    parser.set_defaults(func=run)
    return parser


def add_quiet(parser, bars: str = "bar") -> None:
    """``--quiet``: no progress bar (``bars``: what the command draws, "bar" or "bars")."""
    parser.add_argument("--quiet", action="store_true", help=f"no progress {bars}")


def default_workers() -> int:
    """Processes a command runs side by side unless told: two, or one on a one-core machine."""
    return min(2, os.cpu_count() or 1)


def names(text: str, flag: str) -> list[str]:
    """The comma-separated names of ``flag``'s value; ValueError (one line) for an empty one."""
    listed = [n.strip() for n in text.split(",")]
    if not all(listed):
        raise ValueError(f"{flag} must be comma-separated column names, got {text!r}")
    return listed


def config_fields(args, config, **given) -> dict:
    """The keyword arguments of dataclass ``config`` from parsed ``args``: every field whose name is a flag's
    ``dest`` takes the flag's value, and ``given`` (fields the command computes from its flags) the rest, so a
    command never copies its flags one keyword at a time."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(given) - names)
    if unknown:
        raise TypeError(f"{config.__name__} has no field {', '.join(unknown)}")
    return {**{n: getattr(args, n) for n in names if hasattr(args, n)}, **given}
