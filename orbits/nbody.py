"""Exact interacting N-body orbits with REBOUND's IAS15 integrator (adaptive, 15th order, error at
machine precision), for the ``nbody`` preset and as the independent check of the analytic engine.

Units: AU, years, solar masses, with G = 39.4784176044 AU^3 / (M_sun yr^2). The plane is z = 0.
"""

from __future__ import annotations

import numpy as np

from orbitlaw.orbits.constants import G
from orbitlaw.orbits.systems import SystemBatch


def _rebound():
    try:
        import rebound
    except ImportError as exc:  # pragma: no cover - rebound is a declared dependency
        raise ImportError("the nbody preset needs REBOUND: pip install rebound") from exc
    return rebound


def simulation(batch: SystemBatch, i: int):
    """A REBOUND simulation of system ``i``: star first, then each planet from its elements relative to
    the star (heliocentric), moved to the barycentre frame and shifted so the barycentre is ``com[i]``."""
    rebound = _rebound()
    sim = rebound.Simulation()
    sim.G = G
    sim.integrator = "ias15"
    sim.add(m=float(batch.masses[i, -1]))
    star = sim.particles[0]
    for j in range(int(batch.n_planets[i])):
        sim.add(m=float(batch.masses[i, j]), a=float(batch.a[i, j]), e=float(batch.e[i, j]),
                pomega=float(batch.omega[i, j]), M=float(batch.mean_anomaly0[i, j]), primary=star)
    sim.move_to_com()
    for p in sim.particles:
        p.x += float(batch.com[i, 0])
        p.y += float(batch.com[i, 1])
    return sim


def integrate(batch: SystemBatch, steps: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (AU) and velocities (AU/yr) at t = k dt, (n, S, P + 1, 2); the star in the last slot.

    ``steps`` is the number of steps per system (an int or an (n,) array); entries past a system's own
    count, and absent planets, are NaN.
    """
    batch.validate()
    n, P = batch.a.shape
    steps = np.broadcast_to(np.asarray(steps, np.int64), (n,))
    S = int(steps.max())
    pos = np.full((n, S, P + 1, 2), np.nan)
    vel = np.full_like(pos, np.nan)
    for i in range(n):
        sim = simulation(batch, i)
        N = int(batch.n_planets[i])
        slots = list(range(N)) + [P]
        order = [1 + j for j in range(N)] + [0]
        for k in range(int(steps[i])):
            sim.integrate(k * float(batch.dt[i]), exact_finish_time=1)
            for slot, p_index in zip(slots, order, strict=True):
                p = sim.particles[p_index]
                pos[i, k, slot] = (p.x, p.y)
                vel[i, k, slot] = (p.vx, p.vy)
    return pos, vel
