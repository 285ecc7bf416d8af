"""Logarithmic laws: the screen that proposes ``C * prod(z_j ** a_j) * log(u)``.

``u = prod(z_j ** k_j)`` is a monomial of one or two of the variables (as in :mod:`orbitlaw.discovery.sr.binomial`).
The family holds the laws of ratios that a power law cannot: the isothermal work ``n k T ln(V2/V1)``, an entropy
change, a magnitude ``-2.5 log10(F1/F2)``, Tsiolkovsky's ``v_e ln(m0/m1)``. The search's operators have no logarithm
(``exp`` only), so without the screen such a law is written as a long series.

Only one monomial of each family ``u**k`` is tried (its powers coprime, the first positive: ``x0/x1``, never
``x1/x0`` or ``x0**2/x1**2``), since ``ln(u**k) = k ln u`` is the same law with another C; a law whose fitted C is
negative is proposed with ``1/u`` (``T ln(V2/V1)``, not ``-T ln(V1/V2)``; sympy writes ``ln(1/z)`` of one
variable back as ``-ln z``).

For a fixed u, ``y = C * g * w`` with ``w = ln u`` is a power law of the z_j in ``y / w`` (log space, on the rows
where ``y / w > 0``): each monomial costs one regression. The exponents a_j are rounded to the nearest integer,
half or third, C refitted by least squares on every row (a log changes sign at u = 1, and so does the target), and
each monomial scored by its relative squared error. The best :data:`KEEP` are proposed as fitted and with simple
constants snapped; they compete on held-out rows with the search's candidates. Like the binomial screen, it runs on
the dimensionless groups of a dimensional analysis (:mod:`orbitlaw.discovery.sr.units`), where a law's logarithm
can only be of a dimensionless ratio.
"""

from __future__ import annotations

import math

import numpy as np
import sympy

from orbitlaw.discovery.sr import powerlaw, snapping
from orbitlaw.discovery.sr.binomial import monomials

KEEP = 2
"""The best monomials u, by relative squared error, that are proposed."""

MIN_SIGN_AGREEMENT = 0.5
"""A monomial is tried only when y and ln(u) have the same sign (or the opposite sign) on at least this fraction of
the rows: the rows a log-space fit of the factor ``C * prod(z ** a)`` can use."""


def screen_candidates(Z: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    """Laws ``C * prod(z_j ** a_j) * log(u)`` of y on Z's columns (n, k); [] when Z has no column or a value of Z
    or y is not finite, or a value of Z is not positive."""
    if Z.shape[1] == 0 or not (np.all(Z > 0) and np.all(np.isfinite(Z)) and np.all(np.isfinite(y))):
        return []
    logz = np.log(Z)
    scale = float(y @ y)
    if scale <= 0:
        return []
    found = []
    for k in canonical_monomials(Z.shape[1]):
        w = logz @ np.asarray(k, dtype=np.float64)
        fitted = _fit(logz, y, w)
        if fitted is not None:
            a, c, sse = fitted
            found.append((sse / scale, k, a, c))
    found.sort(key=lambda f: f[0])
    exprs = []
    for _, k, a, c in found[:KEEP]:
        if c < 0:  # C ln(u) = |C| ln(1/u)
            k, c = tuple(-e for e in k), -c
        exprs.append(powerlaw.expression(c, a, symbols) * sympy.log(powerlaw.monomial(k, symbols)))
    return snapping.proposals(exprs, symbols, Z, y, "relative")


def canonical_monomials(k: int) -> list[tuple[int, ...]]:
    """The monomials of :func:`orbitlaw.discovery.sr.binomial.monomials` of k variables with coprime powers, the
    first nonzero positive: one of each family ``u**k``, whose logarithms differ only by the factor k."""
    return [m for m in monomials(k)
            if math.gcd(*m) == 1 and next(e for e in m if e) > 0]


def _fit(logz: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[list[sympy.Rational], float, float] | None:
    """(simple exponents a, C, squared error) of ``y = C * exp(logz @ a) * w``, or None where too few rows agree in
    sign (see :data:`MIN_SIGN_AGREEMENT`)."""
    with np.errstate(all="ignore"):
        ratio = y / w
    sign = 1.0 if np.mean(ratio > 0) >= np.mean(ratio < 0) else -1.0
    use = np.isfinite(ratio) & (sign * ratio > 0)
    if use.mean() < MIN_SIGN_AGREEMENT or use.sum() <= logz.shape[1] + 1:
        return None
    A = np.column_stack([np.ones(int(use.sum())), logz[use]])
    coef, *_ = np.linalg.lstsq(A, np.log(sign * ratio[use]), rcond=None)
    a = [powerlaw.simple_fractions(float(v))[0] for v in coef[1:]]
    g = np.exp(logz @ np.array([float(v) for v in a])) * w
    denom = float(g @ g)
    if not (denom > 0 and np.isfinite(denom)):
        return None
    c = float(g @ y) / denom
    resid = y - c * g
    return a, c, float(resid @ resid)
