"""A batch of planetary systems: the per-sequence physics every generator works from.

Shapes use ``n`` sequences and ``P`` planet slots (the preset's maximum number of planets); absent
planets are NaN. Body order everywhere: planets 1..N, then the star, which always sits in the last body
slot (index ``P``) so that ``masses[:, -1]`` is the star. Units: AU, years, solar masses, radians.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from orbitlaw.orbits.constants import G


@dataclass
class SystemBatch:
    """Initial conditions of ``n`` systems with up to ``P`` planets each.

    n_planets: (n,) int, planets in each system.
    masses: (n, P + 1) M_sun; planets then the star (last column); NaN for absent planets.
    a, e, omega, mean_anomaly0: (n, P) semi-major axis (AU), eccentricity, periapsis angle from +x (rad)
        and mean anomaly at t = 0 (rad) of each planet's orbit relative to the star; NaN when absent.
    com: (n, 2) AU, centre of mass (of the star and each planet's two-body pair in the reference model).
    dt: (n,) yr, time step; dt_index: (n,) which of the tokenizer's time steps it is.
    star_frozen: (n,) bool, reference model for multi-planet systems: the star is pinned at
        ``star_position`` (n, 2) AU and each planet follows its relative orbit around it.
    """

    n_planets: np.ndarray
    masses: np.ndarray
    a: np.ndarray
    e: np.ndarray
    omega: np.ndarray
    mean_anomaly0: np.ndarray
    com: np.ndarray
    dt: np.ndarray
    dt_index: np.ndarray
    star_frozen: np.ndarray
    star_position: np.ndarray

    def __len__(self) -> int:
        return int(self.n_planets.shape[0])

    @property
    def max_planets(self) -> int:
        return int(self.a.shape[1])

    def mean_motion(self) -> np.ndarray:
        """(n, P) rad/yr, n = sqrt(G (m_planet + m_star) / a^3)."""
        return np.sqrt(G * (self.masses[:, :-1] + self.masses[:, -1:]) / self.a**3)

    def subset(self, rows) -> SystemBatch:
        """The systems selected by ``rows`` (a slice, index array or mask)."""
        return SystemBatch(**{name: value[rows] for name, value in self.arrays().items()})

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def validate(self) -> None:
        """Raise ValueError naming the first physical problem: e >= 1, non-positive mass or a, NaN."""
        planet = np.arange(self.max_planets)[None, :] < self.n_planets[:, None]
        if np.any(self.n_planets < 1):
            raise ValueError("every system needs at least one planet")
        for name in ("a", "e", "omega", "mean_anomaly0"):
            values = getattr(self, name)[planet]
            if not np.all(np.isfinite(values)):
                raise ValueError(f"{name} has NaN or infinite values")
        masses_present = np.concatenate([self.masses[:, -1], self.masses[:, :-1][planet]])
        if not np.all(np.isfinite(masses_present)):
            raise ValueError("masses have NaN or infinite values")
        if np.any(masses_present <= 0):
            raise ValueError("masses must be positive (solar masses)")
        if np.any(self.a[planet] <= 0):
            raise ValueError("semi-major axes must be positive (AU)")
        e = self.e[planet]
        if np.any(e < 0):
            raise ValueError("eccentricity must be >= 0")
        if np.any(e >= 1):
            raise ValueError(f"eccentricity {e.max():g} >= 1: only elliptic orbits are supported "
                             "(a parabolic or hyperbolic orbit never returns)")
        if np.any(~(self.dt > 0)):
            raise ValueError("time step must be positive (years)")


def empty_batch(n: int, max_planets: int) -> SystemBatch:
    """A batch with every planet slot absent (NaN) and the star unfrozen, to be filled by a sampler."""
    nan = np.full((n, max_planets), np.nan)
    return SystemBatch(
        n_planets=np.zeros(n, np.int64),
        masses=np.full((n, max_planets + 1), np.nan),
        a=nan.copy(), e=nan.copy(), omega=nan.copy(), mean_anomaly0=nan.copy(),
        com=np.zeros((n, 2)), dt=np.zeros(n), dt_index=np.zeros(n, np.int64),
        star_frozen=np.zeros(n, bool), star_position=np.full((n, 2), np.nan),
    )
