"""Dataset presets: the priors over planetary systems, one record each.

Every preset is one :class:`PresetRecord` in ``RECORDS``: its generator parameters (overridable from a JSON
config, :func:`preset_params`), their validation, its sampler ``sample(rng, n, params) -> SystemBatch`` and its
traits (whether it stores states, is a real system, a force-probe set, interacting). Adding a preset is adding
a record (and its name to ``orbitlaw/commands/_choices.py``, which the parser reads without numba). Units: AU,
years, solar masses.

- ``vafa2025``: the reference pretraining distribution of Vafa et al. (2025). Priors fitted to the NASA
  exoplanet table (numbers below, fitted with scipy as the reference does); 1-10 planets; a ~ U(0.3, 32) AU;
  e ~ Beta(0.867, 3.03); multi-planet systems are independent two-body orbits with the star frozen at a
  point of one planet's stellar orbit (the reference model, not physics); a single planet moves its star.
  Our only departure: e is capped at 0.99 (the reference accepts any e < 1; P(e > 0.99) ~ 1e-6).
- ``two-body-exoplanet``: the reference's main force-probe set (its ``generate_data.py`` without flags):
  one planet, masses from the same exoplanet priors as ``vafa2025`` (planet Gamma fit clipped to
  [1e-9, 1e-3], star log-normal fit clipped to [0.1, 5]), a ~ U(0.3, 32) AU, e ~ Beta(0.867, 3.03), the
  star moves (true two-body motion). Stores positions, velocities and forces.
- ``two-body``: the reference's ``--two_body_only`` variant (a secondary result, NOT its main probe set):
  one planet, both masses U(1e-4, 1.01e-2) (the lighter is the planet), the star moves.
- ``binary``: the positive control's orbits (docs/controls.md): two comparable bodies, both masses
  log-uniform on [0.2, 1] M_sun per system (the lighter is "the planet"), a ~ U(4, 6) AU, e from the same Beta
  prior capped at 0.3, a fixed six-month step, 100 steps. Each body's curvature gives the other's mass
  (a_planet = G m2 / r^2, a_star = G m1 / r^2), so every variable of F = G m1 m2 / r^2 shows in the dynamics
  of a few consecutive steps; the step resolves it (0.09-0.54 rad of orbit per step). Stores positions,
  velocities and forces. ``a_range`` sets how much orbit a step sweeps, and so how well three points
  condition the force (``benchmarks/experiments/control_ceiling.py``). ``force_law`` (default ``{"kind": "newton"}``)
  sets the world's gravity: a power law or a Yukawa-screened force integrated by :mod:`orbitlaw.orbits.forcelaw`
  (the controls' wrong-law world), its forces stored as that law gives them.
- ``solar-system``: the eight planets with their real masses and J2000 orbital elements (projected on
  the ecliptic), six-month step; sequence i is planet ``i mod 8`` with the Sun (a two-body system about
  the barycentre at the origin, as in the reference force-vector experiment), starting
  ``(i // 8) * steps`` time steps after J2000. With ``{"together": true}`` each sequence is instead the
  whole system, the planets attracting each other (REBOUND IAS15), 111 steps of all nine bodies.
- ``nbody``: planets that attract each other and their star, integrated exactly (REBOUND IAS15);
  2-4 planets on non-crossing orbits drawn from the vafa2025 priors.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from orbitlaw.orbits import forcelaw, kepler
from orbitlaw.orbits.constants import G
from orbitlaw.orbits.systems import SystemBatch, empty_batch
from orbitlaw.orbits.tokenizer import TIME_STEPS

# scipy.stats.gamma.fit on the planet masses (M_sun) below their 90th percentile, and
# scipy.stats.lognorm.fit on the star masses (M_sun), of ../shared/reference/vafa2025/exoplanet_data.csv
# (4956 planets). Shipped as numbers so the table is not needed at run time; a test refits them.
PLANET_MASS_GAMMA = (0.3202016451781988, 6.009814999999999e-08, 0.001105594954623053)
STAR_MASS_LOGNORM = (0.200450130446081, -0.6793606241621312, 1.6271508907813705)

# Real planets: mass (M_sun, IAU mass ratios), a (AU) and e, longitude of perihelion and mean longitude
# (degrees) at J2000 (Standish's approximate Keplerian elements, valid 1800-2050).
SOLAR_SYSTEM = [
    ("Mercury", 1 / 6023600.0, 0.38709927, 0.20563593, 77.45779628, 252.25032350),
    ("Venus", 1 / 408523.71, 0.72333566, 0.00677672, 131.60246718, 181.97909950),
    ("Earth", 1 / 328900.56, 1.00000261, 0.01671123, 102.93768193, 100.46457166),
    ("Mars", 1 / 3098708.0, 1.52371034, 0.09339410, -23.94362959, -4.55343205),
    ("Jupiter", 1 / 1047.3486, 5.20288700, 0.04838624, 14.72847983, 34.39644051),
    ("Saturn", 1 / 3497.898, 9.53667594, 0.05386179, 92.59887831, 49.95424423),
    ("Uranus", 1 / 22902.98, 19.18916464, 0.04725744, 170.95427630, 313.23810451),
    ("Neptune", 1 / 19412.24, 30.06992276, 0.00859048, 44.96476227, -55.12002969),
]

_COMMON = {"seq_len": 1000, "steps": 500}
_PRIORS = {
    "a_range": [0.3, 32.0],
    "e_beta": [0.867, 3.03],
    "e_max": kepler.E_MAX,
    "com_sigma": 1.0,
}
_EXOPLANET_MASSES = {"planet_mass_gamma": list(PLANET_MASS_GAMMA), "planet_mass_clip": [1e-9, 1e-3],
                     "star_mass_lognorm": list(STAR_MASS_LOGNORM), "star_mass_clip": [0.1, 5.0]}


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _numbers(p: dict, key: str, count: int, integer: bool = False) -> list:
    """p[key] as a list of ``count`` finite numbers (integers if asked); ValueError naming the key."""
    value = p[key]
    kind = "integers" if integer else "numbers"
    if not isinstance(value, (list, tuple)) or len(value) != count or not all(map(_is_number, value)) or (
            integer and not all(float(x).is_integer() for x in value)):
        raise ValueError(f"{key} must be a list of {count} {kind}, got {value!r}")
    return [int(x) for x in value] if integer else list(value)


def _integer(p: dict, key: str, minimum: int) -> int:
    value = p[key]
    if not _is_number(value) or not float(value).is_integer() or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


PHYSICAL = {"AU": (1e-3, 1e5), "solar masses": (1e-12, 1e3)}
"""The scales a system may be drawn at, per unit: orbits from 150,000 km (1e-3 AU, inside the Sun) to the Oort
cloud (1e5 AU), masses from an asteroid's (1e-12 M☉; Ceres is 4.7e-10) to a hundred times the heaviest star's.
Outside them float64 orbits lose their digits (a force at 1e300 AU is exactly 0), so a range outside is refused."""


def _physical(value, what: str) -> bool:
    """Whether ``value`` is a number inside :data:`PHYSICAL`'s range for ``what``."""
    low, high = PHYSICAL[what]
    return _is_number(value) and low <= value <= high


