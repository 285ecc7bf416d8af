"""Symbolic laws: simplify, refit, prune, choose from a Pareto front, and decide which law it is.

Every backend hands this module candidate expressions (sympy, in the feature symbols); everything that
decides the answer happens here, identically for every backend:

1. ``polish``: simplify with sympy, refit every numeric constant by least squares on the data, and drop
   each constant (set it to 0, e.g. an intercept of 1e-16) whose removal leaves the error unchanged.
2. ``pareto``: keep the candidates that no simpler candidate beats, scored PySR-style:
   ``score_i = -d log(error) / d complexity`` between neighbours on the front.
3. ``choose``: the highest score among the candidates as accurate as the most accurate one: within two
   standard errors of its per-row errors (``"se"``), or, PySR's ``"best"``, within 1.5x of its error; or
   the highest score outright (``"score"``).
4. ``power_law``: is the expression exactly ``C * prod(x_i ** k_i)`` with numeric C and exponents?
   Newton's law is ``C * m1 * m2 * r**-2`` (with G = 4 pi^2 AU^3 Msun^-1 yr^-2 = 39.478 in the
   toolkit's units). The form decides, never the numerical fit.

``error`` is one of two metrics, chosen by the target (:func:`metric_for`):

- ``"log"`` for a positive target (a force magnitude): the mean absolute log error
  ``mean|ln y - ln f(x)|`` (per row about the relative error, so every row counts the same whether its
  force is 1e-12 or 1e2; a row predicted non-positive, or off by more than a factor 1e4, counts as
  ``LOG_ERROR_CAP``). Constants are refitted by least squares in log space.
- ``"relative"`` for a target with zero or negative values: the relative L1 error
  ``mean|y - f(x)| / mean|y|`` (scale free, the L1-like loss of the reference protocol), which a few rows
  of the largest magnitude dominate.

``complexity`` is the number of nodes of the sympy expression tree.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

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
    if not _finite_form(expr):
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


def _simplified(expr: sympy.Expr, values: dict) -> sympy.Expr | None:
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
        # within a process, so two identical studies came out with different constants (issue 17;
        # tests/test_discover.py::test_polishing_is_deterministic_within_a_process).
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


def _finite_form(expr: sympy.Expr) -> bool:
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
    if not _finite_form(expr):
        return Candidate(expr, complexity(expr), math.inf)
    expr = refit(expr, symbols, X, y, metric)
    err = error(y, evaluate(expr, symbols, X), metric)
    changed = True
    while changed:
        changed = False
        for c in constants(expr):
            trial = _simplified(expr, {c: sympy.Integer(0)})
            if trial is None or trial == expr or not _finite_form(trial) or trial.free_symbols.isdisjoint(symbols):
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


SNAP_NEAR = 0.05
"""A constant is tried at a simple number only when within this fraction of it (:func:`snap_units`): 0.5006 or
0.994, not 1.23, whose factor a search's other constants would have to absorb."""

SNAP_MAX_CONSTANTS = 6
"""Laws with more constants than this are not snapped (each try costs a refit; a law a physicist writes has a few)."""


def snap_units(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
               metric: str) -> sympy.Expr:
    """Set to a simple number (the nearest half-integer, or +-1) each constant the data cannot tell from it: the
    rest refitted, the error (in ``metric`` on (X, y)) no worse than :func:`polish`'s pruning allows.
    ``exp(-0.5006*x**2)`` becomes ``exp(-x**2/2)`` and ``sqrt(M + 0.994*m)`` ``sqrt(M + m)``: the law a physicist
    writes; a phase near a multiple of pi/2 (``PHASE_NEAR``) is tried there first (``cos(theta - 3.14161)`` becomes
    ``-cos(theta)``). Only constants within ``SNAP_NEAR`` of a simple number are tried, in laws of at most
    ``SNAP_MAX_CONSTANTS`` constants. A constant the rows resolve (G = 39.48, or 1.05 measured to
    0.1%) is kept. Applied to a seed's chosen law only (it refits once per constant tried)."""
    expr = one_scale(exact_fractions(expr))
    if len(constants(expr)) > SNAP_MAX_CONSTANTS:
        return expr
    err = error(y, evaluate(expr, symbols, X), metric)
    if not math.isfinite(err):
        return expr
    changed = True
    while changed:
        changed = False
        phases = _phases(expr)
        for c in constants(expr):
            for value in (_phase_values(float(c)) if c in phases else []) + _simple_values(float(c)):
                trial = _simplified(expr, {c: value})
                if trial is None or trial == expr or not _finite_form(trial):
                    continue
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a trial far off the data overflows inside scipy's cost
                    trial = refit(trial, symbols, X, y, metric)
                trial_error = error(y, evaluate(trial, symbols, X), metric)
                if trial_error <= err * 1.01 + PRUNE_TOLERANCE:
                    expr, err, changed = trial, trial_error, True
                    break
            if changed:
                break
    return exact_fractions(expr)  # a snap's simplification can write 1/2 of a float as 0.5


