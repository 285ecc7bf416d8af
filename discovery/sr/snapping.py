"""Constants set to the simple numbers the data cannot tell them from: the law a physicist writes.

:func:`snap_units` turns ``exp(-0.5006*x**2)`` into ``exp(-x**2/2)`` and ``cos(theta - 3.14161)`` into
``-cos(theta)``, refitting the rest and keeping the error within what :func:`orbitlaw.discovery.sr.law.polish`'s
pruning allows; :func:`exact_fractions` writes a double that is a simple fraction as that fraction, and
:func:`one_scale` divides out a scale a numerator and denominator share. A constant the rows resolve (G = 39.48)
is kept.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import sympy

from orbitlaw.discovery.sr.law import PRUNE_TOLERANCE, constants, error, evaluate, finite_form, refit, simplified

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
                trial = simplified(expr, {c: value})
                if trial is None or trial == expr or not finite_form(trial):
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
    exact = simplified(expr, values) if values else None
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
