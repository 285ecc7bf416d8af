"""orbits: planetary systems simulated exactly and written as trajectory datasets.

Units everywhere: AU, years, solar masses (G = 4 pi^2 AU^3 / (M_sun yr^2), :mod:`orbitlaw.orbits.constants`).
Depends on nothing else in orbitlaw. Entry points: :func:`simulate` writes a dataset (:mod:`~orbitlaw.orbits.writer`),
:func:`load_dataset` reads one (:mod:`~orbitlaw.orbits.reader`), :func:`plot_system` draws a system's orbits; the
dataset presets are records in :mod:`orbitlaw.orbits.presets`, the analytic engine is in :mod:`orbitlaw.orbits.kepler`,
exact N-body in :mod:`orbitlaw.orbits.nbody`, the pair tokeniser in :mod:`orbitlaw.orbits.tokenizer`.
"""

from orbitlaw.orbits.constants import G
from orbitlaw.orbits.kepler import relative_states, solve_kepler
from orbitlaw.orbits.manifest import check_manifest, parse_splits
from orbitlaw.orbits.numba_cache import drop_stale_cache
from orbitlaw.orbits.plot import plot_system
from orbitlaw.orbits.presets import DATASET_PRESETS, preset_params
from orbitlaw.orbits.reader import Split, load_dataset
from orbitlaw.orbits.systems import SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.orbits.writer import simulate

__all__ = ["DATASET_PRESETS", "G", "Split", "SystemBatch", "TokenizerSpec", "check_manifest", "load_dataset",
           "parse_splits", "plot_system", "preset_params", "relative_states", "simulate", "solve_kepler"]

# numba loads a cached kernel on the kernel's first call, not on import, so this is in time.
drop_stale_cache()