def proposals(exprs: list[sympy.Expr], symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
              metric: str) -> list[sympy.Expr]:
    """A screen's laws as it proposes them: each as fitted and with :func:`snap_units` applied on (X, y), the distinct
    ones (by structure) in that order."""
    out = {}
    for expr in exprs:
        for e in (expr, snap_units(expr, symbols, X, y, metric)):
            out.setdefault(sympy.srepr(e), e)
    return list(out.values())


EXACT_DENOMINATOR = 4
EXACT_RELATIVE = 1e-12
"""A constant within this relative distance of a fraction whose denominator is at most ``EXACT_DENOMINATOR`` (an
integer, a half, a third or a quarter) is that fraction (:func:`exact_fractions`): it differs only in a double's last
digits. A decimal such as 1.6 stays a decimal."""


def exact_fractions(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with each constant that is a simple fraction to a double's precision (``EXACT_RELATIVE``) written as
    that fraction: ``0.5*cos(2.0*t)`` is ``cos(2*t)/2``, ``1 - 0.333333333333333*x`` is ``1 - x/3``. The value does
    not change (so nothing is refitted); the reader, and sympy's identities, see the exact law."""
    values = {}
    for c in constants(expr):
        f = Fraction(float(c)).limit_denominator(EXACT_DENOMINATOR)
        if f and abs(float(c) - f) <= EXACT_RELATIVE * abs(float(c)):
            values[c] = sympy.Rational(f.numerator, f.denominator)
    exact = _simplified(expr, values) if values else None
    return expr if exact is None else exact


def one_scale(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with a scale its numerator and a denominator factor share divided out, so that the factor's constant
    term is +-1: ``568.3/(568.6*g - 569.1)`` is ``0.9986/(0.9991*g - 1)``, whose constants a snap can set to 1,
    where before each was "near" a half-integer of its own (568, 1137/2, 569). Only when this leaves fewer
    constants (``x/(r + 0.1)`` stays as it is); the value is unchanged."""
    num, den = sympy.fraction(expr)
    factors = sympy.Mul.make_args(den)
    for i, f in enumerate(factors):
        k = f.as_coeff_Add()[0] if f.is_Add else None
        if isinstance(k, sympy.Float) and k != 0:
            scale = abs(k)
            rest = sympy.Mul(*factors[:i], *factors[i + 1:])
            trial = (num / scale) / (rest * sympy.Add(*[t / scale for t in f.args if t != k], 1 if k > 0 else -1))
            if len(constants(trial)) < len(constants(expr)):
                return trial
    return expr


PHASE_NEAR = 0.05
"""A phase (a constant added inside a sine or cosine) is tried at the nearest multiple of pi/2 when within this many
radians of it (:func:`snap_units`): ``cos(theta - 3.14161)`` is ``-cos(theta)``."""


def _phases(expr: sympy.Expr) -> set[sympy.Float]:
    """The constants added to the argument of a sine or cosine in ``expr``."""
    return {term for f in expr.atoms(sympy.sin, sympy.cos) if f.args[0].is_Add
            for term in f.args[0].args if isinstance(term, sympy.Float)}


def _phase_values(c: float) -> list[sympy.Expr]:
    """The multiple of pi/2 a fitted phase ``c`` (radians) may stand for, within ``PHASE_NEAR``; 0 is pruning's."""
    k = round(c / (math.pi / 2))
    return [k * sympy.pi / 2] if k and abs(c - k * math.pi / 2) <= PHASE_NEAR else []


def _simple_values(c: float) -> list[sympy.Rational]:
    """The simple numbers a fitted ``c`` may stand for (the nearest half-integer, +-1), within ``SNAP_NEAR``."""
    half = sympy.Rational(round(2 * c), 2)
    unit = sympy.Integer(1 if c > 0 else -1)
    return [v for v in dict.fromkeys([half, unit])
            if v != 0 and float(v) != c and abs(c - float(v)) <= SNAP_NEAR * abs(float(v))]


def pareto(candidates: list[Candidate]) -> list[Candidate]:
    """The Pareto front (each member strictly more accurate than every simpler one), with PySR scores."""
    best: dict[str, Candidate] = {}
    for c in candidates:  # the same expression from several restarts or seeds: keep the most accurate
        key = str(c.expr)
        if math.isfinite(c.error) and (key not in best or c.error < best[key].error):
            best[key] = c
    front: list[Candidate] = []
    for c in sorted(best.values(), key=lambda c: (c.complexity, c.error, str(c.expr))):
        if not front or c.error < front[-1].error and max(c.error, ERROR_FLOOR) < max(front[-1].error, ERROR_FLOOR):
            if front and front[-1].complexity == c.complexity:
                continue
            front.append(Candidate(c.expr, c.complexity, c.error))
    for prev, c in zip(front, front[1:], strict=False):
        c.score = -(math.log(max(c.error, ERROR_FLOOR)) - math.log(max(prev.error, ERROR_FLOOR))) / (
            c.complexity - prev.complexity)
    return front


SELECTIONS = ("se", "best", "score")

SE_WINDOW = 2.0
"""``"se"`` selection: a candidate is as good as the most accurate one when its mean per-row error exceeds
the most accurate one's by at most this many standard errors of the paired per-row difference."""


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


TOLERANCE = 0.0
"""Default of ``choose(..., tolerance=)``: 0, an exact test (a departure the rows can resolve always counts)."""


def departure(pred: np.ndarray, reference: np.ndarray, metric: str) -> float:
    """How far two laws' predictions on the same rows are apart: the RMS of ``ln pred - ln reference`` (log
    metric; infinite where either is not positive and finite) or of ``(pred - reference) / mean|reference|``."""
    pred = np.broadcast_to(np.asarray(pred, dtype=np.float64), np.shape(reference))
    if not (np.all(np.isfinite(pred)) and np.all(np.isfinite(reference))):
        return math.inf
    if metric == "log":
        if not (np.all(pred > 0) and np.all(reference > 0)):
            return math.inf
        d = np.log(pred) - np.log(reference)
    else:
        d = (pred - reference) / max(float(np.mean(np.abs(reference))), ERROR_FLOOR)
    return float(np.sqrt(np.mean(d**2)))


def choose(front: list[Candidate], selection: str = "se", rows: dict[str, np.ndarray] | None = None,
           predictions: dict[str, np.ndarray] | None = None, tolerance: float = TOLERANCE,
           metric: str = "log") -> Candidate:
    """The reported model: the highest score among a pool of candidates as accurate as the most accurate one.

    - ``"se"``: the pool holds the candidates whose mean error is within ``SE_WINDOW`` standard errors of
      the paired per-row differences from the most accurate one's (``rows``: per-row errors by
      ``str(expr)``, on the rows the errors were measured on); a difference the rows cannot resolve does
      not count, a real one always does, whatever the noise floor common to all candidates;
    - ``"best"`` (PySR's): the pool holds the candidates within 1.5x of the lowest error;
    - ``"score"``: the pool is the whole front.

    With ``tolerance`` > 0 (``"se"`` only) the simplest candidate whose predictions (``predictions``, by
    ``str(expr)``, on the same rows) depart from the chosen one's by at most ``tolerance`` (:func:`departure`
    in ``metric``: 0.01 is 1% RMS) replaces it: a law is not told apart from a simpler one that it differs
    from by less than that, however well the rows resolve the difference.
    """
    if not front:
        raise ValueError("the symbolic regression found no finite expression")
    if selection not in SELECTIONS:
        raise ValueError(f"unknown model selection {selection!r}: use {', '.join(SELECTIONS)}")
    if tolerance and (selection != "se" or predictions is None):
        raise ValueError("a tolerance needs selection 'se' and the candidates' predictions")
    pool = front
    if selection == "best":
        floor = max(min(c.error for c in front), ERROR_FLOOR)
        pool = [c for c in front if max(c.error, ERROR_FLOOR) <= 1.5 * floor]
    elif selection == "se":
        if rows is None:
            raise ValueError("selection 'se' needs the candidates' per-row errors")
        top = rows[str(min(front, key=lambda c: (c.error, c.complexity)).expr)]

        def close(c):
            d = rows[str(c.expr)] - top
            if not np.all(np.isfinite(d)):
                return False
            se = float(np.std(d, ddof=1)) / math.sqrt(len(d)) if len(d) > 1 else 0.0
            return float(np.mean(d)) <= SE_WINDOW * se + ERROR_FLOOR
        pool = [c for c in front if close(c)]
    if len(front) == 1:
        return front[0]
    chosen = max(pool, key=lambda c: (c.score, -c.complexity))
    if tolerance:
        near = [c for c in front if c.complexity < chosen.complexity
                and departure(predictions[str(c.expr)], predictions[str(chosen.expr)], metric) <= tolerance]
        chosen = min(near, key=lambda c: (c.complexity, c.error), default=chosen)
    return chosen


def power_law(expr: sympy.Expr, names: list[str]) -> dict | None:
    """``{"constant": C, "exponents": {name: k}}`` when ``expr`` is exactly C * prod(x ** k), else None.

    Every name of ``names`` gets an exponent (0 when absent); C and the exponents must be plain numbers.
    """
    expr = sympy.expand_power_base(expr, force=True)  # (m1*m2)**1.5 -> m1**1.5 * m2**1.5
    if expr.has(sympy.Pow):  # sqrt(a**3/M) -> sqrt(a**3) / sqrt(M) -> a**(3/2) * M**(-1/2)
        expr = sympy.powdenest(expr, force=True)
    if expr.is_Add:
        return None
    coeff = sympy.Integer(1)
    exponents = {name: 0.0 for name in names}
    for base, exp in expr.as_powers_dict().items():
        if base.is_number and exp.is_number:
            coeff *= base**exp
            continue
        if not (base.is_Symbol and base.name in exponents and exp.is_number and exp.is_real):
            return None
        exponents[base.name] += float(exp)
    if not coeff.is_number or coeff == 0:
        return None
    coeff = complex(coeff)
    if coeff.imag != 0:
        return None
    exponents = {k: (int(round(v)) if abs(v - round(v)) < 1e-9 else v) for k, v in exponents.items()}
    return {"constant": coeff.real, "exponents": exponents}


def form(expr: sympy.Expr, names: list[str]) -> str:
    """A key that is equal for two expressions of the same form: exponents for power laws, else the tree
    with its numeric constants blanked."""
    law = power_law(expr, names)
    if law is not None:  # a fitted real exponent (r**-2.049) votes as "real": seeds refit it each to its own digits
        real = {b.name for b, e in sympy.expand_power_base(expr, force=True).as_powers_dict().items()
                if b.is_Symbol and e.is_Float and not float(e).is_integer()}
        return "power_law:" + ",".join(f"{k}^{'real' if k in real else v}" for k, v in sorted(law["exponents"].items()))
    return sympy.srepr(expr.xreplace({f: sympy.Symbol("C") for f in expr.atoms(sympy.Float)}))


def readable(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` as a physicist writes it: the factors raised to fractions of one denominator q share one root,
    ``a**(3/2) * M**(-1/2)`` -> ``sqrt(a**3/M)`` (the same function for positive variables; :func:`power_law`
    reads both). Applied to what is shown, never to what is searched, refitted or sized."""
    def regroup(mul):
        roots: dict[int, list] = {}
        rest = []
        for factor in mul.args:
            base, exp = factor.as_base_exp()
            if base.is_Symbol and exp.is_Rational and exp.q > 1:
                roots.setdefault(exp.q, []).append(base**exp.p)
            else:
                rest.append(factor)
        if all(len(group) == 1 for group in roots.values()):
            return mul  # no two factors share a root
        return sympy.Mul(*rest, *(sympy.Mul(*group) ** sympy.Rational(1, q) for q, group in sorted(roots.items())))
    return expr.replace(lambda e: e.is_Mul, regroup)
