"""The graded verdict: which law came out, and whether the data and the seeds support saying so.

Grades (``VERDICTS``), decided in this order:

- ``inconclusive``: the data cannot decide (fewer than ``MIN_VERDICT_ROWS`` usable rows, or an exponent of
  the agreed power law that the rows cannot pin to an integer: standard error above
  ``MAX_EXPONENT_SE``, e.g. a star mass that hardly varies cannot tell ``newtonian`` from
  ``inverse-square-planet-mass``), the seeds do not agree (no ballot has a strict majority of them), the
  agreed law is a constant, or it explains the target no better than a constant does (its error on all
  rows is not below the best constant's, in the same capped metric);
- ``newtonian``: Newton's law for the quantity (``QUANTITIES``): for the force on the planet (``"force"``, the
  default) ``C * m1 * m2 / r**2`` (exponents r: -2, m1: 1, m2: 1); for the planet's acceleration
  (``"acceleration"``, AU/yr^2) ``C * m2 / r**2`` (r: -2, m2: 1, and no planet mass m1: every body falls
  alike in the star's field). The form alone is not enough: the rows' own statistics must agree
  (:func:`newton_test`): the free power-law fit's exponents and the constant at Newton's exponents, with
  95% intervals resampled over whole systems, must each reach Newton's value (and G = 4 pi^2) within the
  verdict's precision. A law of Newton's form that fails the test is graded ``power-law``, and LAW.json
  says which number disagrees;
- ``inverse-square-planet-mass`` (force only): ``C * m1 / r**2`` (the LSSAR write-up's "F ∝ m1/r^2": Newton's
  law only where the star mass m2 is constant, absorbed into C);
- ``power-law``: any other ``C * prod(x ** k)``;
- ``not-a-power-law``: anything else.

The features must be named ``r`` (AU), ``m1`` (planet, Msun) and ``m2`` (star, Msun) for the first two
grades; with other names a power law is graded ``power-law``.
"""

from __future__ import annotations

import math

import numpy as np
import sympy

from orbitlaw.discovery.sr import powerlaw
from orbitlaw.discovery.sr.law import error
from orbitlaw.orbits.constants import G_EXACT

VERDICTS = ("newtonian", "inverse-square-planet-mass", "power-law", "not-a-power-law", "inconclusive")

MIN_VERDICT_ROWS = 100
"""Fewer usable rows than this: inconclusive. Each seed searches on one half of its rows and selects on the
other (:func:`orbitlaw.discovery.sr.seed_fit.fit_seed`), so below 100 a seed would select among laws on < 50 rows."""

MAX_EXPONENT_SE = 0.25
"""An exponent is decided when its standard error is at most this: the 95% interval (about +-2 se) then
spans less than the distance between two integers."""

NEWTON = {"r": -2, "m1": 1, "m2": 1}
INVERSE_SQUARE_PLANET_MASS = {"r": -2, "m1": 1, "m2": 0}
NEWTON_ACCELERATION = {"r": -2, "m1": 0, "m2": 1}
QUANTITIES = {"force": NEWTON, "acceleration": NEWTON_ACCELERATION}
"""Newton's exponents for each quantity a law can be discovered for: the force on the planet (M_sun AU/yr^2)
or the planet's acceleration (AU/yr^2, force over planet mass), in features r (AU), m1 (planet), m2 (star)."""


