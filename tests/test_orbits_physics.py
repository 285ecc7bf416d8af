"""Generated systems against REBOUND and physical laws; the presets against the reference protocol."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from orbitlaw.orbits import G, generate, kepler, nbody, presets
from orbitlaw.orbits.blocks import build_block
from orbitlaw.orbits.tokenizer import TokenizerSpec

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "vafa2025"
SPEC = TokenizerSpec()


def _two_body(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return presets.sample_two_body(rng, n, presets.preset_params("two-body"))


def test_two_body_matches_rebound_ias15():
    rebound = pytest.importorskip("rebound")
    batch = _two_body()
    steps = 120
    pos, vel = generate.analytic_states(batch, steps)
    for i in range(len(batch)):
        # Independent initial state: REBOUND gets the analytic state at t = 0 as Cartesian vectors.
        sim = rebound.Simulation()
        sim.G = G
        sim.integrator = "ias15"
        for body in (1, 0):  # star, planet
            sim.add(m=float(batch.masses[i, body]), x=pos[i, 0, body, 0], y=pos[i, 0, body, 1],
                    vx=vel[i, 0, body, 0], vy=vel[i, 0, body, 1])
        for k in range(steps):
            sim.integrate(k * float(batch.dt[i]), exact_finish_time=1)
            for body, p in ((1, sim.particles[0]), (0, sim.particles[1])):
                assert abs(p.x - pos[i, k, body, 0]) < 1e-8 and abs(p.y - pos[i, k, body, 1]) < 1e-8


def test_nbody_single_planet_agrees_with_analytic_engine():
    pytest.importorskip("rebound")
    batch = _two_body(n=3, seed=5)
    pos_a, vel_a = generate.analytic_states(batch, 60)
    pos_n, vel_n = nbody.integrate(batch, 60)
    assert np.max(np.abs(pos_a - pos_n)) < 1e-8
    assert np.max(np.abs(vel_a - vel_n)) < 1e-7


def _energy_and_momentum(pos, vel, masses):
    kinetic = 0.5 * np.sum(masses[:, None, :] * np.sum(vel**2, -1), -1)
    potential = np.zeros(pos.shape[:2])
    B = pos.shape[2]
    for i in range(B):
        for j in range(i + 1, B):
            r = np.linalg.norm(pos[:, :, i] - pos[:, :, j], axis=-1)
            potential -= G * masses[:, None, i] * masses[:, None, j] / r
    L = np.sum(masses[:, None, :] * (pos[..., 0] * vel[..., 1] - pos[..., 1] * vel[..., 0]), -1)
    return kinetic + potential, L


def test_two_body_conserves_energy_angular_momentum_and_centre_of_mass():
    batch = _two_body(n=20)
    pos, vel = generate.analytic_states(batch, 300)
    energy, L = _energy_and_momentum(pos, vel, batch.masses)
    np.testing.assert_allclose(energy, np.broadcast_to(energy[:, :1], energy.shape), rtol=1e-11)
    np.testing.assert_allclose(L, np.broadcast_to(L[:, :1], L.shape), rtol=1e-11)
    com = np.einsum("nb,nsbc->nsc", batch.masses, pos) / batch.masses.sum(1)[:, None, None]
    np.testing.assert_allclose(com, np.broadcast_to(batch.com[:, None], com.shape), atol=1e-12)


def test_nbody_preset_conserves_energy_and_angular_momentum():
    pytest.importorskip("rebound")
    params = presets.preset_params("nbody", {"seq_len": 121})
    arrays, _ = build_block("nbody", params, SPEC, seed=3, split="train", block=0, count=3)
    masses = np.nan_to_num(arrays["masses"])
    pos, vel = np.nan_to_num(arrays["positions"]), np.nan_to_num(arrays["velocities"])
    for i in range(3):
        steps = int(presets.steps_in_sequence(arrays["n_planets"][i], 121))
        energy, L = _energy_and_momentum(pos[i:i + 1, :steps], vel[i:i + 1, :steps], masses[i:i + 1])
        np.testing.assert_allclose(energy, np.broadcast_to(energy[:, :1], energy.shape), rtol=1e-9)
        np.testing.assert_allclose(L, np.broadcast_to(L[:, :1], L.shape), rtol=1e-9)


def test_forces_are_newtonian_along_the_separation():
    batch = _two_body(n=10)
    pos, _ = generate.analytic_states(batch, 50)
    forces = generate.gravitational_forces(pos, batch.masses)
    sep = pos[:, :, 1] - pos[:, :, 0]  # planet -> star
    r = np.linalg.norm(sep, axis=-1)
    magnitude = G * batch.masses[:, 0, None] * batch.masses[:, 1, None] / r**2
    np.testing.assert_allclose(np.linalg.norm(forces[:, :, 0], axis=-1), magnitude, rtol=1e-12)
    np.testing.assert_allclose(forces[:, :, 0], magnitude[..., None] * sep / r[..., None], rtol=1e-10, atol=0)
    np.testing.assert_allclose(forces[:, :, 1], -forces[:, :, 0], rtol=1e-12)


def test_nbody_forces_equal_mass_times_acceleration():
    """Independent of our force formula: the acceleration is the second difference of REBOUND positions."""
    rebound = pytest.importorskip("rebound")
    batch = presets.sample_nbody(np.random.default_rng(4), 1, presets.preset_params("nbody"))
    h = 1e-4
    states = []
    for t in (0.5 - h, 0.5, 0.5 + h):
        sim = nbody.simulation(batch, 0)
        sim.integrate(t, exact_finish_time=1)
        order = list(range(1, len(sim.particles))) + [0]  # planets, then the star
        states.append(np.array([[sim.particles[k].x, sim.particles[k].y] for k in order]))
    accel = (states[0] - 2 * states[1] + states[2]) / h**2
    n = int(batch.n_planets[0])
    masses = np.concatenate([batch.masses[0, :n], batch.masses[0, -1:]])
    forces = generate.gravitational_forces(states[1][None, None], masses[None])[0, 0]
    np.testing.assert_allclose(forces, masses[:, None] * accel, rtol=1e-4, atol=1e-9 * np.abs(forces).max())
    assert isinstance(rebound.__version__, str)


def test_tokens_decode_within_half_a_bin():
    params = presets.preset_params("two-body")
    arrays, outside = build_block("two-body", params, SPEC, seed=0, split="t", block=0, count=16)
    tokens, pos = arrays["tokens"], arrays["positions"]
    xy = generate.token_order(pos, arrays["n_planets"], 1000)
    inside = np.all(np.abs(xy) < 50, axis=-1)
    decoded = SPEC.decode(tokens[:, 1:])
    err = np.abs(decoded - xy)[inside]
    assert err.max() <= SPEC.width / 2 + 1e-12
    assert outside == int(np.sum(np.abs(xy) >= 50))


def _cold_orbit_fraction(batch) -> float:
    """Share of orbits whose mean anomaly advances too fast per step for warm starts."""
    present = np.isfinite(batch.a)
    motion = np.sqrt(G * (batch.masses[:, :-1] + batch.masses[:, -1:]) / batch.a**3)
    dM = (motion * batch.dt[:, None] + np.pi) % (2 * np.pi) - np.pi
    return float(np.mean(np.abs(dM[present]) >= kepler.WARM_MAX_STEP))


@pytest.mark.parametrize("preset", ["vafa2025", "two-body"])
def test_fast_token_path_equals_general_path(preset):
    """The lane-major token kernel (several chunks of lanes, warm and cold orbits, pinned and moving
    stars) gives exactly the tokens of the general path: states, then token order, then tokenise."""
    seq_len = 300
    params = presets.preset_params(preset, {"seq_len": seq_len})
    batch = presets.RECORDS[preset].sample(np.random.default_rng(9), 200, params)
    if preset == "vafa2025":  # both kinds of orbit, and more lanes than one chunk holds
        assert 0.01 < _cold_orbit_fraction(batch) < 0.5
        assert int(batch.n_planets.sum()) * 3 > generate.LANES
    fast, outside = generate.analytic_tokens(batch, seq_len, 500, SPEC)
    pos, _ = generate.analytic_states(batch, 150)
    xy = generate.token_order(pos, batch.n_planets, seq_len)
    general, outside2 = generate.tokenize(xy, batch.dt_index, SPEC)
    assert np.array_equal(fast, general) and outside == outside2


def test_fast_token_path_is_independent_of_the_other_systems():
    """A system's tokens do not depend on which systems share its batch (and its chunk of lanes)."""
    params = presets.preset_params("vafa2025", {"seq_len": 400})
    batch = presets.sample_vafa2025(np.random.default_rng(4), 300, params)
    tokens, _ = generate.analytic_tokens(batch, 400, 500, SPEC)
    for k in (0, 137, 299):
        alone, _ = generate.analytic_tokens(batch.subset(slice(k, k + 1)), 400, 500, SPEC)
        assert np.array_equal(alone[0], tokens[k])
    reversed_batch = batch.subset(np.arange(len(batch))[::-1])
    assert np.array_equal(generate.analytic_tokens(reversed_batch, 400, 500, SPEC)[0], tokens[::-1])


