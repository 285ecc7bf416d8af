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
  alike in the star's field). The form alone is not enough: at a precision τ > 0 the rows must give positive
  evidence (:func:`newton_test`, :func:`unresolved_reasons`): the free power-law fit's departure from Newton's
  form and the constant lie within τ of Newton's over their 95% intervals resampled over whole systems, the exact
  law's departure interval lies below τ, and the rows have the power to tell a departure of 2τ apart. At τ = 0
  (an exact test) the rows must only not tell Newton apart. A law of Newton's form whose numbers are told apart
  from Newton's is graded ``power-law``, and LAW.json says which number disagrees;
- ``inverse-square-planet-mass`` (force only): ``C * m1 / r**2`` (the LSSAR write-up's "F ∝ m1/r^2": Newton's
  law only where the star mass m2 is constant, absorbed into C);
- ``power-law``: any other ``C * prod(x ** k)``;
- ``not-a-power-law``: anything else;
- ``unresolved`` (precision τ > 0 only): a power law (Newton's form or another) that the rows neither tell apart
  from Newton's nor show within τ of it: the data lack the power to say. ``unresolved_reasons`` states the
  resolution reached and roughly how many systems would reach the precision. Fewer or noisier rows widen every
  interval, so they can turn ``newtonian`` or ``power-law`` into ``unresolved``, never a told-apart law into
  ``newtonian``.

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

VERDICTS = ("newtonian", "inverse-square-planet-mass", "power-law", "not-a-power-law", "unresolved", "inconclusive")

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
    """The grade of one law from its form alone (``power`` as :func:`orbitlaw.discovery.sr.choice.power_law`
    returns it, exponents keyed by feature name), for ``quantity`` (``QUANTITIES``)."""
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
    """What the rows' own statistics say of Newton's law for ``quantity`` at ``precision``: told apart, shown within,
    or neither.

    ``precision`` is the verdict's tolerance τ, an RMS of ln (0.01: 1%). On (X (n, d) positive features named
    ``features``, y (n,) positive), with 95% percentile intervals from bootstrap resamples of whole systems
    (``groups``: one label per row; rows when None), two questions are asked of the free power-law fit
    ``ln y = c + sum k ln x`` (:func:`powerlaw.fit_exponents`) and of the constant of Newton's form fitted on the
    rows (:func:`powerlaw.fit_constant`):

    - **told apart** (``consistent`` false): a number's interval excludes Newton's by more than the precision. The
      d + 1 numbers are tested together, each interval at level 1 - 5% / (d + 1) (Bonferroni), so that Newton's
      own noisy data is told apart in at most 5% of data sets. Each exponent's interval [lo, hi] must reach
      Newton's (0 for a feature his law lacks) within a = τ / sd(ln x), the exponent shift whose effect on ln y
      has RMS τ; the constant's must reach G = 4 pi^2 within a factor e^τ.
    - **shown within** (``within``): positive evidence that the rows' law is Newton's at the precision. The free
      fit's departure from Newton's form, ``departure`` = RMS over the rows of (k - k_N) . (ln x - mean ln x) (in
      ln, the best constant fitted), has a 95% interval whose upper end is at most τ, and the constant's interval
      (the simultaneous one above, so at the stricter level) lies inside [G e^-τ, G e^τ]. Both read intervals, so
      more noise or fewer systems widen them and can only take ``within`` away (an intersection-union test: each
      condition at its own level).

    ``resolution`` is what these rows at this precision tell apart from Newton: per exponent ``h + a`` (h the
    interval's larger half-width), for the constant ``h_C + τ`` (in ln), and as an RMS of ln ``τ + max(h * sd(ln x),
    h_C)``: a law that departs from Newton by more than this in any one of them is told apart with about 95%
    probability. ``power`` is whether the rows can say "no" at this precision: the statistical part
    ``max(h * sd(ln x), h_C)`` is at most τ, so that a departure of twice the precision is told apart
    (``resolution.rms_ln`` <= 2τ); else ``units_needed`` is roughly how many systems (rows without groups) would
    get there, as the half-widths shrink like 1/sqrt(n).

    Returns None where the test is undefined (a value <= 0, or a feature of Newton's law missing); else
    ``{"consistent", "disagrees" (the numbers told apart from Newton's, as text), "within", "short_of" (why not
    within, as text), "departure": {"rms_ln", "ci95"}, "power": {"resolved", "interval_rms_ln", "needed_rms_ln",
    "units", "unit", "units_needed"}, "precision", "exponents", "exponents_ci95", "newton_exponents", "constant",
    "constant_ci95", "resolution", "interval"}`` (the ``_ci95`` intervals are the simultaneous ones).
    """
    newton = newton_exponents(quantity)
    if not powerlaw.applicable(X, y) or not {f for f, k in newton.items() if k} <= set(features):
        return None
    target = np.array([newton.get(f, 0) for f in features], dtype=np.float64)
    level = 1 - (1 - INTERVAL_LEVEL) / (len(features) + 1)
    free = powerlaw.fit_exponents(X, y)
    draws = powerlaw.exponent_resamples(X, y, seed, EXPONENT_RESAMPLES, groups)
    lo, hi = powerlaw.percentile_interval(draws, level)
    logs = np.log(X)
    spread = logs.std(axis=0)
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
    departure, d_lo, d_hi = _shape_departure(logs, free - target, draws - target)
    short_of = []
    if not d_hi <= precision + ROUND_OFF:
        short_of.append(f"the free fit departs from Newton's form by {departure:.2%} RMS of ln ([{d_lo:.2%}, "
                        f"{d_hi:.2%}]): its interval reaches past the {precision:.0%} precision")
    if not (G_EXACT * math.exp(-precision - ROUND_OFF) <= c_lo and c_hi <= G_EXACT * math.exp(precision + ROUND_OFF)):
        short_of.append(f"the constant's interval [{c_lo:.4g}, {c_hi:.4g}] is not inside 4π² = {G_EXACT:.4g} "
                        f"within {precision:.0%}")
    statistical = max(float(np.max(np.where(spread > 0, half * spread, 0.0))), c_half)
    units = len(np.unique(groups)) if groups is not None else len(y)
    finite = precision > 0 and math.isfinite(statistical)
    needed = max(units, math.ceil(units * (statistical / precision) ** 2)) if finite else None
    return {
        "consistent": not disagrees, "disagrees": disagrees, "within": not short_of and precision > 0,
        "short_of": short_of, "precision": float(precision),
        "departure": {"rms_ln": departure, "ci95": [d_lo, d_hi]},
        "power": {"resolved": finite and statistical <= precision, "interval_rms_ln": statistical,
                  "needed_rms_ln": float(precision), "units": int(units),
                  "unit": "systems" if groups is not None else "rows", "units_needed": needed},
        "exponents": dict(zip(features, map(float, free), strict=True)),
        "exponents_ci95": {f: [float(a), float(b)] for f, a, b in zip(features, lo, hi, strict=True)},
        "newton_exponents": dict(zip(features, map(int, target), strict=True)),
        "constant": float(c), "constant_ci95": [float(c_lo), float(c_hi)],
        "resolution": {"rms_ln": float(precision + statistical), "constant_ln": float(c_half + precision),
                       "exponents": {f: float(h + a) for f, h, a in zip(features, half, allowance, strict=True)}},
        "interval": (f"simultaneous {INTERVAL_LEVEL:.0%} (each {level:.2%}) percentile bootstrap over "
                     f"{'systems' if groups is not None else 'rows'}"),
    }


def _shape_departure(logs: np.ndarray, offset: np.ndarray, draws: np.ndarray) -> tuple[float, float, float]:
    """The RMS over rows of ``offset . (ln x - mean ln x)`` (offset (d,): free exponents less Newton's), and its 95%
    percentile interval over the bootstrap ``draws`` (resamples, d) of the same offset: sqrt(k' Cov(ln x) k')."""
    centred = logs - logs.mean(axis=0)
    cov = centred.T @ centred / len(logs)

    def rms(k):
        return np.sqrt(np.maximum(np.einsum("...i,ij,...j->...", k, cov, k), 0.0))

    lo, hi = powerlaw.percentile_interval(rms(draws), INTERVAL_LEVEL)
    return float(rms(offset)), float(lo), float(hi)


def unresolved_reasons(form: str, test: dict, exact_departure: tuple[float, list[float] | None] | None) -> list[str]:
    """Why a power law that the rows do not tell apart from Newton's (``test["consistent"]``) is not ``newtonian``
    at ``test["precision"]``: empty exactly when the law has Newton's form, the rows show it within the precision
    (``test["within"]``), the exact law's departure (value, 95% interval) lies below the precision, and the rows have
    the power to tell a departure of twice the precision apart."""
    tau = test["precision"]
    reasons = [] if form == "newtonian" else [
        f"the search's law ({form}) is not Newton's, but the rows do not tell their law apart from Newton's: the free "
        f"fit's exponents and the constant reach Newton's within {tau:.0%}"]
    reasons += test["short_of"]
    ci = exact_departure[1] if exact_departure else None
    if ci is None:
        reasons.append("the exact law's departure from Newton's form is undefined")
    elif not ci[1] <= tau + ROUND_OFF:
        reasons.append(f"the exact law departs from Newton's form by {exact_departure[0]:.2%} ([{ci[0]:.2%}, "
                       f"{ci[1]:.2%}]): its interval reaches past the {tau:.0%} precision")
    p = test["power"]
    if not p["resolved"]:
        reasons.append(f"the rows resolve {p['interval_rms_ln']:.2%} RMS of ln (95%), coarser than the {tau:.0%} "
                       f"precision: a departure of {2 * tau:.0%} is told apart with about {p['units_needed']:,} "
                       f"{p['unit']} (these rows have {p['units']:,})")
    return reasons


def grade(power: dict | None, *, rows: int, majority: bool, law_error: float, baseline_error: float,
          exponent_se: dict[str, float] | None = None, quantity: str = "force", test: dict | None = None,
          exact_departure: tuple[float, list[float] | None] | None = None) -> tuple[str, list[str]]:
    """The verdict and its reasons: why it is ``inconclusive`` or ``unresolved`` (else an empty list).

    ``exponent_se``: the standard error of each feature's exponent of a power law (:func:`powerlaw.exponent_errors`);
    ``test``: the rows' :func:`newton_test`; ``exact_departure``: the exact law's departure from Newton's form and
    its 95% interval. A power law that the rows tell apart from Newton's keeps the grade of its form (``power-law``
    for a law of Newton's form: the form came out, the numbers disagree). At a precision above 0, one they do not
    tell apart is ``newtonian`` only with positive evidence (:func:`unresolved_reasons` empty), else
    ``unresolved``: so fewer or noisier rows can weaken a verdict, never make a told-apart law ``newtonian``. At
    precision 0 (an exact test) there is no precision to show a law within: Newton's form that the rows do not
    tell apart is ``newtonian``, and ``resolution`` says how finely."""
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
    form = form_grade(power, quantity)
    if test is None or not test["consistent"]:  # no test, or told apart: the form's grade, Newton's excepted
        return ("power-law" if form == "newtonian" else form), []
    if form == "not-a-power-law" or test["precision"] <= 0:
        return form, []
    unresolved = unresolved_reasons(form, test, exact_departure)
    return ("unresolved", unresolved) if unresolved else ("newtonian", [])
