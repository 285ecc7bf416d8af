"""One seed of the symbolic regression: the orbitlaw protocol's :func:`fit_seed` (search, polish, choose on
held-out rows) and the reference's :func:`fit_galaxy` (best restart by score); see
:mod:`orbitlaw.discovery.sr.symbolic` for how the seeds are combined."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import sympy

from orbitlaw.discovery.sr import binomial, choice, exponential, logarithm, outliers, powerlaw, snapping
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr import verdict as verdicts
from orbitlaw.discovery.sr.backends import SearchSettings, placeholders, prepare, search
from orbitlaw.discovery.sr.units import Analysis

PLAIN_SEARCHES = 1
"""Searches of the raw target that a seed adds to its ``restarts`` searches of the departure from the screen's
power law (:func:`fit_seed`)."""


def split_rows(n: int, points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ``seed``'s disjoint search and held-out rows (sorted indices): ``min(points, n // 2)`` held out,
    ``min(points, n - held out)`` for the search."""
    order = np.random.default_rng(seed).permutation(n)
    held = min(points, n // 2)
    used = min(points, n - held)
    return np.sort(order[:used]), np.sort(order[used:used + held])


def fit_seed(X: np.ndarray, y: np.ndarray, seed: int, backend: str, points: int, restarts: int,
             selection: str, settings: SearchSettings, metric: str = "log", tolerance: float = 0.0,
             dims: Analysis | None = None) -> dict:
    """One seed: search on its search rows, polish there, choose on its held-out rows (module doc); with ``dims``
    (:mod:`orbitlaw.discovery.sr.units`), the search is of y / prefactor over the dimensionless groups."""
    prepare(backend)
    start, cpu = time.perf_counter(), time.process_time()
    rows, held = split_rows(len(y), points, seed)
    Xs, ys, Xh, yh = X[rows], y[rows], X[held], y[held]
    symbols = placeholders(X.shape[1])
    if dims is None:
        found, clean = candidates(Xs, ys, seed, backend, restarts, settings, metric)
    else:  # search g(groups) = y / prefactor, each candidate lifted back to prefactor * g (units.Analysis)
        Zs, ts = dims.reduce(Xs, ys)
        group_symbols = placeholders(Zs.shape[1])
        sign = -1 if np.mean(ts < 0) > 0.5 else 1  # a law negative on most rows (a binding energy): screens fit -y
        found, clean = candidates(Zs, sign * ts, seed, backend, restarts, settings, metric, forms=True)
        found = [dims.lift(sign * g, group_symbols, symbols) for g in found]
    # Polishing (simplify, refit, prune) costs ~10-50 ms an expression: only the raw fronts get it, the
    # front in the metric and the front in relative L1 (the search's own scale: a raw expression whose
    # constants only polishing makes sensible in log space is kept by the second).
    unique = list({sympy.srepr(e): e for e in found}.values())
    predictions = [laws.evaluate(e, symbols, Xs) for e in unique]
    keep = {}
    for m in dict.fromkeys([metric, "relative"]):
        raw = [laws.Candidate(e, laws.complexity(e), laws.error(ys, p, m)) for e, p in zip(unique, predictions,
                                                                                             strict=True)]
        keep.update({sympy.srepr(c.expr): c.expr for c in choice.pareto(raw)})
    polished = [laws.polish(e, symbols, Xs, ys, metric) for e in keep.values()]
    # The best constant roots every front, as in PySR (whose fronts start at size 1): without it the simplest
    # law on a front scores 0 and any more complex one that is better by a hair (noise) outscores it.
    polished.append(laws.Candidate(verdicts.best_constant(ys, metric), 1, math.nan))
    held_pred = {str(c.expr): laws.evaluate(c.expr, symbols, Xh) for c in polished}
    per_row = {key: laws.row_errors(yh, pred, metric) for key, pred in held_pred.items()}
    held_out = [laws.Candidate(c.expr, c.complexity, float(np.mean(per_row[str(c.expr)]))) for c in polished]
    front = choice.pareto(held_out)
    chosen = choice.choose(front, selection, per_row, held_pred, tolerance, metric)
    exact = choice.choose(front, selection, per_row, held_pred, 0.0, metric) if tolerance else chosen
    both = np.concatenate([rows, held])

    def settled(law: sympy.Expr) -> sympy.Expr:  # simple constants snapped, a power law's constant refitted
        return robust_constant(snapping.snap_units(law, symbols, X[both], y[both], metric), symbols, X[both], y[both],
                               metric)
    expr = settled(chosen.expr)
    exact_expr = expr if exact is chosen else settled(exact.expr)
    return {"seed": seed, "expression": str(expr), "exact_expression": str(exact_expr), "exact_error": exact.error,
            "error": chosen.error, "complexity": chosen.complexity,
            "search_rows": len(rows), "gross_errors_left_out": int(np.sum(~clean)), "holdout_rows": len(held),
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu, "pareto": [c.to_dict() for c in front]}


def candidates(X: np.ndarray, y: np.ndarray, seed: int, backend: str, restarts: int, settings: SearchSettings,
               metric: str, forms: bool = False) -> tuple[list[sympy.Expr], np.ndarray]:
    """The raw candidates of one seed over the placeholders of X's columns: the power-law screen's, ``restarts``
    searches of the departure from its best power law (or of the target when that is not positive), and
    :data:`PLAIN_SEARCHES` of the raw target (with ``forms``, the power-law screen runs on the rows where y > 0, and
    the binomial and exponential screens, :mod:`orbitlaw.discovery.sr.binomial` and
    :mod:`orbitlaw.discovery.sr.exponential`, on those rows too, and the logarithmic one,
    :mod:`orbitlaw.discovery.sr.logarithm`, on every row); and which rows the searches used (not gross errors).
    X (rows, k) with k = 0 (a dimensional analysis left no group): the best constant alone."""
    if X.shape[1] == 0:
        return [verdicts.best_constant(y, metric if np.all(y > 0) else "relative")], np.ones(len(y), bool)
    symbols = placeholders(X.shape[1])
    if forms:  # a few rows the noise made <= 0 leave the screens on (fitted on the others, polished on all)
        positive = binomial.positive_rows(y)
        found = (powerlaw.screen_candidates(X[positive], y[positive], symbols)
                 if positive.mean() >= binomial.MIN_POSITIVE else [])
        found += (binomial.screen_candidates(X, y, symbols) + logarithm.screen_candidates(X, y, symbols)
                  + exponential.screen_candidates(X, y, symbols))
    else:
        found = powerlaw.screen_candidates(X, y, symbols)  # integer, fractional and real exponents
    base = powerlaw.screen(X, y, symbols)
    clean = ~outliers.gross_errors(X, y)  # the search alone leaves gross errors out (see outliers)
    with np.errstate(all="ignore"):
        ratio = None if base is None else y / laws.evaluate(base, symbols, X)
    if ratio is None or not np.all(np.isfinite(ratio)):  # a target or feature <= 0: search the raw target
        for restart in range(restarts):
            found += search(backend, X[clean], y[clean], seed=seed * 1000 + restart, settings=settings)
    else:  # search the departure g = y / base from the best power law; candidates are base * g
        residual = dataclasses.replace(settings, maxsize=max(3, settings.maxsize - laws.complexity(base) + 1))
        for restart in range(restarts):
            found += [base * g for g in search(backend, X[clean], ratio[clean], seed=seed * 1000 + restart,
                                               settings=residual)]
        # ... and the raw target too, so that a law the power law does not explain (exp(-x**2/2), a sum under a
        # root) competes on equal terms: the departure from a wrong power law is harder to search than the law.
        for restart in range(PLAIN_SEARCHES):
            found += search(backend, X[clean], y[clean], seed=seed * 1000 + restarts + restart, settings=settings)
    return found, clean


def robust_constant(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
                     metric: str) -> sympy.Expr:
    """A power law's constant refitted by :func:`powerlaw.fit_constant` on (X, y); other forms unchanged."""
    names = [str(s) for s in symbols]
    power = choice.power_law(expr, names)
    if power is None:
        return expr
    exponents = [_exponent(expr, s, power["exponents"][n]) for s, n in zip(symbols, names, strict=True)]
    c = powerlaw.fit_constant(X, y, [float(k) for k in exponents], metric)
    return expr if c is None or c == 0 else powerlaw.expression(c, exponents, symbols)


def _exponent(expr: sympy.Expr, symbol: sympy.Symbol, value: float):
    """The exponent of ``symbol`` in the power law ``expr``: exact when it is a fraction (3/2), else ``value``
    (real exponents rounded to :data:`powerlaw.FREE_DECIMALS` decimals, as the screen proposes them)."""
    exp = sympy.expand_power_base(expr, force=True).as_powers_dict().get(symbol)
    if exp is not None and exp.is_Rational:
        return exp
    for q in (2, 3):  # a half or a third the search wrote as a float (0.5) is the same fraction
        if abs(float(value) * q - round(float(value) * q)) < 1e-9:
            return sympy.Rational(round(float(value) * q), q)
    return value if float(value).is_integer() else round(float(value), powerlaw.FREE_DECIMALS)


PROTOCOLS = ("orbitlaw", "reference")


def fit_galaxy(X: np.ndarray, y: np.ndarray, seed: int, backend: str, points: int, restarts: int,
               settings: SearchSettings) -> dict:
    """One reference "galaxy": ``points`` random rows, ``restarts`` searches, each restart's own model chosen
    by the PySR score on its own front; the galaxy keeps the restart with the highest score.

    With PySR the front is PySR's own (``equations_``: its constants, fitted to the epsilon-insensitive
    loss). Operon's fronts are polished first (simplified, constants refitted by least squares, unsupported
    constants dropped), since Operon tunes its constants for its own objective with linear scaling.
    """
    prepare(backend)
    start, cpu = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(y), size=min(points, len(y)), replace=False))
    Xs, ys = X[rows], y[rows]
    symbols = placeholders(X.shape[1])
    per_restart = []
    for restart in range(restarts):
        found = list({sympy.srepr(e): e for e in search(backend, Xs, ys, seed=seed * 1000 + restart,
                                                           settings=settings)}.values())
        if backend == "operon":
            cands = [laws.polish(e, symbols, Xs, ys, "relative") for e in found]
        else:
            cands = [laws.Candidate(e, laws.complexity(e), laws.relative_l1(ys, laws.evaluate(e, symbols, Xs)))
                     for e in found]
        front = choice.pareto(cands)
        per_restart.append((choice.choose(front, "score"), front))
    best = best_restart([c for c, _ in per_restart])
    chosen, front = per_restart[best]
    return {"seed": seed, "expression": str(chosen.expr), "error": chosen.error, "complexity": chosen.complexity,
            "score": chosen.score, "restart": best, "search_rows": len(rows), "holdout_rows": 0,
            "restarts": [{"expression": str(c.expr), "score": c.score, "error": c.error} for c, _ in per_restart],
            "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "pareto": [c.to_dict() for c in front]}


def best_restart(chosen: list[laws.Candidate]) -> int:
    """Index of the restart whose chosen model has the highest score (ties: lower error, then earlier)."""
    return max(range(len(chosen)), key=lambda i: (chosen[i].score, -chosen[i].error, -i))


def fit_seed_task(args) -> dict:
    protocol, *rest = args
    if protocol == "reference":
        X, y, seed, backend, points, restarts, _, settings, *_ = rest
        return fit_galaxy(X, y, seed, backend, points, restarts, settings)
    return fit_seed(*rest)