def test_fast_token_path_with_sequences_too_short_for_any_position():
    """More systems than a chunk of lanes holds, none with a position token: only time-step tokens."""
    params = presets.preset_params("vafa2025")
    batch = presets.sample_vafa2025(np.random.default_rng(2), generate.LANES + 50, params)
    tokens, outside = generate.analytic_tokens(batch, 1, 500, SPEC)
    assert outside == 0 and np.array_equal(tokens[:, 0, 0], SPEC.num_bins + batch.dt_index)


def test_tokeniser_reference_formula_ids_and_range_count():
    x = np.array([-50.0, -49.99, 0.0, 0.007, 49.999, 50.0, 73.0, -80.0])
    ids, outside = SPEC.encode(x)
    expected = np.clip(np.floor((x + 50) / (100 / 7000)), 0, 6999).astype(int)
    assert ids.tolist() == expected.tolist()
    assert outside == 3  # 50.0 (the range is half-open), 73 and -80
    assert SPEC.vocab_size == 7003 and SPEC.pad_id == 7002
    assert SPEC.time_step_id(0) == 7000 and SPEC.time_step_id(1) == 7001
    assert SPEC.pad_id not in (SPEC.time_step_id(0), SPEC.time_step_id(1))


def test_vafa2025_layout_follows_the_reference_protocol():
    params = presets.preset_params("vafa2025")
    arrays, _ = build_block("vafa2025", params, SPEC, seed=0, split="train", block=0, count=512)
    tokens, n_planets = arrays["tokens"], arrays["n_planets"]
    assert tokens.shape == (512, 1000, 2) and tokens.dtype == np.uint16
    assert set(np.unique(n_planets)) == set(range(1, 11))
    assert np.all(tokens[:, 0, 0] == tokens[:, 0, 1])
    assert set(np.unique(tokens[:, 0, 0])) == {7000, 7001}
    assert np.all(tokens[:, 1:] < 7000)  # 500 steps always fill the 999 body slots: no padding
    np.testing.assert_allclose(arrays["dt"], np.where(arrays["dt_index"] == 0, 7 * 0.0027, 180 * 0.0027))
    assert np.array_equal(arrays["star_frozen"], n_planets > 1)
    for i in np.flatnonzero(n_planets > 1)[:20]:
        N = n_planets[i]
        star = tokens[i, 1 + N::N + 1]
        assert np.all(star == star[0])  # the frozen star's token never moves
    m = arrays["masses"]
    star_mass, planet_mass = m[:, -1], m[:, :-1][np.isfinite(m[:, :-1])]
    assert star_mass.min() >= 0.1 and star_mass.max() <= 5.0
    assert planet_mass.min() >= 1e-9 and planet_mass.max() <= 1e-3
    a = arrays["a"][np.isfinite(arrays["a"])]
    assert a.min() >= 0.3 and a.max() <= 32
    assert np.nanmax(arrays["e"]) <= 0.99


