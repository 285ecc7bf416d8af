"""Which law: the Pareto front of a search, the law chosen from it, how far two laws are apart, and its form.

1. :func:`pareto`: keep the candidates that no simpler candidate beats, scored PySR-style:
   ``score_i = -d log(error) / d complexity`` between neighbours on the front.
2. :func:`choose`: the highest score among the candidates as accurate as the most accurate one: within two
   standard errors of its per-row errors (``"se"``), or, PySR's ``"best"``, within 1.5x of its error; or
   the highest score outright (``"score"``).
3. :func:`power_law` and :func:`form`: is the expression exactly ``C * prod(x_i ** k_i)`` with numeric C and
   exponents? Newton's law is ``C * m1 * m2 * r**-2`` (G = 4 pi^2 AU^3 Msun^-1 yr^-2 = 39.478 in the toolkit's
   units). The form decides, never the numerical fit. :func:`departure` is how far two laws' predictions are
   apart on the same rows; :func:`readable` is how a law is shown.
"""

from __future__ import annotations

import math

import numpy as np
import sympy

from orbitlaw.discovery.sr.law import ERROR_FLOOR, Candidate


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
