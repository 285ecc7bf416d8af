"""Power laws in log space: the screen that proposes one, its robust constant, and a bootstrap interval.

A power law ``F = C * prod(x_j ** k_j)`` is a straight line in log space:
``ln F = ln C + sum_j k_j ln x_j``. For a positive target and positive features this gives, at the cost
of one small regression, the candidate that a search on the raw scale can miss when the target spans
orders of magnitude (a raw-scale loss is dominated by the few largest rows). The search's operators
(``+``, ``*``, inverse, ``sin``, ``cos``, ``exp``) build only integer powers, so the screen proposes the
law with each exponent rounded to the nearest integer; it then competes with the search's candidates on
held-out rows like any other (:func:`orbitlaw.discovery.symbolic.fit_seed`), so it is chosen only when it wins.

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
        coef = least_squares(lambda c: A @ c - b, coef, loss="soft_l1", f_scale=scale, method="trf").x
    return coef[1:]


def expression(constant: float, exponents, symbols: list[sympy.Symbol]) -> sympy.Expr:
    """``constant * prod(symbol ** k)`` as a sympy expression (integer exponents stay exact)."""
    expr = sympy.Float(float(constant), 15)
    for s, k in zip(symbols, exponents, strict=True):
        k = int(k) if float(k).is_integer() else float(k)
        if k:
            expr = expr * s**k
    return expr


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


def constant_interval(X: np.ndarray, y: np.ndarray, exponents, metric: str, seed: int, resamples: int = 1000,
                      level: float = 0.95, groups: np.ndarray | None = None) -> tuple[float, float] | None:
    """Percentile bootstrap interval (``level``) of :func:`fit_constant`, resampling rows with replacement,
    or whole groups of rows (``groups``: one label per row, e.g. the probe sequence a step belongs to)."""
    g = _basis(X, exponents, log=metric == "log")
    if g is None:
        return None
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    members = None
    if groups is not None:
        _, inverse = np.unique(groups, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        members = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
    for i in range(resamples):  # one resample at a time: memory stays O(rows) however large the table
        if members is None:
            idx = rng.integers(0, len(y), len(y))
        else:
            idx = np.concatenate([members[j] for j in rng.integers(0, len(members), len(members))])
        c = _constant(g[idx], y[idx], metric)
        values[i] = np.nan if c is None else c
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


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