def test_two_body_probe_masses_follow_the_reference():
    arrays, _ = build_block("two-body", presets.preset_params("two-body"), SPEC, 0, "train", 0, 400)
    planet, star = arrays["masses"][:, 0], arrays["masses"][:, 1]
    assert np.all(planet <= star) and planet.min() >= 1e-4 and star.max() <= 1.01e-2
    assert not arrays["star_frozen"].any()
    assert np.ptp(arrays["positions"][:, :, 1, 0], axis=1).min() > 0  # the star moves


def test_shipped_priors_are_the_fit_to_the_exoplanet_table():
    path = REFERENCE / "exoplanet_data.csv"
    if not path.exists():
        pytest.skip("reference exoplanet table not available")
    from scipy import stats

    with open(path) as f:
        rows = list(csv.DictReader(f))
    planet = np.array([float(r["planet_solar_mass"]) for r in rows])
    star = np.array([float(r["star_solar_mass"]) for r in rows])
    planet = planet[planet < np.percentile(planet, 90)]
    np.testing.assert_allclose(stats.gamma.fit(planet), presets.PLANET_MASS_GAMMA, rtol=1e-6)
    np.testing.assert_allclose(stats.lognorm.fit(star), presets.STAR_MASS_LOGNORM, rtol=1e-6)


