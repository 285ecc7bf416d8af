"""Worlds with another law of gravity: two-body orbits under a central force that is not Newton's.

The controls' wrong-law world (``binary`` preset, ``"force_law"`` override): a model trained where the force
is not Newton's must come out with its own world's law, not Newton's, or the verdict's "Newtonian" means
nothing. Each law gives the force between two bodies of masses m1, m2 (M_sun) at distance r (AU) as
``F = m1 * m2 * f(r)`` (M_sun AU / yr^2), attractive, along the line between them (``FORCE_LAWS``):

- ``{"kind": "newton"}``: f = G / r^2 (G = 4 pi^2 AU^3 / (M_sun yr^2));
- ``{"kind": "power", "exponent": k, "r0": r0}``: f = G / r0^2 * (r / r0)^k: Newton's at r = r0 (AU), so
  orbits near r0 keep their periods, and a power law r^k elsewhere (k = -2.5: the planet's acceleration is
  G r0^0.5 m2 r^-2.5);
- ``{"kind": "yukawa", "length": L}``: f = G / r^2 * (1 + r / L) * exp(-r / L), the force of a screened
  potential -G m1 m2 exp(-r / L) / r (L in AU).

The orbit: the system's Kepler elements (a, e, periapsis angle, mean anomaly) give the bodies' relative
position d and velocity at t = 0 as under Newton; the speed is then scaled by sqrt(f(|d|) / f_Newton(|d|)),
so that a circular Newtonian orbit stays circular under the law. The relative motion
``d'' = -(m1 + m2) f(|d|) d / |d|`` is integrated by classical fourth-order Runge-Kutta, ``SUBSTEPS`` steps
per stored step, all systems at once; the barycentre stays at ``com``, the planet at
``com + m2 / (m1 + m2) d`` and the star at ``com - m1 / (m1 + m2) d``. ``tests/test_forcelaw.py`` checks the
trajectories against REBOUND's IAS15 with the law as an additional force (an independent integrator).

Units: AU, yr, M_sun throughout.
"""

from __future__ import annotations

import math

import numpy as np

from orbitlaw.orbits.constants import G
from orbitlaw.orbits.systems import SystemBatch

FORCE_LAWS = ("newton", "power", "yukawa")

SUBSTEPS = 256
"""Runge-Kutta steps per stored step: at the ``binary`` preset's 0.49-yr step on a = 2-3 AU orbits, about
1,000 per orbit at periapsis; the positions then agree with IAS15 to ~1e-8 AU over 100 steps."""

ESCAPE_FACTOR = 20.0
"""A body that moves more than this many initial separations from its partner has escaped: the law and the
initial speed do not bind it, and the data set is refused."""


def validate(law: dict) -> dict:
    """``law`` checked (one-line ValueError naming the problem) and returned with every key it needs."""
    if not isinstance(law, dict) or law.get("kind") not in FORCE_LAWS:
        raise ValueError(f"force_law must be a mapping with kind one of {', '.join(FORCE_LAWS)}, got {law!r}")
    need = {"newton": (), "power": ("exponent", "r0"), "yukawa": ("length",)}[law["kind"]]
    extra = set(law) - {"kind", *need}
    if extra:
        raise ValueError(f"force_law {law['kind']!r} takes {', '.join(need) or 'no parameters'}; "
                         f"unknown: {', '.join(sorted(extra))}")
    for key in need:
        value = law.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"force_law {law['kind']!r} needs a finite number {key}, got {value!r}")
    if law["kind"] == "power" and not (law["r0"] > 0 and -4 < law["exponent"] < 0):
        raise ValueError(f"force_law power needs r0 > 0 and an exponent in (-4, 0) (an attractive force that "
                         f"falls with distance), got r0 {law['r0']}, exponent {law['exponent']}")
    if law["kind"] == "yukawa" and not law["length"] > 0:
        raise ValueError(f"force_law yukawa needs a length > 0 AU, got {law['length']}")
    return dict(law)