def _bounds(what: str) -> str:
    low, high = PHYSICAL[what]
    return f"[{low:g}, {high:g}] {what}"


def _positive_range(params: dict, key: str, what: str) -> None:
    lo, hi = _numbers(params, key, 2)
    if not (lo > 0 and hi >= lo):
        raise ValueError(f"{key} must be an increasing range of positive {what}, got {params[key]}")
    if not (_physical(lo, what) and _physical(hi, what)):
        raise ValueError(f"{key} {params[key]} is outside the physical range {_bounds(what)}")


def _validate_real_system(p: dict) -> None:
    """The parameters of a preset of named real planets (``real_system``): rows of ``planets``, the star."""
    if not isinstance(p["together"], bool):
        raise ValueError("together must be true or false")
    _time_step_index(p)
    if not isinstance(p["planets"], list) or not p["planets"]:
        raise ValueError("planets must be a non-empty list of [name, mass, a, e, perihelion, mean longitude]")
    for row in p["planets"]:
        if not isinstance(row, (list, tuple)) or len(row) != 6 or not all(map(_is_number, row[1:])):
            raise ValueError(f"planet {row!r} must be [name, mass (M_sun), a (AU), e, longitude of "
                             "perihelion (deg), mean longitude (deg)]")
    for name, mass, a, e, *_ in p["planets"]:
        if not _physical(mass, "solar masses"):
            raise ValueError(f"planet {name}: mass must be in {_bounds('solar masses')}, got {mass}")
        if not _physical(a, "AU"):
            raise ValueError(f"planet {name}: semi-major axis must be in {_bounds('AU')}, got {a}")
        if not 0 <= e < 1:
            raise ValueError(f"planet {name}: eccentricity {e} is not in [0, 1): orbit not elliptic")
    if not _physical(p["star_mass"], "solar masses"):
        raise ValueError(f"star_mass must be in {_bounds('solar masses')}, got {p['star_mass']}")


