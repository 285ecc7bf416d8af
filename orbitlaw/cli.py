"""The ``orbitlaw`` command: one sub-command per stage of the study.

Each sub-command lives in ``orbitlaw/commands/<name>.py`` and exposes ``add_parser(subparsers)``
(which registers its flags and sets ``func``) so that adding a stage never touches this file's logic.
Building the parser imports only argument definitions: ``add_parser`` takes its choices from light modules
(``orbitlaw/commands/_choices.py`` copies those whose owners import torch or numba) and ``func`` imports the
command's working modules when it runs, so ``orbitlaw --help`` answers at once and a command that needs no torch
never imports it (tests/test_cli_startup.py, benchmarks/cli_startup.py).
Errors that a user can fix are raised as :class:`UserError` (or ``ValueError``/``OSError`` from the
library) and printed as one line on stderr with exit status 2 (1 for I/O failures). A library error about a
config field (:class:`orbitlaw.validate.FieldError`) names the field, or names several in backticks; this file
names each by the flag that sets it: the flag whose ``dest`` is the field, or the command's ``field_flags``
default where the names differ (a field the command has no flag for keeps its name, without the backticks).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import sys

from orbitlaw import __version__
from orbitlaw.errors import UserError
from orbitlaw.validate import FieldError

# The order of the study; any other module in orbitlaw/commands is listed after these.
ORDER = ["run", "simulate", "plot", "train", "evaluate", "probe", "discover", "llm"]


def commands() -> list[str]:
    """Names of the sub-command modules in ``orbitlaw/commands``, in the study's order."""
    import orbitlaw.commands as package

    found = {m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``orbitlaw simulate: error: ... (see --help)``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="orbitlaw", description="Discover physical laws with sequence models."
    )
    parser.add_argument("--version", action="version", version=f"orbitlaw {__version__}")
    parser.add_argument("--allow-unchecked", action="store_true",
                        help="load checkpoints that have no checksums.json (from before checksums), unchecked")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in commands():
        importlib.import_module(f"orbitlaw.commands.{name}").add_parser(sub)
    for command in sub.choices.values():
        _name_flags(command)
    return parser


def _name_flags(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every sub-command below it a ``flags`` default, {config field: its flag}: the flag
    whose ``dest`` is the field, or the command's ``field_flags`` where the names differ. The innermost
    command's defaults win, so ``orbitlaw llm run`` names ``llm run``'s flags."""
    flags = {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings}
    parser.set_defaults(flags=flags | (parser.get_default("field_flags") or {}))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _name_flags(command)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. A process that is one rank of ``torchrun`` (``WORLD_SIZE`` > 1, ``argv``
    from the command line) ends here with ``os._exit`` once its output is flushed: its process group is already
    torn down and every file written, and skipping the interpreter's shutdown avoids the SIGABRT ("terminate
    called without an active exception") that gloo's threads can raise there, which torchrun reports as a
    failed run (seen once in CI)."""
    code = _main(argv)
    if argv is None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.allow_unchecked:  # through the environment, so torchrun's and the study's processes see it too
        from orbitlaw.models.checkpoint import ALLOW_UNCHECKED_ENV

        os.environ[ALLOW_UNCHECKED_ENV] = "1"
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError) as exc:  # a FieldError names each field by the flag that set it
        message = exc.render(getattr(args, "flags", None) or {}) if isinstance(exc, FieldError) else exc
        print(f"orbitlaw {args.command}: error: {message}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a failure the user can only retry (e.g. a killed worker process)
        if os.environ.get("ORBITLAW_DEBUG"):
            raise
        print(f"orbitlaw {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the library names the file it was writing (orbitlaw.provenance.naming)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        print(f"orbitlaw {args.command}: error: {exc.strerror or exc}"
              + (f": {exc.filename}" if exc.filename else "")
              + ("; free some space there and re-run the same command" if full else ""), file=sys.stderr)
        return 1 if full or exc.errno in (errno.EIO, errno.EAGAIN, None) else 2  # a path the user gave: 2
    except MemoryError:
        print(f"orbitlaw {args.command}: error: out of memory: the sizes asked for (sequence length, steps, "
              "batch, splits) do not fit this machine", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"orbitlaw {args.command}: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
