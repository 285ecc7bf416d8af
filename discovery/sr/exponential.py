"""Exponential laws: the screen that proposes ``C * prod(z_j ** a_j) * exp(b * u)``.

``u = prod(z_j ** k_j)`` is a monomial of one or two of the variables (as in :mod:`orbitlaw.discovery.sr.binomial`).
The family holds the Gaussian ``exp(-theta**2/2) / sqrt(2 pi)``, the barometric law ``n0 exp(-m g x / (k T))`` and
Boltzmann factors. The search has ``exp`` among its operators, but on a narrow range a sum of sines fits a Gaussian
as well and is found more often (at 1% noise the Gaussian was solved in 2 of 8 fits without the screen).

For a fixed u, ``ln y = c + sum_j a_j ln z_j + b u`` is linear in (c, a, b): each monomial costs one projection, on
the rows where y > 0. The best :data:`KEEP` monomials, by squared log error, are given simple exponents a_j (the
nearest integer, half or third), b and c refitted, and proposed only where b is a simple number as well: an
integer, a half or a third of at most :data:`MAX_RATE` in size, within the fraction :data:`SIMPLE_NEAR` of it. An
exponential of a narrow range with a free rate fits many smooth laws as well as their own form does (a Lorentz
factor, a binomial) and is simpler, so a free rate would take laws the other screens write exactly; and every
number beyond 10/3 is within 5% of a third, so a larger "simple" rate is a free one in all but name. The candidates
compete on held-out rows with the search's (:func:`orbitlaw.discovery.sr.seed_fit.fit_seed`). Like the binomial
screen it runs on the dimensionless groups of a dimensional analysis (:mod:`orbitlaw.discovery.sr.units`), where the
argument of an exponential is dimensionless.
"""

from __future__ import annotations

import numpy as np
import sympy

from orbitlaw.discovery.sr import powerlaw, snapping
from orbitlaw.discovery.sr.binomial import log_space_rows, monomials

KEEP = 2
"""The best monomials u, by least-squares log error, that are given simple constants."""

SIMPLE_NEAR = 0.05
"""The fitted rate b must be within this fraction of a simple number (integer, half or third) to be proposed."""

MAX_RATE = 3
"""The largest |b| proposed (as the binomial screen's largest power, :data:`orbitlaw.discovery.sr.binomial.MAX_POWER`):
beyond 10/3 every rate is within SIMPLE_NEAR of a third."""


def screen_candidates(Z: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    """Laws ``C * prod(z_j ** a_j) * exp(b * u)`` of y on Z's columns (n, k), fitted on the rows where y > 0; []
    when Z has no column, a value of Z is not positive and finite, or fewer than MIN_POSITIVE of the rows have
    y > 0 (:func:`orbitlaw.discovery.sr.binomial.log_space_rows`)."""
    keep = log_space_rows(Z, y)
    if keep is None:
        return []
    Z, y = Z[keep], y[keep]
    logz, logy = np.log(Z), np.log(y)
    found = []
    for k in monomials(Z.shape[1]):
        with np.errstate(over="ignore"):
            u = np.exp(logz @ np.asarray(k, dtype=np.float64))
        if not np.all(np.isfinite(u)):  # a group far from 1 under a power: no fit
            continue
        A = np.column_stack([np.ones(len(y)), logz, u])
        coef, *_ = np.linalg.lstsq(A, logy, rcond=None)
        resid = logy - A @ coef
        found.append((float(resid @ resid), k, u, coef[1:-1]))
    found.sort(key=lambda f: f[0])
    settled = [_settle(logz, logy, u, a, np.asarray(k), symbols) for _, k, u, a in found[:KEEP]]
    return snapping.proposals([e for e in settled if e is not None], symbols, Z, y, "log")


def _settle(logz: np.ndarray, logy: np.ndarray, u: np.ndarray, a_fit: np.ndarray, k: np.ndarray,
            symbols: list[sympy.Symbol]) -> sympy.Expr | None:
    """The law at u = Z^k (u: (n,); the monomial's powers k and the fitted exponents a_fit: (d,), one per column of
    Z) with simple exponents a_j and a simple rate b, c refitted last (the median in log space); None where the
    rate, refitted with the simple a_j, is not simple (:data:`SIMPLE_NEAR`, :data:`MAX_RATE`)."""
    a = [powerlaw.simple_fractions(float(v))[0] for v in a_fit]
    rest = logy - logz @ np.array([float(v) for v in a])
    (_, b), *_ = np.linalg.lstsq(np.column_stack([np.ones(len(logy)), u]), rest, rcond=None)
    simple = powerlaw.simple_fractions(float(b))[0]
    if simple == 0 or abs(simple) > MAX_RATE or abs(float(simple) - b) > SIMPLE_NEAR * abs(float(simple)):
        return None
    c = float(np.median(rest - float(simple) * u))
    return powerlaw.expression(float(np.exp(c)), a, symbols) * sympy.exp(simple * powerlaw.monomial(k, symbols))
