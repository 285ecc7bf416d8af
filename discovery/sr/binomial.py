"""Binomial power laws: the screen that proposes ``C * prod(z_j ** a_j) * (1 + b * u) ** p``.

``u = prod(z_j ** k_j)`` is a monomial of one or two of the variables with small integer powers (k in -2..2). The
family holds many of the laws a power law cannot: the Lorentz factor ``(1 - v**2/c**2) ** (-1/2)``, Doppler's
``(1 - v/c) ** -1``, Kepler's third law for comparable masses ``a**(3/2) M**(-1/2) (1 + m/M) ** (-1/2)``, the
vis-viva speed ``sqrt(M/r) (2 - r/a) ** (1/2)``, a thin lens ``d1 / (1 + n d1/d2)``. Operon builds these rarely (a
root of a sum is a deep tree whose value on a narrow range any smooth function approximates), so the screen fits
them directly, as :mod:`orbitlaw.discovery.sr.powerlaw` fits power laws.

In log space ``ln y = c + sum_j a_j ln z_j + p ln(1 + b u)`` is linear in (c, a, p) for a fixed (u, b): each
monomial u and each b on a grid costs one projection, and every local minimum of the grid is refined (the exact
law's basin can be narrower than the grid's step). The best few (u, b) are then given simple exponents (p the two
nearest integers, halves or thirds with |p| <= 3, the a_j the nearest), b and c refitted, and proposed as fitted
and with simple constants snapped (:func:`orbitlaw.discovery.sr.snapping.snap_units`). The candidates compete on
held-out rows with the search's (:func:`orbitlaw.discovery.sr.seed_fit.fit_seed`). The screen runs on the
dimensionless groups of a dimensional analysis (:mod:`orbitlaw.discovery.sr.units`), where the variables are few and
the forms physical, on the rows where the target is positive (SRBench's additive noise makes a small target
negative in some rows; the polish refits the constants on every row).

Exponential, Bose ``(exp(b u) - 1) ** p`` and Fermi ``(exp(b u) + 1) ** p`` families with a free rate b were tried
beside it and left out: on the 18 Feynman equations most affected at 1% noise they solved 6.5 against the binomial's
7.0 (an exponential of a narrow range fits as well as the exact binomial, and wins on size) and gained none of the
Planck or Boltzmann laws they were for (docs/benchmarks.md). An exponential whose rate is a simple number is
:mod:`orbitlaw.discovery.sr.exponential`'s screen.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import sympy
from scipy.optimize import minimize_scalar

from orbitlaw.discovery.sr import powerlaw, snapping

GRID = (-0.999, -0.99, -0.95, -0.9, -0.8, -0.6, -0.4, -0.2, 0.2, 0.5, 1.0, 2.0, 5.0, 20.0)
"""b * max(u) on the grid: from just above -1 (where 1 + b u reaches 0) to where (1 + b u) is a power of u in all
but name."""

MAX_TWO_VARIABLE = 4
"""Monomials of two variables are tried when there are at most this many variables."""

KEEP = 3
"""The best (u, b) settings, by least-squares log error, that are given simple exponents."""

MAX_POWER = 3
"""The largest |p| proposed: (1 - x/58) ** 58 is exp(-x) in all but name, a law the search writes better."""

POWERS = 2
"""Simple values of p tried at each setting, nearest first: on a narrow range (1 + b u) ** p is nearly a function
of b * p alone (-1/2 and -2/3 both fit a Lorentz factor at 1% noise), and the held-out rows choose."""

MIN_POSITIVE = 0.5
"""The screen runs when at least this fraction of the rows has a positive target (on those rows)."""


def monomials(k: int) -> list[tuple[int, ...]]:
    powers = (-2, -1, 1, 2)
    out = []
    for j in range(k):
        out += [tuple(p if i == j else 0 for i in range(k)) for p in powers]
    if k <= MAX_TWO_VARIABLE:
        for i, j in itertools.combinations(range(k), 2):
            out += [tuple(pi if m == i else pj if m == j else 0 for m in range(k)) for pi in powers for pj in powers]
    return out


def positive_rows(y: np.ndarray) -> np.ndarray:
    """The rows a log-space fit can use: y finite and > 0."""
    return np.isfinite(y) & (y > 0)


def log_space_rows(Z: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """The rows (mask) a screen fits in log space, those where y > 0; None when Z (n, k) has no column, a value of Z is
    not positive and finite, or fewer than MIN_POSITIVE of the rows have y > 0."""
    keep = positive_rows(y)
    if Z.shape[1] == 0 or keep.mean() < MIN_POSITIVE or not (np.all(Z > 0) and np.all(np.isfinite(Z))):
        return None
    return keep


def screen_candidates(Z: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    """Binomial power laws of y on Z's columns (n, k), fitted on the rows where y > 0; [] when Z has no column, a
    value of Z is not positive and finite, or fewer than MIN_POSITIVE of the rows have y > 0."""
    with warnings.catch_warnings():  # where 1 + b u <= 0 a setting scores inf, which scipy's Brent steps warn on
        warnings.simplefilter("ignore", RuntimeWarning)
        return _screen(Z, y, symbols)


def _screen(Z: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    keep = log_space_rows(Z, y)
    if keep is None:
        return []
    Z, y = Z[keep], y[keep]
    logz, logy = np.log(Z), np.log(y)
    Q, _ = np.linalg.qr(np.column_stack([np.ones(len(y)), logz]))
    ry = logy - Q @ (Q.T @ logy)

    def sse(w: np.ndarray) -> float:
        """The least-squares error with p free, for ln(1 + b u) = w; infinite where 1 + b u <= 0 on a row, or p is
        beyond MAX_POWER (a small b with a huge p imitates an exponential)."""
        if not np.all(np.isfinite(w)):
            return np.inf
        rw = w - Q @ (Q.T @ w)
        ww = float(rw @ rw)
        if ww <= 1e-300:
            return float(ry @ ry)
        p = float(ry @ rw) / ww
        if abs(p) > MAX_POWER + 0.5:
            return np.inf
        return float(ry @ ry) - p * float(ry @ rw)

    found = []
    for k in monomials(Z.shape[1]):
        u = np.exp(logz @ np.asarray(k, dtype=np.float64))
        top = float(np.max(u))

        def err(beta, u=u, top=top):
            with np.errstate(all="ignore"):
                return sse(np.log1p(beta / top * u))
        scores = [err(beta) for beta in GRID]
        last = len(GRID) - 1
        local = [i for i in range(len(GRID)) if np.isfinite(scores[i])
                 and scores[i] <= min(scores[max(i - 1, 0)], scores[min(i + 1, last)])]
        settings = []
        for i in local:  # every local minimum of the grid refined: the exact law's basin can be narrow
            refined = minimize_scalar(err, bounds=(GRID[max(i - 1, 0)], GRID[min(i + 1, last)]), method="bounded",
                                      options={"xatol": 1e-6})
            settings.append((refined.fun, float(refined.x)) if refined.fun < scores[i] else (scores[i], GRID[i]))
        if settings:
            score, beta = min(settings)
            found.append((score, k, beta / top))
    found.sort(key=lambda f: f[0])
    settled = [_settle(y, logz, np.asarray(k, dtype=np.float64), b, symbols, rank)
               for _, k, b in found[:KEEP] for rank in range(POWERS)]
    return snapping.proposals([e for e in settled if e is not None], symbols, Z, y, "log")


def _settle(y, logz, k, b, symbols, rank: int) -> sympy.Expr | None:
    """The law at (u = Z^k, b): p (the ``rank``-th nearest simple value to its fit), then the a_j, made simple, b
    refitted at each step and c last; None where it is undefined."""
    logy = np.log(y)
    u = np.exp(logz @ k)
    A = np.column_stack([np.ones(len(logy)), logz])

    def fit(b, p=None, a=None):
        with np.errstate(all="ignore"):
            w = np.log1p(b * u)
        if not np.all(np.isfinite(w)):
            return np.inf, None
        if a is not None:  # only c free (a median: robust to the rows the noise pushed near 0)
            c = float(np.median(logy - logz @ a - p * w))
            return float(np.sum((logy - c - logz @ a - p * w) ** 2)), (c, a, p)
        cols = A if p is not None else np.column_stack([A, w])
        target = logy - (p * w if p is not None else 0)
        coef, *_ = np.linalg.lstsq(cols, target, rcond=None)
        resid = target - cols @ coef
        return float(resid @ resid), (coef[0], coef[1:1 + logz.shape[1]], p if p is not None else coef[-1])

    def refit_b(b, **kw):
        bounds = (-0.99999 / float(np.max(u)), max(16 * abs(b), 4 / float(np.max(u))))
        res = minimize_scalar(lambda x: fit(x, **kw)[0], bounds=bounds, method="bounded", options={"xatol": 1e-9})
        return float(res.x) if res.fun <= fit(b, **kw)[0] else b

    _, params = fit(b)
    if params is None:
        return None
    powers = [r for r in powerlaw.simple_fractions(float(params[2]), POWERS, MAX_POWER) if r != 0]
    if rank >= len(powers):
        return None
    p = powers[rank]
    b = refit_b(b, p=float(p))
    _, params = fit(b, p=float(p))
    if params is None:
        return None
    a = [powerlaw.simple_fractions(float(v))[0] for v in params[1]]
    af = np.array([float(v) for v in a])
    b = refit_b(b, p=float(p), a=af)
    _, params = fit(b, p=float(p), a=af)
    if params is None:
        return None
    monomial = powerlaw.monomial(k, symbols)
    return powerlaw.expression(float(np.exp(params[0])), a, symbols) * (1 + sympy.Float(b, 15) * monomial) ** p
