"""SRBench's symbolic-solution criterion (La Cava et al. 2021), as :mod:`srbench` applies it to each fit: the
floats rounded as SRBench rounds them, then ``true - model`` zero or a constant, or ``model / true`` a constant;
with the numerical screen that spares sympy the fits no rounding can save, and the test rows' R^2."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time

import numpy as np
import sympy

PI_VALUE = sympy.Float("3.1415926535")  # SRBench writes pi so in both expressions
CHECK_TIMEOUT = 15.0


class CheckTimeout(BaseException):
    """The symbolic check ran out of time (a BaseException, so that no ``except Exception`` in sympy eats it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`CheckTimeout` in the block after ``seconds`` (and every 0.5 s after, in case a handler
    swallowed the first). Only in the main thread of a POSIX process; elsewhere, or for None/0, no limit."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CheckTimeout(f"symbolic check over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def srbench_round(expr: sympy.Expr) -> sympy.Expr:
    """SRBench's ``round_floats``: every float below 1e-4 in size becomes 0, every other one is rounded to 3
    decimals and kept at 3 significant digits (``Float(round(a, 3), 3)``); integers and rationals stay."""
    return expr.xreplace({a: sympy.Integer(0) if abs(a) < 1e-4 else sympy.Float(round(a, 3), 3)
                          for a in expr.atoms(sympy.Float)})


def assess(true_expr: sympy.Expr, model_expr: sympy.Expr, timeout: float | None = CHECK_TIMEOUT) -> dict:
    """SRBench's symbolic check of ``model_expr`` against ``true_expr`` (both over the same symbols).

    As SRBench does it: pi is 3.1415926535 in both; the true expression's floats are rounded
    (:func:`srbench_round`); the model's are rounded and the model simplified (``simplify(ratio=1)``); then
    ``diff = round(true - model)`` and ``frac = round(model / true)``, ``diff`` simplified (and rounded again)
    when it is not already a constant or when ``frac`` is; the flags are ``diff`` printing as 0, ``diff`` a
    constant and ``frac`` a constant (sympy's ``is_constant``). Solved: any flag, and the simplified model neither
    0 nor nan. The R^2 > 0.5 precondition is the caller's (it needs data).

    Returns {"solved", "error_is_zero", "error_is_constant", "fraction_is_constant", "simplified_model",
    "timed_out", "seconds"}; a check that runs past ``timeout`` s is not solved and has ``timed_out`` true.
    """
    out = {"solved": False, "error_is_zero": False, "error_is_constant": False, "fraction_is_constant": False,
           "simplified_model": None, "timed_out": False}
    start = time.perf_counter()
    try:
        with time_limit(timeout):
            true = srbench_round(true_expr.subs(sympy.pi, PI_VALUE))
            model = sympy.simplify(srbench_round(model_expr.subs(sympy.pi, PI_VALUE)), ratio=1)
            out["simplified_model"] = str(model)
            diff, frac = srbench_round(true - model), srbench_round(model / true)
            if not diff.is_constant() or frac.is_constant():
                diff = srbench_round(sympy.simplify(diff, ratio=1))
            out["error_is_zero"] = str(diff) == "0"
            out["error_is_constant"] = bool(diff.is_constant())
            out["fraction_is_constant"] = bool(frac.is_constant())
    except CheckTimeout:
        out["timed_out"] = True
    flags = out["error_is_zero"] or out["error_is_constant"] or out["fraction_is_constant"]
    out["solved"] = bool(flags and not out["timed_out"] and out["simplified_model"] not in (None, "0", "nan"))
    out["seconds"] = time.perf_counter() - start
    return out


def symbolic_solution(true_expr: sympy.Expr, model_expr: sympy.Expr, timeout: float | None = CHECK_TIMEOUT) -> bool:
    """Whether ``model_expr`` is a symbolic solution of ``true_expr`` by SRBench's definition (La Cava et al.
    2021): after SRBench's rounding of floats, ``true - model`` is 0 or a constant, or ``model / true`` is a
    constant (see :func:`assess`). A check that runs past ``timeout`` seconds is False."""
    return assess(true_expr, model_expr, timeout)["solved"]


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        ss_res, ss_tot = float(np.sum((y - pred) ** 2)), float(np.sum((y - np.mean(y)) ** 2))
    value = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else -math.inf)
    return value if math.isfinite(value) else -math.inf


NUMERIC_FAR = 0.2
""":func:`numerically_far`'s threshold on the spread of model / true and of true - model over the test rows."""


def numerically_far(true_y: np.ndarray, pred: np.ndarray) -> bool:
    """A necessary condition of SRBench's criterion, checked on the noiseless test rows before the (slow, up to
    ``--check-timeout``) sympy check: a symbolic solution has model / true or true - model constant, up to the
    rounding of its floats to 3 significant digits (a fraction of a percent; a few percent inside an exp). When
    the ratio's spread (std / |mean|) and the difference's (std / RMS of true) both exceed ``NUMERIC_FAR`` (20%),
    the model is no solution and sympy is not asked."""
    with np.errstate(all="ignore"):
        ratio, diff = pred / true_y, true_y - pred
        ratio_spread = float(np.std(ratio) / abs(np.mean(ratio)))
        diff_spread = float(np.std(diff) / np.sqrt(np.mean(true_y**2)))
    near = [v for v in (ratio_spread, diff_spread) if math.isfinite(v)]
    return bool(near) and min(near) > NUMERIC_FAR