def _validate_priors(p: dict) -> None:
    """The parameters of a preset that draws its systems from priors: planet counts, orbits and masses."""
    lo, hi = _numbers(p, "planets", 2, integer=True)
    if not 1 <= lo <= hi:
        raise ValueError(f"planets must be a range [min, max] with 1 <= min <= max, got {p['planets']}")
    if not _is_number(p["e_max"]) or not 0 <= p["e_max"] < 1:
        raise ValueError(f"e_max = {p['e_max']}: eccentricity must stay below 1 (elliptic orbits only)")
    if p["e_max"] > kepler.E_MAX:
        raise ValueError(f"e_max = {p['e_max']} exceeds the supported maximum {kepler.E_MAX}")
    if min(_numbers(p, "e_beta", 2)) <= 0:
        raise ValueError(f"e_beta parameters must be positive, got {p['e_beta']}")
    _positive_range(p, "a_range", "AU")
    if "time_step_index" in p:
        _time_step_index(p)
    for key in ("planet_mass_clip", "star_mass_clip", "mass_uniform", "mass_loguniform"):
        if key in p:
            _positive_range(p, key, "solar masses")
    for key in ("planet_mass_gamma", "star_mass_lognorm"):
        if key in p:
            shape, _, scale = _numbers(p, key, 3)
            if not (shape > 0 and scale > 0):
                raise ValueError(f"{key} needs positive shape and scale, got {p[key]}")
    if not (_is_number(p["com_sigma"]) and 0 <= p["com_sigma"] <= PHYSICAL["AU"][1]):
        raise ValueError(f"com_sigma must be a number in [0, {PHYSICAL['AU'][1]:g}] AU, got {p['com_sigma']}")
    if "freeze_star" in p and not isinstance(p["freeze_star"], bool):
        raise ValueError("freeze_star must be true or false")
    if "min_spacing" in p and not (_is_number(p["min_spacing"]) and p["min_spacing"] >= 1):
        raise ValueError("min_spacing must be a number >= 1")
    if "force_law" in p:
        forcelaw.validate(p["force_law"])


def _time_step_index(p: dict) -> None:
    if _integer(p, "time_step_index", 0) >= len(TIME_STEPS):
        raise ValueError(f"time_step_index must be < {len(TIME_STEPS)}")


def _sample_eccentricity(rng, p, size):
    return np.minimum(rng.beta(*p["e_beta"], size=size), p["e_max"])


def _fill_planets(batch: SystemBatch, rng, p, planet_masses) -> None:
    """Draw a, e, periapsis angle and start phase for every present planet slot of ``batch``."""
    n, P = batch.a.shape
    present = np.arange(P)[None, :] < batch.n_planets[:, None]
    a = rng.uniform(*p["a_range"], size=(n, P))
    e = _sample_eccentricity(rng, p, (n, P))
    omega = rng.uniform(0.0, 2 * np.pi, size=(n, P))
    phase = rng.uniform(0.0, 1.0, size=(n, P))  # start time offset U(0, period), as a fraction
    batch.masses[:, :P] = np.where(present, planet_masses, np.nan)
    batch.a[:] = np.where(present, a, np.nan)
    batch.e[:] = np.where(present, e, np.nan)
    batch.omega[:] = np.where(present, omega, np.nan)
    batch.mean_anomaly0[:] = np.where(present, 2 * np.pi * phase, np.nan)


def _fill_common(batch: SystemBatch, rng, p) -> None:
    """The centre of mass, N(0, com_sigma^2 I) AU, and the time step: a week or six months at random, or
    ``TIME_STEPS[time_step_index]`` for every system when the parameters set it (the draw is made either way, so
    the rest of the stream does not move)."""
    n = len(batch)
    batch.com[:] = p["com_sigma"] * rng.standard_normal((n, 2))
    batch.dt_index[:] = rng.integers(0, 2, size=n)
    if "time_step_index" in p:
        batch.dt_index[:] = p["time_step_index"]


def _star_and_planet_masses(rng, p, n, P):
    star = np.clip(_lognorm(rng, p["star_mass_lognorm"], n), *p["star_mass_clip"])
    planets = np.clip(_gamma(rng, p["planet_mass_gamma"], (n, P)), *p["planet_mass_clip"])
    return star, planets