def test_whole_solar_system_together_interacts_and_keeps_the_real_orbits():
    pytest.importorskip("rebound")
    params = presets.preset_params("solar-system", {"together": True})
    arrays, _ = build_block("solar-system", params, SPEC, seed=0, split="s", block=0, count=2)
    assert arrays["positions"].shape == (2, 111, 9, 2) and np.all(arrays["n_planets"] == 8)
    pos = arrays["positions"][0]
    helio = pos[:, :8] - pos[:, 8:9]
    r = np.linalg.norm(helio, axis=-1)
    a = np.array([row[2] for row in presets.SOLAR_SYSTEM])
    e = np.array([row[3] for row in presets.SOLAR_SYSTEM])
    assert np.all(r >= a * (1 - e) * 0.98) and np.all(r <= a * (1 + e) * 1.02)
    # sequence 1 continues where sequence 0 ends (111 six-month steps later)
    np.testing.assert_allclose(arrays["mean_anomaly0"][1] - arrays["mean_anomaly0"][0],
                               111 * 180 * 0.0027 * np.sqrt(G * (arrays["masses"][0, :8] + 1) / a**3))
    tokens = arrays["tokens"][0]
    assert np.all(tokens[1:] < 7000) and tokens[0, 0] == 7001


def test_solar_system_is_the_real_one():
    params = presets.preset_params("solar-system")
    arrays, _ = build_block("solar-system", params, SPEC, seed=0, split="s", block=0, count=8)
    names = [p[0] for p in presets.SOLAR_SYSTEM]
    earth = names.index("Earth")
    pos = arrays["positions"][earth]
    helio = pos[:, 0] - pos[:, 1]
    # At J2000 the Earth's heliocentric ecliptic longitude is about 100.5 degrees (mean longitude 100.46,
    # equation of centre under 2 degrees).
    assert abs(math.degrees(math.atan2(helio[0, 1], helio[0, 0])) - 100.46) < 2.5
    assert np.allclose(np.linalg.norm(helio, axis=-1), 1.0, atol=0.02)
    assert np.all(arrays["dt"] == 180 * 0.0027)
    r_neptune = np.linalg.norm(arrays["positions"][7][:, 0] - arrays["positions"][7][:, 1], axis=-1)
    assert np.allclose(r_neptune, 30.07, atol=0.3)
    assert np.allclose(arrays["com"], 0.0)
