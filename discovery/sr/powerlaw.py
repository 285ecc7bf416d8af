"""Power laws in log space: the screen that proposes one, its robust constant, and a bootstrap interval.

A power law ``F = C * prod(x_j ** k_j)`` is a straight line in log space:
``ln F = ln C + sum_j k_j ln x_j``. For a positive target and positive features this gives, at the cost
of one small regression, the candidate that a search on the raw scale can miss when the target spans
orders of magnitude (a raw-scale loss is dominated by the few largest rows). The search's operators
(``+``, ``*``, inverse, ``sin``, ``cos``, ``exp``) build only integer powers, so the screen proposes (i) the
law with each exponent rounded to the nearest integer, (ii) rounded to the nearest half or third
(Kepler's third law, P = a^(3/2) M^(-1/2)) and (iii) the free fit's real exponents, rounded to
``FREE_DECIMALS`` decimals (r^-2.05). They compete with the search's candidates on held-out rows like any
other (:func:`orbitlaw.discovery.sr.seed_fit.fit_seed`); a non-integer exponent costs complexity
(:func:`orbitlaw.discovery.sr.law.complexity`), so it is chosen only when the rows resolve its gain.

Constants are fitted as the median of ``ln F - sum_j k_j ln x_j`` (the least-absolute-deviation fit in
log space): a few corrupted rows move it by a few quantiles of the noise, not by their size.
"""

from __future__ import annotations

import numpy as np
import sympy
from scipy.optimize import least_squares


def applicable(X: np.ndarray, y: np.ndarray) -> bool:
    """The screen needs every target and feature value positive (and finite)."""
    return bool(np.all(y > 0) and np.all(X > 0) and np.all(np.isfinite(X)) and np.all(np.isfinite(y)))