def is_newton(law: dict | None) -> bool:
    return law is None or law.get("kind") == "newton"


def strength(r: np.ndarray, law: dict | None) -> np.ndarray:
    """f(r) of the module doc: the force per unit product of masses, M_sun AU / yr^2 per M_sun^2, at r (AU)."""
    r = np.asarray(r, dtype=np.float64)
    if is_newton(law):
        return G / r**2
    if law["kind"] == "power":
        return G / law["r0"] ** 2 * (r / law["r0"]) ** law["exponent"]
    x = r / law["length"]
    return G / r**2 * (1 + x) * np.exp(-x)


def pair_forces(positions: np.ndarray, masses: np.ndarray, law: dict | None) -> np.ndarray:
    """Net force of ``law`` on each body, (n, S, B, 2) M_sun AU / yr^2, NaN for absent bodies; positions
    (n, S, B, 2) AU and masses (n, B) M_sun, NaN where absent. F_i = sum_j m_i m_j f(r_ij) (r_j - r_i) / r_ij."""
    from orbitlaw.orbits.generate import gravitational_forces

    return gravitational_forces(positions, masses, None if is_newton(law) else (lambda r: strength(r, law)))


def integrate(batch: SystemBatch, steps: int, law: dict, substeps: int = SUBSTEPS) -> tuple[np.ndarray, np.ndarray]:
    """Positions (AU) and velocities (AU/yr), each (n, steps, 2, 2) (the planet, then the star), at t = k dt of
    one-planet systems under ``law``. ValueError when a system is not a single planet around a free star, or
    when a body escapes (``ESCAPE_FACTOR``)."""
    from orbitlaw.orbits.generate import analytic_states  # the Kepler elements' state at t = 0

    law = validate(law)
    if np.any(batch.n_planets != 1) or np.any(batch.star_frozen):
        raise ValueError("a force law other than Newton's needs one planet around a free star (the binary preset)")
    pos0, vel0 = analytic_states(batch, 1)
    m1, m2 = batch.masses[:, 0], batch.masses[:, -1]
    total = (m1 + m2)[:, None]
    d = pos0[:, 0, 0] - pos0[:, 0, 1]
    v = vel0[:, 0, 0] - vel0[:, 0, 1]
    r0 = np.linalg.norm(d, axis=1)
    v = v * np.sqrt(strength(r0, law) / strength(r0, None))[:, None]

    def accel(x):
        r = np.linalg.norm(x, axis=1, keepdims=True)
        return -total * strength(r, law) * x / r

    n = len(batch)
    rel = np.empty((n, steps, 2))
    rel_v = np.empty((n, steps, 2))
    h = (batch.dt / substeps)[:, None]
    for k in range(steps):
        rel[:, k], rel_v[:, k] = d, v
        if k == steps - 1:
            break
        for _ in range(substeps):
            a1 = accel(d)
            a2 = accel(d + 0.5 * h * v)
            a3 = accel(d + 0.5 * h * v + 0.25 * h * h * a1)
            a4 = accel(d + h * v + 0.5 * h * h * a2)
            d, v = d + h * v + h * h / 6 * (a1 + a2 + a3), v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        far = np.linalg.norm(d, axis=1) > ESCAPE_FACTOR * r0
        if np.any(far) or not np.all(np.isfinite(d)):
            i = int(np.flatnonzero(far | ~np.all(np.isfinite(d), axis=1))[0])
            raise ValueError(f"system {i} escapes under force_law {law}: a = {batch.a[i, 0]:.3g} AU, "
                             f"e = {batch.e[i, 0]:.3g} are not bound by it")
    share = (m2 / (m1 + m2))[:, None, None]
    com = batch.com[:, None, :]
    pos = np.stack([com + share * rel, com - (1 - share) * rel], axis=2)
    vel = np.stack([share * rel_v, -(1 - share) * rel_v], axis=2)
    return pos, vel
