"""orbitlaw: discover physical laws with sequence models.

Four rooms, each with one job, installed inside this package: :mod:`orbitlaw.orbits` (simulation and
datasets), :mod:`orbitlaw.models` (sequence models and their trainer), :mod:`orbitlaw.kernels` (Triton
attention kernels) and :mod:`orbitlaw.discovery` (probes, symbolic regression, verdicts). This package's
own modules are the command-line interface and the study that sit on top of them.

In the repository the rooms keep their folders at the top level (``orbits/`` beside ``orbitlaw/``);
the wheel maps them inside ``orbitlaw/`` (``pyproject.toml``, ``package-dir``). So that a source tree
imports the same way, with or without an install (a checkout on ``PYTHONPATH``, a ``git worktree``),
this package's search path also holds the folder above it when the rooms sit there rather than inside.
"""

from pathlib import Path as _Path

_ROOMS = ("orbits", "models", "kernels", "discovery")  # as orbitlaw.provenance.ROOMS

_here = _Path(__file__).resolve().parent
if not (_here / "orbits").is_dir() and all((_here.parent / room / "__init__.py").is_file() for room in _ROOMS):
    __path__.append(str(_here.parent))  # noqa: F821 (a package's __path__)

__version__ = "0.1.0"
