"""Binomial power laws: the screen that proposes ``C * prod(z_j ** a_j) * (1 + b * u) ** p``.

``u = prod(z_j ** k_j)`` is a monomial of one or two of the variables with small integer powers (k in -2..2).
The family holds many of the laws a power law cannot: the Lorentz factor ``(1 - v**2/c**2) ** (-1/2)``,
Doppler's ``(1 - v/c) ** -1``, Kepler's third law for comparable masses ``a**(3/2) M**(-1/2) (1 + m/M) ** (-1/2)``,
the vis-viva speed ``sqrt(M/r) * (2 - r/a) ** (1/2)``, a thin lens ``d1 / (1 + n d1/d2)``. Operon builds these
rarely (a root of a sum is a deep tree whose value on a narrow range any smooth function approximates), so the
screen fits them directly, as :mod:`orbitlaw.discovery.sr.powerlaw` fits power laws.

In log space ``ln y = c + sum_j a_j ln z_j + p ln(1 + b u)`` is linear in (c, a, p) for a fixed (u, b): each
monomial u and each b on a grid (then refined) costs one projection; the best few are then given simple
exponents (p and the a_j the nearest integer, half or third) and their b and c refitted, and proposed as fitted and
with simple constants snapped (:func:`orbitlaw.discovery.sr.law.snap_units`). The candidates compete on
held-out rows with the search's (:func:`orbitlaw.discovery.sr.seed_fit.fit_seed`). The screen runs on the
dimensionless groups of a dimensional analysis (:mod:`orbitlaw.discovery.sr.units`), where the variables are few
and the forms physical.
"""

from __future__ import annotations

import itertools

import numpy as np
import sympy
from scipy.optimize import minimize_scalar

from orbitlaw.discovery.sr import law as laws

GRID = np.array([-0.999, -0.99, -0.95, -0.9, -0.8, -0.6, -0.4, -0.2, 0.2, 0.5, 1.0, 2.0, 5.0, 20.0])
"""b * max(u) on the grid: b from just above -1/max(u) (where 1 + b u reaches 0) to where (1 + b u) is a power of
u in all but name."""

MAX_TWO_VARIABLE = 4
"""Monomials of two variables are tried when there are at most this many variables."""

KEEP = 3
"""The best (u, b) settings, by least-squares log error, that are given simple exponents."""

MAX_POWER = 3
"""The largest |p| proposed: (1 - x/58) ** 58 is exp(-x) in all but name, a law the search writes better."""

POWERS = 2
"""Simple values of p tried at each of them, nearest first: on a narrow range (1 + b u) ** p is nearly a function
of b * p alone (-1/2 and -2/3 both fit a Lorentz factor at 1% noise), and the held-out rows choose."""


def _monomials(k: int) -> list[tuple[int, ...]]:
    powers = (-2, -1, 1, 2)
    out = []
    for j in range(k):
        out += [tuple(p if i == j else 0 for i in range(k)) for p in powers]
    if k <= MAX_TWO_VARIABLE:
        for i, j in itertools.combinations(range(k), 2):
            out += [tuple(pi if m == i else pj if m == j else 0 for m in range(k)) for pi in powers for pj in powers]
    return out


def _simple(v: float, count: int = 1) -> sympy.Rational | list[sympy.Rational]:
    """The nearest integer, half or third (``count`` > 1: the ``count`` nearest, nearest first)."""
    values = {sympy.Rational(round(v * q) + d, q) for q in (1, 2, 3) for d in (-1, 0, 1)}
    values = {r for r in values if abs(r) <= MAX_POWER} or {sympy.Integer(MAX_POWER if v > 0 else -MAX_POWER)}
    ranked = sorted(values, key=lambda r: abs(float(r) - v))
    return ranked[0] if count == 1 else ranked[:count]