def newton_exponents(quantity: str) -> dict[str, int]:
    """Newton's exponents of ``quantity`` (a key of ``QUANTITIES``); a ValueError naming the choices else."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}: use {' or '.join(QUANTITIES)}")
    return QUANTITIES[quantity]


def _exponents_are(power: dict | None, wanted: dict) -> bool:
    if power is None or not set(wanted) <= set(power["exponents"]):
        return False
    e = power["exponents"]
    return all(e[k] == v for k, v in wanted.items()) and all(e[k] == 0 for k in e if k not in wanted)


def form_grade(power: dict | None, quantity: str = "force") -> str:
    """The grade of one law from its form alone (``power`` as :func:`orbitlaw.discovery.sr.law.power_law` returns it,
    exponents keyed by feature name), for ``quantity`` (``QUANTITIES``)."""
    newton = newton_exponents(quantity)
    if power is None:
        return "not-a-power-law"
    if _exponents_are(power, {k: v for k, v in newton.items() if v}):
        return "newtonian"
    if quantity == "force" and _exponents_are(power, INVERSE_SQUARE_PLANET_MASS):
        return "inverse-square-planet-mass"
    return "power-law"


def best_constant(y: np.ndarray, metric: str) -> sympy.Float:
    """The constant prediction of least error in ``metric``: the median (of ln y for ``"log"``, of y for
    ``"relative"``) minimises the mean absolute deviation that both metrics are."""
    value = float(np.exp(np.median(np.log(y)))) if metric == "log" else float(np.median(y))
    return sympy.Float(value, 15)


def constant_error(y: np.ndarray, metric: str) -> float:
    """The error of :func:`best_constant` on ``y``, in the same (capped) metric as every law's."""
    return error(y, np.full(y.shape, float(best_constant(y, metric))), metric)


INTERVAL_LEVEL = 0.95
"""The level of every bootstrap interval the verdict reads (exponents, constant, departure)."""

ROUND_OFF = 1e-9
"""Added to every allowance of :func:`newton_test`: on noiseless rows an interval collapses onto its estimate,
which round-off puts a few ulps from Newton's exponent or 4π²."""

EXPONENT_RESAMPLES = 400
"""Bootstrap resamples of the free exponents (one robust fit each, ~2.5 ms on 5,000 rows: 1 s in all)."""


