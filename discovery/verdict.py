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
  alike in the star's field);
- ``inverse-square-planet-mass`` (force only): ``C * m1 / r**2`` (the LSSAR write-up's "F ∝ m1/r^2": Newton's
  law only where the star mass m2 is constant, absorbed into C);
- ``power-law``: any other ``C * prod(x ** k)``;
- ``not-a-power-law``: anything else.

The features must be named ``r`` (AU), ``m1`` (planet, Msun) and ``m2`` (star, Msun) for the first two
grades; with other names a power law is graded ``power-law``.
"""

from __future__ import annotations

import numpy as np
import sympy

from orbitlaw.discovery.law import error

VERDICTS = ("newtonian", "inverse-square-planet-mass", "power-law", "not-a-power-law", "inconclusive")

MIN_VERDICT_ROWS = 100
"""Fewer usable rows than this: inconclusive. Each seed searches on one half of its rows and selects on the
other (:func:`orbitlaw.discovery.symbolic.fit_seed`), so below 100 a seed would select among laws on < 50 rows."""

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
    """The grade of one law from its form alone (``power`` as :func:`orbitlaw.discovery.law.power_law` returns it,
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


def exponent_errors(X: np.ndarray, y: np.ndarray, exponents: list[float]) -> np.ndarray | None:
    """Standard errors (d,) of the exponents of ``C * prod(x ** k)`` fitted in log space on (X, y): the
    least-squares formula ``sigma^2 (A^T A)^-1`` of the centred ln X, sigma the robust (1.4826 MAD) scale of
    the law's log residuals. Infinite for a feature whose ln x does not vary, or varies only along the others.
    None when the log space is undefined (a value <= 0)."""
    if np.any(X <= 0) or np.any(y <= 0):
        return None
    A = np.log(X) - np.log(X).mean(axis=0)
    resid = np.log(y) - np.log(X) @ np.asarray(exponents, dtype=np.float64)
    sigma = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    gram = A.T @ A
    out = np.full(X.shape[1], np.inf)
    if np.linalg.matrix_rank(gram, tol=1e-12 * max(1.0, float(np.trace(gram)))) == X.shape[1]:
        out = np.sqrt(np.maximum(sigma**2 * np.diag(np.linalg.inv(gram)), 0.0))
    return out


def grade(power: dict | None, *, rows: int, majority: bool, law_error: float, baseline_error: float,
          exponent_se: dict[str, float] | None = None, quantity: str = "force") -> tuple[str, list[str]]:
    """The verdict and, when it is ``inconclusive``, the reasons (else an empty list). ``exponent_se``: the
    standard error of each feature's exponent of a power law (:func:`exponent_errors`)."""
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
    return ("inconclusive", reasons) if reasons else (form_grade(power, quantity), [])
