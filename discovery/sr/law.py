"""Symbolic laws as expressions: their complexity, their error on data, simplified and refitted.

Every backend hands the toolkit candidate expressions (sympy, in the feature symbols); everything that decides the
answer is backend independent, in three modules:

- this one, the expressions: ``polish`` simplifies with sympy, refits every numeric constant by least squares on
  the data, and drops each constant (set it to 0, e.g. an intercept of 1e-16) whose removal leaves the error
  unchanged; ``error`` and ``row_errors`` score a law on rows; ``complexity`` is the number of nodes of the
  sympy expression tree;
- :mod:`~orbitlaw.discovery.sr.snapping`: constants the data cannot tell from a simple number set to it
  (``exp(-x**2/2)``, not ``exp(-0.5006*x**2)``);
- :mod:`~orbitlaw.discovery.sr.choice`: the Pareto front, the law chosen from it, how far two laws are apart,
  and which form a law has (a power law ``C * prod(x_i ** k_i)``; Newton's is ``C * m1 * m2 * r**-2`` with
  G = 4 pi^2 AU^3 Msun^-1 yr^-2 = 39.478 in the toolkit's units; the form decides, never the numerical fit).

``error`` is one of two metrics, chosen by the target (:func:`metric_for`):

- ``"log"`` for a positive target (a force magnitude): the mean absolute log error
  ``mean|ln y - ln f(x)|`` (per row about the relative error, so every row counts the same whether its
  force is 1e-12 or 1e2; a row predicted non-positive, or off by more than a factor 1e4, counts as
  ``LOG_ERROR_CAP``). Constants are refitted by least squares in log space.
- ``"relative"`` for a target with zero or negative values: the relative L1 error
  ``mean|y - f(x)| / mean|y|`` (scale free, the L1-like loss of the reference protocol), which a few rows
  of the largest magnitude dominate.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import sympy
from scipy.optimize import least_squares

LOG_ERROR_CAP = math.log(1e4)
"""Per-row cap of the log error: a prediction that is non-positive, or off by more than a factor 1e4, is
simply wrong; capping keeps one such row from outweighing every other (and keeps the error finite)."""

METRICS = ("log", "relative")

ERROR_FLOOR = 1e-12
"""Relative errors below this are round-off; they are clamped so that scores stay finite and stable."""

REFIT_EVALUATIONS = 100
"""A refit that has not converged stops after about this many evaluations of the residuals, the numerical
Jacobian's included (each step of a fit of k constants costs k + 1): the forms that do not converge within
it are the search's sin/cos nonsense with many constants, while a law of a few constants converges in a
few dozen. (300 held every verdict of the benchmark matrix too, but left the slowest seeds at 3.6 s of CPU.)"""

PRUNE_TOLERANCE = 1e-6
"""A constant is dropped when setting it to 0 worsens the relative error by less than this (absolute)
plus 1% of the error: such a term is not supported by the data."""


@dataclass
class Candidate:
    """One expression on a Pareto front: sympy ``expr``, node count, relative L1 ``error`` and score."""

    expr: sympy.Expr
    complexity: int
    error: float
    score: float = 0.0

    def to_dict(self) -> dict:
        return {"expression": str(self.expr), "complexity": self.complexity, "error": self.error,
                "score": self.score}


NON_INTEGER_EXPONENT_COST = {"rational": 1, "real": 2}
"""Extra nodes a power costs when its exponent is a fraction (r**(3/2): one more, as a division would) or a
fitted real number (r**-2.05: two more, as a fitted constant and its operator would). Without it r**-2.003
would tie r**-2 in size and win on noise whenever it fits the held-out rows better by a hair."""


def complexity(expr: sympy.Expr) -> int:
    """Number of nodes of the expression tree (symbols, numbers and operators each count 1), plus
    ``NON_INTEGER_EXPONENT_COST`` for each numeric exponent that is not an integer."""
    nodes = 0
    for e in sympy.preorder_traversal(expr):
        nodes += 1
        if e.is_Pow and e.exp.is_Number and not e.exp.is_Integer and not e.base.is_Number:
            nodes += NON_INTEGER_EXPONENT_COST["rational" if e.exp.is_Rational else "real"]
    return nodes


def relative_l1(y: np.ndarray, pred: np.ndarray) -> float:
    """``mean|y - pred| / mean|y|``; infinity when the prediction is not finite everywhere."""
    pred = np.broadcast_to(np.asarray(pred, dtype=np.float64), y.shape)
    if not np.all(np.isfinite(pred)):
        return math.inf
    return float(np.mean(np.abs(y - pred)) / np.mean(np.abs(y)))


def log_l1(y: np.ndarray, pred: np.ndarray) -> float:
    """``mean min(|ln y - ln pred|, LOG_ERROR_CAP)`` for a positive ``y``; a non-positive prediction counts as
    the cap; infinity when the prediction is not finite everywhere."""
    return float(np.mean(row_errors(y, pred, "log")))


def metric_for(y: np.ndarray) -> str:
    """``"log"`` when every target value is positive, else ``"relative"`` (see the module doc)."""
    return "log" if bool(np.all(y > 0)) else "relative"


def error(y: np.ndarray, pred: np.ndarray, metric: str) -> float:
    """The error of ``pred`` against ``y`` in ``metric`` (``"log"`` or ``"relative"``)."""
    if metric == "log":
        return log_l1(y, pred)
    if metric == "relative":
        return relative_l1(y, pred)
    raise ValueError(f"unknown error metric {metric!r}: use one of {', '.join(METRICS)}")


def row_errors(y: np.ndarray, pred: np.ndarray, metric: str) -> np.ndarray:
    """Per-row errors whose mean is :func:`error` (``|ln y - ln f|`` capped, or ``|y - f| / mean|y|``);
    infinite everywhere when the prediction is not finite everywhere."""
    pred = np.broadcast_to(np.asarray(pred, dtype=np.float64), y.shape)
    if not np.all(np.isfinite(pred)):
        return np.full(y.shape, math.inf)
    if metric == "log":
        with np.errstate(all="ignore"):
            d = np.abs(np.log(y) - np.log(np.where(pred > 0, pred, 1.0)))
        return np.where(pred > 0, np.minimum(d, LOG_ERROR_CAP), LOG_ERROR_CAP)
    return np.abs(y - pred) / np.mean(np.abs(y))


class _Memo:
    """A bounded memo of a pure function of sympy expressions, keyed by ``srepr`` (which, unlike ``==``, tells
    Floats of different precision apart), so that a hit returns exactly what a fresh call would. A seed's
    polishing meets the same expressions many times (a candidate on its search rows, then its held-out rows;
    the same pruned trial from several constants): each ``lambdify`` or ``simplify`` costs 1-15 ms."""

    def __init__(self, function, size: int = 512):  # a lambdified function holds ~30 KB
        self.function, self.size, self.cache = function, size, {}

    def __call__(self, *args):
        key = sympy.srepr(args)
        value = self.cache.get(key)
        if value is None:
            if len(self.cache) >= self.size:
                self.cache.clear()
            value = self.cache[key] = self.function(*args)
        return value


_lambdify = _Memo(lambda symbols, expr: sympy.lambdify(symbols, expr, modules="numpy", docstring_limit=0))


def evaluate(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray) -> np.ndarray:
    """Evaluate ``expr`` on the columns of ``X`` (n, len(symbols)); non-finite where it overflows."""
    if not finite_form(expr):
        return np.full(X.shape[0], np.nan)
    f = _lambdify(tuple(symbols), expr)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f(*X.T)
    return np.broadcast_to(np.asarray(out, dtype=np.float64), (X.shape[0],))


def _integer_exponents(expr: sympy.Expr) -> sympy.Expr:
    """Float exponents that are integers to 1e-9 (``r**2.0`` after float simplification) become integers."""
    def fix(e):
        if e.is_Pow and e.exp.is_Float and abs(float(e.exp) - round(float(e.exp))) < 1e-9:
            return sympy.Pow(e.base, sympy.Integer(round(float(e.exp))))
        return e
    return expr.replace(lambda e: e.is_Pow and e.exp.is_Float, fix)


def simplify(expr: sympy.Expr) -> sympy.Expr:
    """Memoised :func:`_simplify`."""
    return _simplify_memo(expr)


def _simplify(expr: sympy.Expr) -> sympy.Expr:
    """Cheap algebraic normal form: common factors pulled out, powers merged, exponents made exact, floats
    equal to +-1 or 0 folded away. (sympy's evaluation already flattens the products and quotients that
    the backends build; full ``sympy.simplify`` costs ~0.2 s per expression and changed none in tests.)"""
    expr = _integer_exponents(sympy.powsimp(sympy.factor_terms(expr), force=True))
    trivial = {f: sympy.Integer(round(float(f))) for f in expr.atoms(sympy.Float) if float(f) in (1.0, -1.0, 0.0)}
    return _integer_exponents(expr.xreplace(trivial)) if trivial else expr


_simplify_memo = _Memo(_simplify)


def substitute(expr: sympy.Expr, values: dict) -> sympy.Expr | None:
    """``expr.xreplace(values)``, or None where that would make a number beyond double range. sympy evaluates a
    function of numbers in arbitrary precision as it builds it: setting ``a = 0`` in ``cos(exp(4.05e6 * exp(a * x)))``
    makes ``exp(4.05e6)``, a float of 1.76 million digits, and its cosine needs pi to as many (six minutes on one
    core, seen in a study's LLM stage). Built bottom-up, such a number stops the build where it appears."""
    def build(node: sympy.Basic) -> sympy.Basic | None:
        if node in values:
            return values[node]
        if not node.args:
            return node
        args = [build(a) for a in node.args]
        if any(a is None for a in args):
            return None
        if all(a is b for a, b in zip(args, node.args, strict=True)):
            return node
        out = node.func(*args)
        if isinstance(out, sympy.Float) and not math.isfinite(float(out)):
            return None
        return out

    return build(expr)


def simplified(expr: sympy.Expr, values: dict) -> sympy.Expr | None:
    """A pruning or snapping trial: :func:`substitute`, then :func:`simplify`; None as :func:`substitute` gives."""
    trial = substitute(expr, values)
    return None if trial is None else simplify(trial)


def constants(expr: sympy.Expr) -> list[sympy.Float]:
    """The free numeric constants of ``expr`` (its Floats; integers and rationals are structure)."""
    return sorted(expr.atoms(sympy.Float), key=lambda f: (float(f), str(f)))


def refit(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
          metric: str = "relative") -> sympy.Expr:
    """Least-squares refit of every numeric constant of ``expr`` on (X, y), starting from its values; in log
    space (``ln f - ln y``, capped like :func:`log_l1`) when ``metric`` is ``"log"``."""
    consts = constants(expr)
    if not consts:
        return expr
    params = sympy.symbols(f"_p0:{len(consts)}")
    template = expr.xreplace(dict(zip(consts, params, strict=True)))
    f = _lambdify((*symbols, *params), template)
    columns = list(X.T)
    scale = float(np.mean(np.abs(y)))
    log_y = np.log(y) if metric == "log" else None

    def residual(p):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = np.broadcast_to(np.asarray(f(*columns, *p), dtype=np.float64), y.shape)
            if log_y is None:
                r = (pred - y) / scale
                return np.where(np.isfinite(r), r, 1e6)
            r = np.clip(np.log(np.where(pred > 0, pred, 1.0)) - log_y, -LOG_ERROR_CAP, LOG_ERROR_CAP)
        return np.where((pred > 0) & np.isfinite(pred), r, LOG_ERROR_CAP)

    x0 = np.array([float(c) for c in consts])
    try:
        # trust-region reflective, not Levenberg-Marquardt: scipy's MINPACK (least_squares(method="lm") and
        # leastsq, scipy 1.17) proposed different steps from identical residuals from one call to the next
        # within a process, so two identical studies came out with different constants
        # (tests/test_discover.py::test_polishing_is_deterministic_within_a_process).
        x = least_squares(residual, x0, method="trf", max_nfev=max(5, REFIT_EVALUATIONS // (len(x0) + 1))).x
        best = x if np.sum(residual(x) ** 2) <= np.sum(residual(x0) ** 2) else x0
        if log_y is not None and len(y) > len(x0):
            # Least squares lets a few corrupted rows (2% of rows off by 10x) shift every constant by ~5%; a
            # soft-L1 fit at the noise scale (1.4826 MAD) does not. Keep whichever has the lower mean |log error|.
            r = residual(best)
            noise = 1.4826 * float(np.median(np.abs(r - np.median(r))))
            if noise > 1e-12:
                robust = least_squares(residual, best, method="trf", loss="soft_l1", f_scale=noise,
                                       max_nfev=max(5, REFIT_EVALUATIONS // (len(x0) + 1))).x
                if np.mean(np.abs(residual(robust))) < np.mean(np.abs(r)):
                    best = robust
    except (ValueError, np.linalg.LinAlgError):
        best = x0
    fitted = substitute(template, {p: sympy.Float(v, 15) for p, v in zip(params, best, strict=True)})
    return expr if fitted is None else fitted


def finite_form(expr: sympy.Expr) -> bool:
    """No infinity or NaN, and every constant within double range (sympy's arbitrary-precision floats can
    reach exp(1e5), which neither numpy nor the printer can take)."""
    if expr.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        return False
    return all(math.isfinite(float(f)) and (f == 0 or abs(float(f)) > 1e-300) for f in expr.atoms(sympy.Float))


def polish(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
           metric: str = "relative") -> Candidate:
    """Simplify, refit constants, then drop every constant the data does not support (see module doc);
    errors in ``metric``."""
    expr = simplify(expr)
    if not finite_form(expr):
        return Candidate(expr, complexity(expr), math.inf)
    expr = refit(expr, symbols, X, y, metric)
    err = error(y, evaluate(expr, symbols, X), metric)
    changed = True
    while changed:
        changed = False
        for c in constants(expr):
            trial = simplified(expr, {c: sympy.Integer(0)})
            if trial is None or trial == expr or not finite_form(trial) or trial.free_symbols.isdisjoint(symbols):
                continue  # a division by zero, or every variable gone: not a simplification of a law
            trial_error = error(y, evaluate(trial, symbols, X), metric)
            if trial_error > 2 * err + PRUNE_TOLERANCE:
                continue  # the term carries weight: refitting the rest will not make up for it
            trial = refit(trial, symbols, X, y, metric)
            trial_error = error(y, evaluate(trial, symbols, X), metric)
            if trial_error <= err * 1.01 + PRUNE_TOLERANCE:
                expr, err, changed = trial, trial_error, True
                break
    return Candidate(expr, complexity(expr), err)