def newton_test(X: np.ndarray, y: np.ndarray, features: list[str], quantity: str, precision: float, seed: int,
                groups: np.ndarray | None = None) -> dict | None:
    """Do the rows' own statistics agree with Newton's law for ``quantity``, within ``precision``?

    ``precision`` is the verdict's tolerance τ, an RMS of ln (0.01: 1%). On (X (n, d) positive features named
    ``features``, y (n,) positive), with simultaneous 95% percentile intervals from bootstrap resamples of whole
    systems (``groups``: one label per row; rows when None): the d + 1 numbers below are tested together, so
    each interval has level 1 - 5% / (d + 1) (Bonferroni) and Newton's own noisy data passes all of them in at
    least 95% of data sets (with separate 95% intervals, only about 0.95^(d + 1), 81% for d = 3):

    - each feature's exponent of the free fit ``ln y = c + sum k ln x`` (:func:`powerlaw.fit_exponents`) has
      an interval [lo, hi]; Newton's exponent (0 for a feature his law does not have) must lie in
      [lo - a, hi + a], where a = τ / sd(ln x) is the exponent shift whose effect on ln y has RMS τ;
    - the constant of Newton's form fitted on the rows (:func:`powerlaw.fit_constant`) has an interval
      [lo, hi]; G = 4 pi^2 must lie in [lo e^-τ, hi e^τ].

    ``resolution`` is what these rows and this precision can tell apart from Newton: per exponent
    ``h + a`` (h the interval's larger half-width), for the constant ``h_C + τ`` (in ln), and as an RMS of
    ln ``τ + max(h * sd(ln x), h_C)``: a law that departs from Newton by more than this in any one of them
    is told apart (its interval then excludes Newton's value) with about 95% probability.

    Returns None where the test is undefined (a value <= 0, or a feature of Newton's law missing); else
    ``{"consistent", "disagrees" (the numbers that do not reach Newton's, as text), "precision",
    "exponents", "exponents_ci95", "newton_exponents", "constant", "constant_ci95", "resolution", "interval"}``
    (the ``_ci95`` intervals are the simultaneous ones).
    """
    newton = newton_exponents(quantity)
    if not powerlaw.applicable(X, y) or not {f for f, k in newton.items() if k} <= set(features):
        return None
    target = np.array([newton.get(f, 0) for f in features], dtype=np.float64)
    level = 1 - (1 - INTERVAL_LEVEL) / (len(features) + 1)
    free = powerlaw.fit_exponents(X, y)
    lo, hi = powerlaw.exponent_intervals(X, y, seed, EXPONENT_RESAMPLES, level, groups)
    spread = np.log(X).std(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        allowance = np.where(spread > 0, precision / spread, np.inf) + ROUND_OFF
    half = np.maximum(free - lo, hi - free)
    c = powerlaw.fit_constant(X, y, target, "log")
    c_lo, c_hi = powerlaw.constant_interval(X, y, target, "log", seed, level=level, groups=groups)
    c_half = max(math.log(c / c_lo), math.log(c_hi / c))
    disagrees = []
    for f, k, a, b, al in zip(features, target, lo, hi, allowance, strict=True):
        if not (a - al <= k <= b + al):
            disagrees.append(f"exponent of {f} {(a + b) / 2:+.3f} ([{a:+.3f}, {b:+.3f}]) is not {k:+g} within "
                             f"{al:.3f}")
    if not (c_lo * math.exp(-precision - ROUND_OFF) <= G_EXACT <= c_hi * math.exp(precision + ROUND_OFF)):
        disagrees.append(f"constant {c:.4g} ([{c_lo:.4g}, {c_hi:.4g}]) is not 4π² = {G_EXACT:.4g} within "
                         f"{precision:.0%}")
    rms = precision + max(float(np.max(np.where(np.isfinite(spread), half * spread, 0.0))), c_half)
    return {
        "consistent": not disagrees, "disagrees": disagrees, "precision": float(precision),
        "exponents": dict(zip(features, map(float, free), strict=True)),
        "exponents_ci95": {f: [float(a), float(b)] for f, a, b in zip(features, lo, hi, strict=True)},
        "newton_exponents": dict(zip(features, map(int, target), strict=True)),
        "constant": float(c), "constant_ci95": [float(c_lo), float(c_hi)],
        "resolution": {"rms_ln": float(rms), "constant_ln": float(c_half + precision),
                       "exponents": {f: float(h + a) for f, h, a in zip(features, half, allowance, strict=True)}},
        "interval": (f"simultaneous {INTERVAL_LEVEL:.0%} (each {level:.2%}) percentile bootstrap over "
                     f"{'systems' if groups is not None else 'rows'}"),
    }


def grade(power: dict | None, *, rows: int, majority: bool, law_error: float, baseline_error: float,
          exponent_se: dict[str, float] | None = None, quantity: str = "force",
          test: dict | None = None) -> tuple[str, list[str]]:
    """The verdict and, when it is ``inconclusive``, the reasons (else an empty list). ``exponent_se``: the
    standard error of each feature's exponent of a power law (:func:`powerlaw.exponent_errors`); ``test``: the rows'
    :func:`newton_test` (a law of Newton's form is ``newtonian`` only when it is consistent; ``power-law``
    when it is not or when there is no test)."""
    reasons = []
    if rows < MIN_VERDICT_ROWS:
        reasons.append(f"only {rows} usable rows (a verdict needs {MIN_VERDICT_ROWS})")
    if not majority:
        reasons.append("no law was chosen by a strict majority of the seeds")
    if power is not None and not any(power["exponents"].values()):
        reasons.append("the law is a constant: no feature explains the target")
    elif not law_error < baseline_error:
        reasons.append(f"the law's error {law_error:.3g} is not below a constant's {baseline_error:.3g}")
    for name, se in (exponent_se or {}).items():
        if not se <= MAX_EXPONENT_SE:
            reasons.append(f"the rows cannot fix the exponent of {name} (standard error {se:.2g} > "
                           f"{MAX_EXPONENT_SE}): it varies too little")
    if reasons:
        return "inconclusive", reasons
    verdict = form_grade(power, quantity)
    if verdict == "newtonian" and not (test and test["consistent"]):
        verdict = "power-law"
    return verdict, []
