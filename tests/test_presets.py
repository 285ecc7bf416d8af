"""The dataset presets' records, and the reference's force-probe set, ``two-body-exoplanet``: its masses follow the
fitted exoplanet priors (a statistical test against scipy's distributions, not a range check), one planet, the
star moves."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from orbitlaw.orbits import DATASET_PRESETS, preset_params
from orbitlaw.orbits.blocks import SHARD_SIZE, build_block
from orbitlaw.orbits.presets import PLANET_MASS_GAMMA, RECORDS, STAR_MASS_LOGNORM
from orbitlaw.orbits.tokenizer import TokenizerSpec

BLOCKS = 3  # 3,072 systems


@pytest.mark.parametrize("preset", DATASET_PRESETS)
def test_each_record_carries_valid_defaults_and_samples_its_own_systems(preset):
    record, params = RECORDS[preset], preset_params(preset)
    assert params == record.defaults and params is not record.defaults  # a copy: overrides never leak back
    batch = record.sample(np.random.default_rng(0), 3, params, first_index=0)
    batch.validate()
    assert batch.max_planets == record.planet_slots(params)
    if record.force_probe:  # what LLM prompts need: one planet around a moving star, with its states
        assert record.stores_states and params["planets"] == [1, 1] and not record.interacting(params)


@pytest.fixture(scope="module")
def exoplanet_arrays():
    params = preset_params("two-body-exoplanet", {"steps": 20, "seq_len": 41})
    blocks = [build_block("two-body-exoplanet", params, TokenizerSpec(), 11, "train", b, SHARD_SIZE)[0]
              for b in range(BLOCKS)]
    return {k: np.concatenate([b[k] for b in blocks]) for k in ("masses", "positions", "forces")}


def _check_clipped(sample: np.ndarray, dist, lo: float, hi: float) -> None:
    """``sample`` is ``clip(dist, lo, hi)``: the atoms at the bounds have the prior's mass (binomial, 4
    sigma) and the values inside follow the prior's conditional law (Kolmogorov-Smirnov, p > 1e-3)."""
    n = len(sample)
    p_lo, p_hi = dist.cdf(lo), dist.sf(hi)
    for frac, p in ((np.mean(sample == lo), p_lo), (np.mean(sample == hi), p_hi)):
        assert abs(frac - p) <= 4 * np.sqrt(max(p * (1 - p), 1 / n) / n) + 1e-12, (frac, p)
    inside = sample[(sample > lo) & (sample < hi)]
    width = dist.cdf(hi) - p_lo
    result = stats.kstest(inside, lambda x: (dist.cdf(x) - p_lo) / width)
    assert result.pvalue > 1e-3, result


def test_planet_masses_follow_the_fitted_gamma_prior(exoplanet_arrays):
    planet = exoplanet_arrays["masses"][:, 0]
    _check_clipped(planet, stats.gamma(PLANET_MASS_GAMMA[0], loc=PLANET_MASS_GAMMA[1], scale=PLANET_MASS_GAMMA[2]),
                   1e-9, 1e-3)


def test_star_masses_follow_the_fitted_lognormal_prior(exoplanet_arrays):
    star = exoplanet_arrays["masses"][:, 1]
    s, loc, scale = STAR_MASS_LOGNORM
    _check_clipped(star, stats.lognorm(s, loc=loc, scale=scale), 0.1, 5.0)


def test_the_uniform_mass_variant_is_not_the_exoplanet_prior(exoplanet_arrays):
    """A check that the test above can fail: the two-body variant's planet masses are rejected."""
    params = preset_params("two-body", {"steps": 20, "seq_len": 41})
    planet = build_block("two-body", params, TokenizerSpec(), 11, "train", 0, SHARD_SIZE)[0]["masses"][:, 0]
    gamma = stats.gamma(PLANET_MASS_GAMMA[0], loc=PLANET_MASS_GAMMA[1], scale=PLANET_MASS_GAMMA[2])
    with pytest.raises(AssertionError):
        _check_clipped(planet, gamma, 1e-9, 1e-3)


def test_one_planet_and_a_moving_star_in_true_two_body_motion(exoplanet_arrays):
    pos, masses, forces = exoplanet_arrays["positions"], exoplanet_arrays["masses"], exoplanet_arrays["forces"]
    assert pos.shape[2] == 2 and masses.shape[1] == 2  # planet, star
    star_path = np.ptp(pos[:, :, 1], axis=1).max(axis=1)
    assert np.all(star_path > 0)  # the star moves (not frozen), however little
    com = (masses[:, None, :, None] * pos).sum(2) / masses.sum(1)[:, None, None]
    assert np.allclose(com, com[:, :1], atol=1e-9)  # the barycentre stays put: true two-body motion
    assert np.allclose(forces[:, :, 0], -forces[:, :, 1], rtol=1e-9, atol=0)  # Newton's third law


def test_llm_systems_come_from_the_reference_probe_set_by_default():
    from orbitlaw.discovery.llm.systems import generate_systems

    default, variant = generate_systems(8, seed=3), generate_systems(8, seed=3, preset="two-body")
    planets = np.array([s.m1[0] for s in default])
    stars = np.array([s.m2[0] for s in default])
    assert np.all((planets >= 1e-9) & (planets <= 1e-3)) and np.all((stars >= 0.1) & (stars <= 5.0))
    assert np.median(stars) > 0.3  # exoplanet-prior stars, not U(1e-4, 1.01e-2)
    assert all(1e-4 <= s.m1[0] <= s.m2[0] <= 1.01e-2 for s in variant)
    with pytest.raises(ValueError, match="one-planet preset"):
        generate_systems(2, seed=3, preset="vafa2025")


@pytest.mark.parametrize("preset", ["two-body-exoplanet", "two-body", "vafa2025", "nbody"])
def test_a_set_time_step_holds_for_every_system_and_moves_nothing_else(preset):
    """``time_step_index`` (0: a week, 1: six months) fixes the step that these presets otherwise draw per system;
    the draw is still made, so the masses and orbits are the same systems as without it."""
    record = RECORDS[preset]
    free = record.sample(np.random.default_rng(3), 64, preset_params(preset), first_index=0)
    assert set(free.dt_index) == {0, 1}
    for index in (0, 1):
        fixed = record.sample(np.random.default_rng(3), 64, preset_params(preset, {"time_step_index": index}),
                              first_index=0)
        assert set(fixed.dt_index) == {index} and len(set(fixed.dt)) == 1
        same = free.dt_index == index  # these systems drew that step anyway: every field of theirs is unchanged
        for name, values in fixed.arrays().items():
            assert np.array_equal(values[same], free.arrays()[name][same], equal_nan=True), name
        assert np.array_equal(fixed.masses, free.masses, equal_nan=True)  # and no system's masses moved
