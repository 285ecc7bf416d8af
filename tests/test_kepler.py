"""The analytic engine against independent references: root finding, REBOUND, conservation laws."""

import math

import numba
import numpy as np
import pytest
from scipy.optimize import brentq

from orbitlaw.orbits import G, kepler


def test_kepler_matches_bracketed_root_finding():
    rng = np.random.default_rng(1)
    e = np.concatenate([[0.0, 0.5, 0.9, 0.99, 0.99], rng.uniform(0, 0.99, 300)])
    M = np.concatenate([[0.0, math.pi, 1e-9, 1e-6, 2 * math.pi - 1e-7], rng.uniform(-20, 20, 300)])
    E = kepler.solve_kepler(M, e)
    for Mi, ei, Ei in zip(M, e, E, strict=True):
        Mr = Mi % (2 * math.pi)
        ref = brentq(lambda x, ei=ei, Mr=Mr: x - ei * math.sin(x) - Mr, 0, 2 * math.pi,
                     xtol=1e-15, rtol=1e-15)
        assert abs(Ei - ref) < 1e-12 * max(1.0, 1.0 / (1.0 - ei)), (Mi, ei)


@pytest.mark.parametrize("e", [0.0, 0.1, 0.5, 0.8, 0.95, 0.99])
def test_kepler_residual_at_machine_precision(e):
    M = np.linspace(0, 2 * np.pi, 200_001)[:-1]
    E = kepler.solve_kepler(M, e)
    assert np.max(np.abs(E - e * np.sin(E) - M)) < 4e-15


@numba.njit
def _sincos_many(x, s, c):
    for i in range(x.size):
        s[i], c[i] = kepler._sincos(x[i])


def test_sincos_to_a_few_ulp():
    """The polynomial sine and cosine against libm: near zero, near each quadrant boundary, up to 1e5."""
    rng = np.random.default_rng(5)
    edges = np.arange(-8, 9) * (math.pi / 4)
    x = np.concatenate([rng.uniform(-7, 7, 400_000), rng.uniform(-1e5, 1e5, 100_000),
                        (edges[:, None] + rng.uniform(-1e-9, 1e-9, (17, 1000))).ravel(),
                        [0.0, 1e-300, -1e-20, 1e-8, math.pi, 2 * math.pi, -math.pi / 2]])
    s, c = np.empty_like(x), np.empty_like(x)
    _sincos_many(x, s, c)
    assert np.max(np.abs(s - np.sin(x))) < 3e-16 and np.max(np.abs(c - np.cos(x))) < 3e-16
    small = np.abs(x) < 1e-3  # relative accuracy where sin x is tiny
    assert np.all(np.abs(s[small] - np.sin(x[small])) <= 2 * np.spacing(np.abs(np.sin(x[small]))))


def test_block_solver_bitwise_equals_scalar_solver():
    rng = np.random.default_rng(2)
    M = rng.uniform(-100, 100, 20_000)
    for e in (0.0, 0.3, 0.97):
        E, s, c = (np.empty_like(M) for _ in range(3))
        kepler._solve_block(M.copy(), e, E, s, c)
        assert np.array_equal(E, kepler.solve_kepler(M, e))
        assert np.max(np.abs(s - np.sin(E))) < 1e-15 and np.max(np.abs(c - np.cos(E))) < 1e-15


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, float("nan")])
def test_non_elliptic_eccentricity_rejected(bad):
    with pytest.raises(ValueError, match="eccentricity"):
        kepler.solve_kepler(0.3, bad)


def test_orbit_conserves_energy_and_angular_momentum_and_obeys_kepler_third_law():
    a, e, w, mu = 3.7, 0.6, 1.1, G * 1.3
    M = np.linspace(0, 4 * np.pi, 1001)
    pos, vel = kepler.relative_states(a, e, w, M, mu)
    r = np.linalg.norm(pos, axis=-1)
    energy = 0.5 * np.sum(vel**2, axis=-1) - mu / r
    h = pos[:, 0] * vel[:, 1] - pos[:, 1] * vel[:, 0]
    np.testing.assert_allclose(energy, -mu / (2 * a), rtol=1e-13)
    np.testing.assert_allclose(h, math.sqrt(mu * a * (1 - e * e)), rtol=1e-13)  # > 0: counter-clockwise
    assert np.isclose(r.min(), a * (1 - e), rtol=1e-6) and np.isclose(r.max(), a * (1 + e), rtol=1e-6)
    assert np.allclose(pos[0], pos[500], atol=1e-12)  # M advanced by 2 pi: same point


def test_velocity_is_time_derivative_of_position():
    a, e, w, mu = 1.5, 0.3, 0.2, G
    n = math.sqrt(mu / a**3)
    t = np.linspace(0, 2, 50)
    h = 1e-6
    p_plus, _ = kepler.relative_states(a, e, w, n * (t + h), mu)
    p_minus, _ = kepler.relative_states(a, e, w, n * (t - h), mu)
    _, vel = kepler.relative_states(a, e, w, n * t, mu)
    np.testing.assert_allclose((p_plus - p_minus) / (2 * h), vel, atol=1e-7)
