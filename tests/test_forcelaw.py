"""Worlds with another law of gravity (orbits.forcelaw): trajectories against REBOUND's IAS15 with the law as an
additional force, the stored forces, and one-line errors for a bad or unbinding law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orbitlaw import orbits
from orbitlaw.orbits import forcelaw, presets
from orbitlaw.orbits.constants import G

LAWS = [{"kind": "power", "exponent": -2.5, "r0": 2.5}, {"kind": "yukawa", "length": 3.0}]


def _batch(n=3, seed=0, law=None):
    params = presets.preset_params("binary", {"a_range": [2.0, 3.0], **({"force_law": law} if law else {})})
    return presets.RECORDS["binary"].sample(np.random.default_rng(seed), n, params), params


def _rebound_orbit(batch, i, steps, law):
    """The same system integrated by REBOUND IAS15 with G = 0 and the law as an additional force."""
    import rebound

    pos0, vel0 = orbits.generate.analytic_states(batch.subset(slice(i, i + 1)), 1)
    m1, m2 = float(batch.masses[i, 0]), float(batch.masses[i, -1])
    d, v = pos0[0, 0, 0] - pos0[0, 0, 1], vel0[0, 0, 0] - vel0[0, 0, 1]
    r0 = float(np.hypot(*d))
    v = v * math.sqrt(forcelaw.strength(r0, law) / forcelaw.strength(r0, None))
    sim = rebound.Simulation()
    sim.G, sim.integrator = 0.0, "ias15"
    share = m2 / (m1 + m2)
    sim.add(m=m1, x=share * d[0], y=share * d[1], vx=share * v[0], vy=share * v[1])
    sim.add(m=m2, x=-(1 - share) * d[0], y=-(1 - share) * d[1], vx=-(1 - share) * v[0], vy=-(1 - share) * v[1])
    ps = sim.particles

    def force(_):
        dx, dy = ps[0].x - ps[1].x, ps[0].y - ps[1].y
        r = math.hypot(dx, dy)
        f = float(forcelaw.strength(r, law))
        ps[0].ax -= f * m2 * dx / r
        ps[0].ay -= f * m2 * dy / r
        ps[1].ax += f * m1 * dx / r
        ps[1].ay += f * m1 * dy / r

    sim.additional_forces = force
    out = np.empty((steps, 2, 2))
    for k in range(steps):
        sim.integrate(k * float(batch.dt[i]), exact_finish_time=1)
        out[k] = [(ps[0].x, ps[0].y), (ps[1].x, ps[1].y)]
    return out + batch.com[i]


@pytest.mark.parametrize("law", LAWS, ids=["power-2.5", "yukawa"])
def test_trajectories_match_an_independent_ias15_integration(law):
    batch, _ = _batch(law=law)
    pos, vel = forcelaw.integrate(batch, 40, law)
    for i in range(len(batch)):
        assert np.max(np.abs(pos[i] - _rebound_orbit(batch, i, 40, law))) < 1e-7
    # the barycentre stays put and the orbit is not Newton's
    m = batch.masses[:, [0, -1]][:, None, :, None]
    assert np.allclose((pos * m).sum(axis=2) / m.sum(axis=2), batch.com[:, None, :], atol=1e-12)
    kepler, _ = orbits.generate.analytic_states(batch, 40)
    assert np.max(np.abs(pos - kepler)) > 0.05


def test_newtons_law_through_the_integrator_is_kepler():
    batch, _ = _batch()
    pos, _ = forcelaw.integrate(batch, 30, {"kind": "power", "exponent": -2.0, "r0": 1.0})
    kepler, _ = orbits.generate.analytic_states(batch, 30)
    assert np.max(np.abs(pos - kepler)) < 1e-7


def test_a_wrong_law_data_set_stores_its_own_forces(tmp_path):
    law = LAWS[0]
    orbits.simulate("binary", {"train": 4}, 3, tmp_path / "d", overrides={"a_range": [2.0, 3.0], "force_law": law},
                    progress=False)
    split = orbits.load_dataset(tmp_path / "d", verify=True)["train"]
    pos, F, m = np.asarray(split.positions), np.asarray(split.forces), np.asarray(split.masses)
    r = np.linalg.norm(pos[:, :, 0] - pos[:, :, 1], axis=-1)
    accel = np.linalg.norm(F[:, :, 0], axis=-1) / m[:, None, 0]
    expected = G * law["r0"] ** 0.5 * m[:, None, -1] * r**-2.5
    assert np.allclose(accel, expected, rtol=1e-12)
    assert np.allclose(F[:, :, 0], -F[:, :, 1], atol=1e-12)  # action and reaction


@pytest.mark.parametrize("law, message", [
    ({"kind": "mond"}, "kind one of newton, power, yukawa"),
    ({"kind": "power", "exponent": -2.5}, "needs a finite number r0"),
    ({"kind": "power", "exponent": 1.0, "r0": 2.0}, "exponent in \\(-4, 0\\)"),
    ({"kind": "yukawa", "length": -1.0}, "length > 0"),
    ({"kind": "yukawa", "length": 1.0, "r0": 2}, "unknown: r0"),
])
def test_bad_force_laws_are_one_line_errors(law, message):
    with pytest.raises(ValueError, match=message):
        presets.preset_params("binary", {"force_law": law})


def test_an_orbit_the_law_does_not_bind_is_refused():
    batch, _ = _batch()
    with pytest.raises(ValueError, match="escapes under force_law"):  # a force that falls as r^-3.9 beyond r0 = 0.5
        forcelaw.integrate(batch, 60, {"kind": "power", "exponent": -3.9, "r0": 0.5})