def fit_exponents(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exponents k (d,) of ``ln y = c + ln(X) @ k``, fitted with a soft-L1 (robust) loss.

    The soft-L1 scale is the noise level read from the least-squares residuals (1.4826 * MAD), so rows
    far outside the noise (a corrupted measurement) count linearly, not quadratically.
    """
    A = np.column_stack([np.ones(len(y)), np.log(X)])
    b = np.log(y)
    coef, *_ = np.linalg.lstsq(A, b, rcond=None)
    resid = A @ coef - b
    scale = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    if scale > 1e-12:
        # the residual is linear in c: its Jacobian is A itself (exact, and half the cost of finite differences)
        coef = least_squares(lambda c: A @ c - b, coef, jac=lambda c: A, loss="soft_l1", f_scale=scale,
                             method="trf").x
    return coef[1:]


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


def expression(constant: float, exponents, symbols: list[sympy.Symbol]) -> sympy.Expr:
    """``constant * prod(symbol ** k)`` as a sympy expression (integer exponents stay exact)."""
    expr = sympy.Float(float(constant), 15)
    for s, k in zip(symbols, exponents, strict=True):
        if isinstance(k, sympy.Rational):  # an exact fraction stays exact (3/2 is structure, not a constant)
            k = int(k) if k.q == 1 else k
        else:
            k = int(k) if float(k).is_integer() else sympy.Float(float(k), 15)
        if k:
            expr = expr * s**k
    return expr


def monomial(exponents, symbols: list[sympy.Symbol]) -> sympy.Expr:
    """``prod(symbol ** k)`` with exact exponents (ints or fractions: ``Fraction(3, 2)`` gives ``s**(3/2)``); the
    symbols whose exponent is 0 left out."""
    return sympy.Mul(*[s ** sympy.Rational(k) for s, k in zip(symbols, exponents, strict=True) if k])


FREE_DECIMALS = 3
"""The free (real) exponents a screen proposes are rounded to this many decimals: readable, and finer than any
interval the toolkit's tables resolve."""


def screen_candidates(X: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
    """The screen's power laws: integer exponents (:func:`screen`), the nearest halves or thirds, and the free
    fit's exponents (``FREE_DECIMALS`` decimals), each with its robust constant; distinct and not constant."""
    if not applicable(X, y):
        return []
    k = fit_exponents(X, y)
    rational = [simple_fractions(float(v))[0] for v in k]  # 6ths that are neither halves nor thirds are not proposed
    free = np.round(k, FREE_DECIMALS)
    se = exponent_errors(X, y, k)
    # mixed: each exponent its fraction where the rows cannot tell it from that (3 standard errors), else real
    mixed = [q if abs(float(q) - v) <= 3 * s else f for q, v, s, f in zip(rational, k, se, free, strict=True)]
    out = {}
    for exps in (np.rint(k), rational, mixed, free):
        if not any(float(e) for e in exps):
            continue
        c = fit_constant(X, y, [float(e) for e in exps], "log")
        expr = expression(c, exps, symbols)
        out.setdefault(sympy.srepr(expr), expr)
    return list(out.values())


def simple_fractions(v: float, count: int = 1, limit: float | None = None) -> list[sympy.Rational]:
    """The ``count`` integers, halves or thirds nearest to a finite ``v`` (ties: the smaller denominator first), of
    |value| <= ``limit`` when given (none within it: the end of the range on ``v``'s side)."""
    values = {sympy.Rational(round(v * q) + d, q) for q in (1, 2, 3) for d in (-1, 0, 1)}
    if limit is not None:
        values = {r for r in values if abs(r) <= limit} or {sympy.Integer(int(limit) if v > 0 else -int(limit))}
    return sorted(values, key=lambda r: (abs(float(r) - v), r.q, float(r)))[:count]


def screen(X: np.ndarray, y: np.ndarray, symbols: list[sympy.Symbol]) -> sympy.Expr | None:
    """The integer power law suggested by a robust log-space fit, or None (screen not applicable, or every
    rounded exponent 0: a constant is not a law of the features)."""
    if not applicable(X, y):
        return None
    k = np.rint(fit_exponents(X, y))
    if not np.any(k):
        return None
    return expression(fit_constant(X, y, k, "log"), k, symbols)


def fit_constant(X: np.ndarray, y: np.ndarray, exponents, metric: str) -> float | None:
    """C of ``C * prod(x ** k)`` with the exponents fixed, or None where the fit is undefined.

    ``"log"``: exp of the median of ``ln y - sum k ln x`` (least absolute deviations in log space; needs
    every feature with k != 0 positive). ``"relative"``: the least-squares C of y on ``prod(x ** k)``.
    """
    g = _basis(X, exponents, log=metric == "log")
    return None if g is None else _constant(g, y, metric)


class Resampler:
    """Bootstrap resamples of a table's rows: rows drawn with replacement, or whole groups of rows (``groups``:
    one label per row, e.g. the probe sequence, i.e. the system, a step belongs to), so that rows which share a
    system's errors are never counted as independent. ``next()`` gives one resample's row indices."""

    def __init__(self, n: int, seed: int, groups: np.ndarray | None = None):
        self.n, self.rng, self.members = n, np.random.default_rng(seed), None
        if groups is not None:
            _, inverse = np.unique(groups, return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            self.members = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)

    def next(self) -> np.ndarray:
        if self.members is None:
            return self.rng.integers(0, self.n, self.n)
        return np.concatenate([self.members[j] for j in self.rng.integers(0, len(self.members), len(self.members))])


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap ``values`` (one row per resample), per column."""
    lo, hi = np.nanquantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi


def constant_interval(X: np.ndarray, y: np.ndarray, exponents, metric: str, seed: int, resamples: int = 1000,
                      level: float = 0.95, groups: np.ndarray | None = None) -> tuple[float, float] | None:
    """Percentile bootstrap interval (``level``) of :func:`fit_constant`, resampling rows with replacement,
    or whole groups of rows (``groups``: one label per row, e.g. the probe sequence a step belongs to)."""
    g = _basis(X, exponents, log=metric == "log")
    if g is None:
        return None
    draw = Resampler(len(y), seed, groups)
    values = np.empty(resamples)
    for i in range(resamples):  # one resample at a time: memory stays O(rows) however large the table
        idx = draw.next()
        c = _constant(g[idx], y[idx], metric)
        values[i] = np.nan if c is None else c
    lo, hi = percentile_interval(values, level)
    return float(lo), float(hi)


def exponent_resamples(X: np.ndarray, y: np.ndarray, seed: int, resamples: int = 400,
                       groups: np.ndarray | None = None) -> np.ndarray:
    """The free exponents :func:`fit_exponents` on ``resamples`` bootstrap resamples (resamples, d) of rows or of
    whole groups (as :func:`constant_interval`). Each resample costs one robust fit (~2.5 ms on 5,000 rows)."""
    values = np.empty((resamples, X.shape[1]))
    draw = Resampler(len(y), seed, groups)
    for i in range(resamples):
        idx = draw.next()
        values[i] = fit_exponents(X[idx], y[idx])
    return values


def exponent_intervals(X: np.ndarray, y: np.ndarray, seed: int, resamples: int = 400, level: float = 0.95,
                       groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals (lo (d,), hi (d,)) of the free exponents (:func:`exponent_resamples`), hence
    fewer resamples than the constant's."""
    return percentile_interval(exponent_resamples(X, y, seed, resamples, groups), level)


def _constant(g: np.ndarray, y: np.ndarray, metric: str) -> float | None:
    """The fitted C from the basis ``g`` of :func:`_basis` (see :func:`fit_constant`)."""
    if metric == "log":
        return float(np.exp(np.median(np.log(y) - g)))
    denom = float(g @ g)
    return float(g @ y) / denom if denom > 0 and np.isfinite(denom) else None


def _basis(X: np.ndarray, exponents, log: bool) -> np.ndarray | None:
    """``sum k ln x`` (log) or ``prod x ** k`` over the features with k != 0; None where undefined."""
    k = np.asarray(exponents, dtype=np.float64)
    used = np.flatnonzero(k)
    if log:
        if np.any(X[:, used] <= 0):
            return None
        return np.log(X[:, used]) @ k[used] if len(used) else np.zeros(len(X))
    with np.errstate(all="ignore"):
        g = np.prod(X[:, used] ** k[used], axis=1) if len(used) else np.ones(len(X))
    return g if np.all(np.isfinite(g)) else None
