"""Kepler's equation along trajectories (warm starts from the previous step) against the cold solver."""

import math

import numpy as np
import pytest

from orbitlaw.orbits import kepler
from orbitlaw.orbits.tokenizer import TIME_STEPS

ECCENTRICITIES = [0.0, 0.1, 0.5, 0.9, 0.97, 0.99]
# Mean anomaly per step (rad): tiny and small (warm-started), just either side of the warm limit, and
# the six-monthly step of a 0.3 AU planet around a 5 M_sun star (about 23 rad: solved cold).
STEPS = [1e-6, 1e-3, 0.05, 0.3, kepler.WARM_MAX_STEP * 0.98, kepler.WARM_MAX_STEP * 1.02, 2.0,
         TIME_STEPS[1] * math.sqrt(kepler.TWO_PI**2 * 5.0 / 0.3**3), -0.2]


def _trajectories(dM, e, S=300, seed=0):
    """Reduced mean anomalies (P, S) of one orbit per eccentricity, each from a random start."""
    M0 = np.random.default_rng(seed).uniform(0, 2 * math.pi, len(e))
    k = np.arange(S)
    return np.array([[kepler._reduce(m0 + dM * float(ki)) for ki in k] for m0 in M0])


def _solve(M, e):
    E, s, c = (np.empty_like(M) for _ in range(3))
    kepler._solve_trajectories(M, np.asarray(e, np.float64), E, s, c)
    return E, s, c


@pytest.mark.parametrize("dM", STEPS)
def test_warm_start_agrees_with_cold_solver(dM):
    e = np.array(ECCENTRICITIES)
    M = _trajectories(dM, e)
    E, s, c = _solve(M, e)
    cold = kepler.solve_kepler(M, e[:, None])
    assert np.max(np.abs(E - cold)) < 1e-12
    assert np.max(np.abs(s - np.sin(E))) < 1e-15 and np.max(np.abs(c - np.cos(E))) < 1e-15
    assert np.max(np.abs(E - e[:, None] * np.sin(E) - M)) < 4e-15
    assert np.all((E >= 0) & (E < 2 * math.pi))


def test_result_depends_only_on_orbit_and_step():
    """Bits do not depend on which orbits are solved together or on how many steps are asked for."""
    rng = np.random.default_rng(3)
    e = rng.uniform(0, 0.99, 7)
    M = np.concatenate([_trajectories(d, e[i:i + 1], S=97, seed=i)
                        for i, d in enumerate([0.01, 0.2, 3.0, 0.001, 0.45, 0.6, 1e-5])])
    E, s, c = _solve(M, e)
    for p in range(len(e)):
        for S in (97, 64, 33, 1):
            Ep, sp, cp = _solve(np.ascontiguousarray(M[p:p + 1, :S]), e[p:p + 1])
            assert np.array_equal(Ep[0], E[p, :S]) and np.array_equal(sp[0], s[p, :S])
            assert np.array_equal(cp[0], c[p, :S])


def test_periapsis_passages_of_very_eccentric_orbits():
    """Steps that cross periapsis at e = 0.99 move E by up to ~1 rad: the warm starter is poor there and
    the solver must still converge to machine precision (further Householder steps or a cold solve)."""
    e = np.full(50, 0.99)
    M = np.array([_trajectories(d, e[:1], S=400, seed=i)[0]
                  for i, d in enumerate(np.linspace(1e-3, kepler.WARM_MAX_STEP * 0.99, 50))])
    E, s, c = _solve(M, e)
    np.testing.assert_allclose(E, kepler.solve_kepler(M, 0.99), rtol=0, atol=1e-12)
    assert np.max(np.abs(s - np.sin(E))) < 1e-15


def test_cold_block_with_per_element_eccentricity_equals_scalar_solver():
    rng = np.random.default_rng(4)
    M = rng.uniform(-50, 50, 5000)
    e = rng.uniform(0, 0.99, 5000)
    E, s, c = (np.empty_like(M) for _ in range(3))
    kepler._solve_cold(M.copy(), e, E, s, c)
    assert np.array_equal(E, kepler.solve_kepler(M, e))


def test_empty_and_single_step_trajectories():
    E, s, c = _solve(np.empty((0, 5)), np.empty(0))
    assert E.shape == (0, 5)
    E, s, c = _solve(np.array([[1.0], [4.0]]), np.array([0.3, 0.8]))
    assert np.array_equal(E[:, 0], kepler.solve_kepler(np.array([1.0, 4.0]), np.array([0.3, 0.8])))