def screen_candidates(Z: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    """Binomial power laws of y on Z's columns (n, k), best first; [] unless y and Z are positive and finite."""
    if Z.shape[1] == 0 or not (np.all(y > 0) and np.all(Z > 0) and np.all(np.isfinite(Z)) and np.all(np.isfinite(y))):
        return []
    logz, logy = np.log(Z), np.log(y)
    A = np.column_stack([np.ones(len(y)), logz])
    Q, _ = np.linalg.qr(A)
    ry = logy - Q @ (Q.T @ logy)

    def sse(w: np.ndarray) -> float:  # the least-squares error with p free, for ln(1 + b u) = w
        rw = w - Q @ (Q.T @ w)
        ww = float(rw @ rw)
        return float(ry @ ry) - (float(ry @ rw) ** 2 / ww if ww > 1e-300 else 0.0)

    found = []
    for k in _monomials(Z.shape[1]):
        logu = logz @ np.asarray(k, dtype=np.float64)
        top = float(np.max(logu))
        with np.errstate(all="ignore"):
            def err(beta, logu=logu, top=top):
                return sse(np.log1p(beta * np.exp(logu - top)))
            scores = [err(beta) for beta in GRID]
        i = int(np.argmin(scores))
        lo, hi = GRID[max(i - 1, 0)], GRID[min(i + 1, len(GRID) - 1)]
        best = minimize_scalar(err, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
        beta = float(best.x) if best.fun < scores[i] else float(GRID[i])
        found.append((min(best.fun, scores[i]), k, beta / np.exp(top)))
    found.sort(key=lambda f: f[0])
    out = {}
    for _, k, b in found[:KEEP]:
        for p in range(POWERS):
            expr = _settle(Z, logy, logz, np.asarray(k, dtype=np.float64), b, symbols, p)
            if expr is not None:  # as fitted, and with the constants the rows cannot tell from simple numbers snapped
                for e in (expr, laws.snap_units(expr, symbols, Z, y, "log")):
                    out.setdefault(sympy.srepr(e), e)
    return list(out.values())


def _settle(Z, logy, logz, k, b, symbols, rank: int) -> sympy.Expr | None:
    """The law at (u = Z^k, b) with p (the ``rank``-th nearest simple value to its fit), then the a_j, made
    simple, b refitted at each step and c last; None where it is undefined or p is 0."""
    logu = logz @ k
    A = np.column_stack([np.ones(len(logy)), logz])

    def fit(b, p=None, a=None):
        with np.errstate(all="ignore"):
            w = np.log1p(b * np.exp(logu))
        if not np.all(np.isfinite(w)):
            return np.inf, None
        if a is not None:  # only c free
            c = float(np.median(logy - logz @ a - p * w))
            return float(np.sum((logy - c - logz @ a - p * w) ** 2)), (c, a, p)
        cols = A if p is not None else np.column_stack([A, w])
        target = logy - (p * w if p is not None else 0)
        coef, *_ = np.linalg.lstsq(cols, target, rcond=None)
        resid = target - cols @ coef
        return float(resid @ resid), (coef[0], coef[1:1 + logz.shape[1]], p if p is not None else coef[-1])

    def refit_b(b, **kw):
        lo = -1 / float(np.max(np.exp(logu))) * 0.99999
        res = minimize_scalar(lambda x: fit(x, **kw)[0], bounds=(lo, max(4 * abs(b), abs(lo), 1.0) * 4),
                              method="bounded", options={"xatol": 1e-9})
        return float(res.x) if res.fun <= fit(b, **kw)[0] else b

    _, params = fit(b)
    if params is None:
        return None
    powers = _simple(float(params[2]), POWERS)
    if rank >= len(powers) or powers[rank] == 0:
        return None
    p = powers[rank]
    b = refit_b(b, p=float(p))
    _, params = fit(b, p=float(p))
    if params is None:
        return None
    a = [_simple(float(v)) for v in params[1]]
    af = np.array([float(v) for v in a])
    b = refit_b(b, p=float(p), a=af)
    _, params = fit(b, p=float(p), a=af)
    if params is None:
        return None
    u = sympy.Mul(*[s ** int(e) for s, e in zip(symbols, k, strict=True) if e])
    expr = sympy.Float(float(np.exp(params[0])), 15) * (1 + sympy.Float(b, 15) * u) ** p
    for s, e in zip(symbols, a, strict=True):
        if e:
            expr = expr * s ** e
    return expr
