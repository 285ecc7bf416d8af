"""orbitlaw: discover physical laws with sequence models.

Four rooms, each with one job, installed inside this package: :mod:`orbitlaw.orbits` (simulation and
datasets), :mod:`orbitlaw.models` (sequence models and their trainer), :mod:`orbitlaw.kernels` (Triton
attention kernels) and :mod:`orbitlaw.discovery` (probes, symbolic regression, verdicts). This package's
own modules are the command-line interface and the study that sit on top of them.

In the repository the rooms keep their folders at the top level (``orbits/`` beside ``orbitlaw/``);
the wheel maps them inside ``orbitlaw/`` (``pyproject.toml``, ``package-dir``). So that a source tree
imports the same way, with or without an install (a checkout on ``PYTHONPATH``, a ``git worktree``),
this package's search path also holds the folder above it when the rooms sit there rather than inside.

The toolkit from Python (:mod:`orbitlaw.api`), loaded on first use so that ``import orbitlaw`` and ``--help``
import no torch::

    orbitlaw.simulate(preset, splits, out)     orbitlaw.train(data, out, **TrainConfig fields)
    orbitlaw.probe(out, run=..., data=...)     orbitlaw.discover(table, target, **DiscoverConfig fields) -> Law
    orbitlaw.load_dataset(path)                orbitlaw.load_model(run)
    orbitlaw.LawRegressor(...).fit(X, y)       orbitlaw.Law.read("LAW.json")
    orbitlaw.import_trajectories(sims, out)    orbitlaw.export_parquet(data, out) / import_parquet(folder, out)
"""

from pathlib import Path as _Path

_ROOMS = ("orbits", "models", "kernels", "discovery")  # as orbitlaw.provenance.ROOMS

_here = _Path(__file__).resolve().parent
if not (_here / "orbits").is_dir() and all((_here.parent / room / "__init__.py").is_file() for room in _ROOMS):
    __path__.append(str(_here.parent))  # noqa: F821 (a package's __path__)

__version__ = "0.1.0"

_API = {"simulate": "orbitlaw.api", "train": "orbitlaw.api", "probe": "orbitlaw.api", "discover": "orbitlaw.api",
        "load_dataset": "orbitlaw.api", "load_model": "orbitlaw.api",
        "import_trajectories": "orbitlaw.orbits.importer", "export_parquet": "orbitlaw.orbits.parquet",
        "import_parquet": "orbitlaw.orbits.parquet",
        "Law": "orbitlaw.discovery.sr.regressor", "LawRegressor": "orbitlaw.discovery.sr.regressor"}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """The API's names (:data:`_API`), imported on first use."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'orbitlaw' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
