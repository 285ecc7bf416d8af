"""The graded verdict: which law came out, and whether the data and the seeds support saying so.

Grades (``VERDICTS``), decided in this order:

- ``inconclusive``: the data cannot decide (fewer than ``MIN_VERDICT_ROWS`` usable rows), the seeds do not
  agree (no form is chosen by a strict majority of them), or the agreed law explains the target no better
  than a constant does (its error on all rows is not below the best constant's, in the same metric);
- ``newtonian``: ``C * m1 * m2 / r**2`` (exponents r: -2, m1: 1, m2: 1);
- ``inverse-square-planet-mass``: ``C * m1 / r**2`` (the LSSAR write-up's "F ∝ m1/r^2": Newton's law only
  where the star mass m2 is constant, absorbed into C);
- ``power-law``: any other ``C * prod(x ** k)``;
- ``not-a-power-law``: anything else.

The features must be named ``r`` (AU), ``m1`` (planet, Msun) and ``m2`` (star, Msun) for the first two
grades; with other names a power law is graded ``power-law``.
"""

from __future__ import annotations

import numpy as np
import sympy

VERDICTS = ("newtonian", "inverse-square-planet-mass", "power-law", "not-a-power-law", "inconclusive")

MIN_VERDICT_ROWS = 100
"""Fewer usable rows than this: inconclusive. Each seed searches on one half of its rows and selects on the
other (:func:`discovery.symbolic.fit_seed`), so below 100 a seed would select among laws on < 50 rows."""

NEWTON = {"r": -2, "m1": 1, "m2": 1}
INVERSE_SQUARE_PLANET_MASS = {"r": -2, "m1": 1, "m2": 0}


def _exponents_are(power: dict | None, wanted: dict) -> bool:
    if power is None or not set(wanted) <= set(power["exponents"]):
        return False
    e = power["exponents"]
    return all(e[k] == v for k, v in wanted.items()) and all(e[k] == 0 for k in e if k not in wanted)


def form_grade(power: dict | None) -> str:
    """The grade of one law from its form alone (``power`` as :func:`discovery.law.power_law` returns it,
    exponents keyed by feature name)."""
    if power is None:
        return "not-a-power-law"
    if _exponents_are(power, NEWTON):
        return "newtonian"
    if _exponents_are(power, INVERSE_SQUARE_PLANET_MASS):
        return "inverse-square-planet-mass"
    return "power-law"


def best_constant(y: np.ndarray, metric: str) -> sympy.Float:
    """The constant prediction of least error in ``metric``: the median (of ln y for ``"log"``, of y for
    ``"relative"``) minimises the mean absolute deviation that both metrics are."""
    value = float(np.exp(np.median(np.log(y)))) if metric == "log" else float(np.median(y))
    return sympy.Float(value, 15)


def constant_error(y: np.ndarray, metric: str) -> float:
    """The error of :func:`best_constant` on ``y``."""
    c = float(best_constant(y, metric))
    if metric == "log":
        return float(np.mean(np.abs(np.log(y) - np.log(c))))
    return float(np.mean(np.abs(y - c)) / np.mean(np.abs(y)))


def grade(power: dict | None, *, rows: int, majority: bool, law_error: float, baseline_error: float) -> tuple[
        str, list[str]]:
    """The verdict and, when it is ``inconclusive``, the reasons (else an empty list)."""
    reasons = []
    if rows < MIN_VERDICT_ROWS:
        reasons.append(f"only {rows} usable rows (a verdict needs {MIN_VERDICT_ROWS})")
    if not majority:
        reasons.append("no law was chosen by a strict majority of the seeds")
    if not law_error < baseline_error:
        reasons.append(f"the law's error {law_error:.3g} is not below a constant's {baseline_error:.3g}")
    return ("inconclusive", reasons) if reasons else (form_grade(power), [])