def _gamma(rng, params, size):
    shape, loc, scale = params
    return loc + scale * rng.standard_gamma(shape, size=size)


def _lognorm(rng, params, size):
    s, loc, scale = params
    return loc + scale * np.exp(s * rng.standard_normal(size))


def _exoplanet_systems(rng, n: int, p: dict) -> SystemBatch:
    """Systems of U{planets} planets with exoplanet-table masses and orbits from the shared priors."""
    lo, hi = p["planets"]
    batch = empty_batch(n, hi)
    batch.n_planets[:] = rng.integers(lo, hi + 1, size=n)
    star, planets = _star_and_planet_masses(rng, p, n, hi)
    batch.masses[:, -1] = star
    _fill_planets(batch, rng, p, planets)
    return batch


def sample_vafa2025(rng, n: int, p: dict) -> SystemBatch:
    batch = _exoplanet_systems(rng, n, p)
    star = batch.masses[:, -1]
    _fill_common(batch, rng, p)
    # The reference pins the star of a multi-planet system at a point of one planet's two-body stellar
    # orbit (chosen at random, at one of the `steps` sampled times); planets then orbit that point.
    frozen = (batch.n_planets > 1) & bool(p["freeze_star"])
    which = np.floor(rng.uniform(size=n) * batch.n_planets).astype(np.int64)
    when = rng.integers(0, int(p["steps"]), size=n)
    rows = np.arange(n)
    m_p, m_s = batch.masses[rows, which], star
    dt = _time_steps(p)[batch.dt_index]
    mean_motion = np.sqrt(G * (m_p + m_s) / batch.a[rows, which] ** 3)
    rel, _ = kepler.relative_states(batch.a[rows, which], batch.e[rows, which], batch.omega[rows, which],
                                    batch.mean_anomaly0[rows, which] + mean_motion * when * dt,
                                    G * (m_p + m_s))
    star_point = batch.com - (m_p / (m_p + m_s))[:, None] * rel
    batch.star_frozen[:] = frozen
    batch.star_position[:] = np.where(frozen[:, None], star_point, np.nan)
    batch.dt[:] = dt
    return batch


def sample_two_body_exoplanet(rng, n: int, p: dict) -> SystemBatch:
    """One planet and a moving star, masses and orbit from the exoplanet priors (the reference probe set)."""
    batch = _exoplanet_systems(rng, n, p)
    _fill_common(batch, rng, p)
    batch.dt[:] = _time_steps(p)[batch.dt_index]
    return batch


def _planet_and_star(rng, p, masses: np.ndarray) -> SystemBatch:
    """One planet around a free star per row of ``masses`` (n, 2) M_sun: the lighter body is the planet."""
    batch = empty_batch(len(masses), 1)
    batch.n_planets[:] = 1
    batch.masses[:, -1] = masses.max(axis=1)
    _fill_planets(batch, rng, p, masses.min(axis=1)[:, None])
    _fill_common(batch, rng, p)
    return batch


def sample_two_body(rng, n: int, p: dict) -> SystemBatch:
    """Two bodies, both masses uniform per system (the lighter one is the planet)."""
    batch = _planet_and_star(rng, p, rng.uniform(*p["mass_uniform"], size=(n, 2)))
    batch.dt[:] = _time_steps(p)[batch.dt_index]
    return batch


def sample_binary(rng, n: int, p: dict) -> SystemBatch:
    """Two bodies, both masses log-uniform per system (the lighter one is the planet), one fixed step."""
    lo, hi = np.log(p["mass_loguniform"])
    batch = _planet_and_star(rng, p, np.exp(rng.uniform(lo, hi, size=(n, 2))))
    batch.dt_index[:] = p["time_step_index"]
    batch.dt[:] = _time_steps(p)[batch.dt_index]
    return batch


