"""orbits: planetary systems simulated exactly and written as trajectory datasets.

Units everywhere: AU, years, solar masses (G = 4 pi^2 AU^3 / (M_sun yr^2)). Depends on nothing else in
orbitlaw. Entry points: :func:`simulate` writes a dataset, :func:`load_dataset` reads one,
:func:`plot_system` draws a system's orbits; the analytic engine is in :mod:`orbitlaw.orbits.kepler`, exact
N-body in :mod:`orbitlaw.orbits.nbody`, the pair tokeniser in :mod:`orbitlaw.orbits.tokenizer`.
"""

from orbitlaw.orbits.dataset import Split, load_dataset, parse_splits, simulate
from orbitlaw.orbits.kepler import relative_states, solve_kepler
from orbitlaw.orbits.numba_cache import drop_stale_cache
from orbitlaw.orbits.plot import plot_system
from orbitlaw.orbits.presets import PRESETS, preset_params
from orbitlaw.orbits.systems import G, SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec

__all__ = ["G", "PRESETS", "Split", "SystemBatch", "TokenizerSpec", "load_dataset", "parse_splits",
           "plot_system", "preset_params", "relative_states", "simulate", "solve_kepler"]

# numba loads a cached kernel on the kernel's first call, not on import, so this is in time.
drop_stale_cache()