def sample_solar_system(rng, n: int, p: dict, first_index: int = 0) -> SystemBatch:
    """No randomness. Default: sequence ``first_index + k`` is planet ``(first_index + k) mod 8`` with the
    Sun, starting ``(index // 8) * steps`` steps after J2000. With ``together``: every sequence holds all
    planets and the Sun (integrated as an interacting N-body system), sequence k starting
    ``k * steps_in_sequence`` steps after J2000."""
    planets = p["planets"]
    index = first_index + np.arange(n)
    table = np.array([row[1:6] for row in planets], dtype=np.float64)
    P = _real_system_slots(p)
    batch = empty_batch(n, P)
    batch.dt_index[:] = p["time_step_index"]
    batch.dt[:] = _time_steps(p)[batch.dt_index]
    if p["together"]:
        batch.n_planets[:] = P
        rows = np.broadcast_to(np.arange(P), (n, P))
        t0 = index * int(min(p["steps"], steps_in_sequence(P, int(p["seq_len"])))) * batch.dt
    else:
        batch.n_planets[:] = 1
        rows = (index % len(planets))[:, None]
        t0 = (index // len(planets)) * int(p["steps"]) * batch.dt
    mass, a, e, varpi, mean_longitude = np.moveaxis(table[rows], -1, 0)
    batch.masses[:, :P] = mass
    batch.masses[:, P] = p["star_mass"]
    batch.a[:], batch.e[:] = a, e
    batch.omega[:] = np.radians(varpi)
    mean_motion = np.sqrt(G * (mass + p["star_mass"]) / a**3)
    batch.mean_anomaly0[:] = np.radians(mean_longitude - varpi) + mean_motion * t0[:, None]
    return batch


def sample_nbody(rng, n: int, p: dict) -> SystemBatch:
    batch = _exoplanet_systems(rng, n, p)
    # Redraw (a, e) of any system whose orbits cross or crowd: each periapsis must clear the next inner
    # apoapsis by the factor min_spacing. Planets are then ordered by semi-major axis.
    for i in range(n):
        k = batch.n_planets[i]
        for _ in range(10_000):
            order = np.argsort(batch.a[i, :k])
            a, e = batch.a[i, :k][order], batch.e[i, :k][order]
            if np.all(a[1:] * (1 - e[1:]) > p["min_spacing"] * a[:-1] * (1 + e[:-1])):
                batch.a[i, :k], batch.e[i, :k] = a, e
                break
            batch.a[i, :k] = rng.uniform(*p["a_range"], size=k)
            batch.e[i, :k] = _sample_eccentricity(rng, p, k)
        else:
            raise ValueError("could not place non-crossing orbits: widen a_range or lower planets/e_max")
    _fill_common(batch, rng, p)
    batch.dt[:] = _time_steps(p)[batch.dt_index]
    return batch


def _real_system_slots(p: dict) -> int:
    """Planet slots of a real system: one planet per sequence, or all of them with ``together``."""
    return len(p["planets"]) if p["together"] else 1


@dataclass(frozen=True)
class PresetRecord:
    """Everything the toolkit knows about one dataset preset: every command, study and test reads it here.

    defaults: the generator parameters (JSON values; a config overrides them key by key, :func:`preset_params`).
    sample(rng, n, params, first_index) -> SystemBatch draws n systems (first_index: the split position of the
    first, which only a real system uses). validate(params) raises a ValueError naming the first bad
    parameter (after the ``seq_len`` and ``steps`` every preset has). stores_states: whether per-step
    positions, velocities and forces are stored (vafa2025 keeps orbital elements only). real_system: the
    planets are a fixed list of named real bodies, ``params["planets"]`` rows [name, mass (M_sun), a (AU), e,
    longitude of perihelion (deg), mean longitude (deg)], not draws from priors: sequence i is planet
    ``i mod len(planets)`` with the star, or with ``params["together"]`` the whole system. force_probe: one of
    the reference's two-body force-probe sets (one planet, a moving star, 500 steps): the systems its LLM
    prompts are drawn from. interacting(params): whether the bodies attract each other, so the states come
    from the N-body integrator (REBOUND IAS15) instead of Kepler orbits. optional: parameters a config may set
    that the defaults leave out (``time_step_index``: one step for every system instead of a draw per system).
    """

    defaults: dict
    sample: Callable
    validate: Callable[[dict], None]
    stores_states: bool
    real_system: bool = False
    force_probe: bool = False
    interacting: Callable[[dict], bool] = lambda params: False
    optional: tuple[str, ...] = ()

    def planet_slots(self, params: dict) -> int:
        """P, the number of planet slots of the preset's systems (a real system: one planet per sequence, or
        all of them with ``together``)."""
        return _real_system_slots(params) if self.real_system else int(params["planets"][1])

    def max_steps(self, params: dict) -> int:
        """Steps stored per sequence: the preset's ``steps``, or fewer when tokens run out sooner."""
        fewest = self.planet_slots(params) if self.real_system else int(params["planets"][0])
        return int(min(params["steps"], math.ceil((params["seq_len"] - 1) / (fewest + 1))))


def _ignore_index(sampler):
    return lambda rng, n, p, first_index=0: sampler(rng, n, p)


_ONE_STEP = ("time_step_index",)
"""What the presets that draw a week or six months per system may fix for all of them."""

RECORDS: dict[str, PresetRecord] = {
    "vafa2025": PresetRecord(
        {**_COMMON, **_PRIORS, "planets": [1, 10], **_EXOPLANET_MASSES, "freeze_star": True},
        _ignore_index(sample_vafa2025), _validate_priors, stores_states=False, optional=_ONE_STEP),
    "two-body-exoplanet": PresetRecord(
        {**_COMMON, **_PRIORS, "planets": [1, 1], **_EXOPLANET_MASSES},
        _ignore_index(sample_two_body_exoplanet), _validate_priors, stores_states=True, force_probe=True,
        optional=_ONE_STEP),
    "two-body": PresetRecord(
        {**_COMMON, **_PRIORS, "planets": [1, 1], "mass_uniform": [1e-4, 1.01e-2]},
        _ignore_index(sample_two_body), _validate_priors, stores_states=True, force_probe=True, optional=_ONE_STEP),
    "binary": PresetRecord(
        {"seq_len": 201, "steps": 100, **_PRIORS, "a_range": [4.0, 6.0], "e_max": 0.3, "planets": [1, 1],
         "mass_loguniform": [0.2, 1.0], "time_step_index": 1, "force_law": {"kind": "newton"}},
        _ignore_index(sample_binary), _validate_priors, stores_states=True),
    "solar-system": PresetRecord(
        {**_COMMON, "time_step_index": 1, "star_mass": 1.0, "together": False,
         "planets": [list(p) for p in SOLAR_SYSTEM]},
        sample_solar_system, _validate_real_system, stores_states=True, real_system=True,
        interacting=lambda p: bool(p["together"])),
    "nbody": PresetRecord(
        {**_COMMON, **_PRIORS, "planets": [2, 4], "e_max": 0.6, "min_spacing": 1.3, **_EXOPLANET_MASSES},
        _ignore_index(sample_nbody), _validate_priors, stores_states=True, interacting=lambda p: True,
        optional=_ONE_STEP),
}
DATASET_PRESETS = tuple(RECORDS)
"""The dataset presets' names (``orbitlaw simulate --preset``), in the order of ``RECORDS``."""

IMPORTED = "imported"
"""The preset name of a dataset written by ``orbitlaw import`` (:mod:`orbitlaw.orbits.importer`) from trajectories
made elsewhere: not a simulate choice, since nothing here can draw its systems again."""


def _not_simulated(rng, n, p, first_index=0):
    files = ", ".join(f["name"] for f in p["source"]["files"]) or "Python objects"
    raise ValueError(f"an imported dataset is not simulated: it was written by orbitlaw import from "
                     f"{p['source']['kind']} ({files}); import it again")


IMPORTED_RECORD = PresetRecord({"seq_len": 2, "steps": 1, "planets": [1, 1]}, _not_simulated, lambda p: None,
                               stores_states=True)
"""The record of :data:`IMPORTED` datasets: they store their states; their parameters are what the import found."""


def record(preset: str) -> PresetRecord:
    """The record of a dataset's ``preset``: one of ``RECORDS``, or :data:`IMPORTED`'s."""
    return IMPORTED_RECORD if preset == IMPORTED else RECORDS[preset]


def preset_params(preset: str, overrides: dict | None = None) -> dict:
    """The preset's generator parameters with ``overrides`` applied and validated."""
    if preset not in RECORDS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(DATASET_PRESETS)}")
    record = RECORDS[preset]
    params = copy.deepcopy(record.defaults)
    for key, value in (overrides or {}).items():
        if key not in params and key not in record.optional:
            known = ", ".join([*params, *record.optional])
            raise ValueError(f"unknown parameter {key!r} for preset {preset}; known: {known}")
        params[key] = value
    _integer(params, "seq_len", 2)
    _integer(params, "steps", 1)
    record.validate(params)
    return params


def _time_steps(p: dict) -> np.ndarray:
    return np.asarray(TIME_STEPS, dtype=np.float64)


def steps_in_sequence(n_planets: np.ndarray, seq_len: int) -> np.ndarray:
    """Time steps whose first body appears in a sequence of ``seq_len`` tokens (dt token first)."""
    return -(-(seq_len - 1) // (np.asarray(n_planets) + 1))
