"""Symbolic-regression backends behind one interface: ``search(X, y, seed, settings) -> [sympy.Expr]``.

Each backend runs one multi-objective search (error vs size) and returns the expressions of its final
Pareto front in the placeholder symbols ``x0, x1, ...`` (column i of X). Choosing, simplifying and
judging them is backend independent (:mod:`orbitlaw.discovery.sr.law`).

Operator set (``SearchSettings.operators``): by default binary ``+`` and ``*``, unary ``sin``, ``cos``, ``exp``,
the inverse and the square root (``sqrt``: roots and half powers are what physicists write, Kepler's third law
``P = sqrt(a**3/(M + m))`` among them); the reference protocol's set (:data:`REFERENCE_OPERATORS`) is the same
without ``sqrt``. Operon expresses the inverse as division, PySR as ``inv(x) = 1/x``. Size limit ``maxsize``
nodes (20 by default).

Loss (``SearchSettings.loss``): ``"r2"`` (default; Operon maximises R^2, PySR minimises L1 as before) or
``"epsilon-l1"`` (the reference's ``max(1e-8, |y - f|) - 1e-8``: PySR's ``EpsilonInsLoss(1e-8)``).
Operon's closest objective is the mean absolute error (no 1e-8 dead zone), and Operon still fits each
model's linear scaling (slope and intercept) and tunes its constants by Levenberg-Marquardt least squares;
only the objective that ranks the models is L1.

- ``operon`` (default, offline): NSGA-II over (R^2, length) with Levenberg-Marquardt constant tuning
  and linear scaling, a fixed evaluation budget (so a seed gives the same front on every machine).
- ``pysr`` (optional extra ``orbitlaw[pysr]``, needs Julia): imported only when chosen.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import sympy

from orbitlaw.validate import at_most

BACKENDS = ("operon", "pysr")

OPERATORS = ("add", "mul", "div", "sin", "cos", "exp", "sqrt")
"""The default operators (Operon's names; ``div`` is the inverse, ``sqrt`` the square root)."""

REFERENCE_OPERATORS = ("add", "mul", "div", "sin", "cos", "exp")
"""The reference protocol's operators: ``+``, ``*``, ``sin``, ``cos``, ``exp``, inverse (docs/protocol.md, "The
force probe and its symbolic regression")."""

_PYSR_UNARY = {"sin": "sin", "cos": "cos", "exp": "exp", "sqrt": "sqrt", "div": "inv(x) = 1/x"}


MAX_SIZES = {"budget": (10**8, "a search of 1e8 evaluations takes hours; the study's take 30,000"),
             "maxsize": (200, "nodes of an expression"), "population": (10**6, "expressions"),
             "niterations": (10**6, "PySR iterations"), "local_iterations": (1000, "steps per model")}
"""Upper bounds on a search's sizes, far above any study's (budget 30,000, maxsize 20)."""


@dataclass(frozen=True)
class SearchSettings:
    """Settings of one search; recorded in LAW.json. ``budget`` is Operon's evaluation budget,
    ``niterations`` PySR's."""

    maxsize: int = 20  # largest expression, in nodes
    population: int = 200  # Operon's population
    budget: int = 30_000  # Operon's evaluations per search
    local_iterations: int = 5  # Levenberg-Marquardt steps per model
    niterations: int = 100  # PySR's iterations
    loss: str = "r2"  # LOSSES: r2 or epsilon-l1
    operators: tuple[str, ...] = OPERATORS  # a subset of OPERATORS; add and mul always

    def to_dict(self) -> dict:
        return {**asdict(self), "operators": list(self.operators)}

    def validate(self) -> None:
        """ValueError (one line) for an unknown loss or operator, or a size past :data:`MAX_SIZES`."""
        for name, (maximum, why) in MAX_SIZES.items():
            at_most(self, maximum, name, why=why)
        if self.loss not in LOSSES:
            raise ValueError(f"unknown search loss {self.loss!r}: use {' or '.join(LOSSES)}")
        unknown = [o for o in self.operators if o not in OPERATORS]
        if unknown or not {"add", "mul"} <= set(self.operators):
            raise ValueError(f"search operators must be add, mul and any of {', '.join(OPERATORS[2:])}; "
                             f"got {', '.join(self.operators)}")


def placeholders(n: int) -> list[sympy.Symbol]:
    return list(sympy.symbols(f"x0:{n}"))


def prepare(backend: str) -> None:
    """Import the backend now (Operon pulls in scikit-learn: ~2 s) so that timings measure the search."""
    if backend == "operon":
        import pyoperon.sklearn  # noqa: F401


LOSSES = ("r2", "epsilon-l1")


def search(backend: str, X: np.ndarray, y: np.ndarray, seed: int, settings: SearchSettings) -> list[sympy.Expr]:
    """Pareto-front expressions of one search on X (n, d), y (n,), in the symbols ``x0..x{d-1}``."""
    settings.validate()
    if backend == "operon":
        return _operon(X, y, seed, settings)
    if backend == "pysr":
        return _pysr(X, y, seed, settings)
    raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")


def _operon(X, y, seed, s: SearchSettings) -> list[sympy.Expr]:
    from pyoperon.sklearn import SymbolicRegressor

    reg = SymbolicRegressor(
        allowed_symbols=",".join([*s.operators, "constant", "variable"]),
        objectives=["mae" if s.loss == "epsilon-l1" else "r2", "length"], max_length=s.maxsize,
        population_size=s.population,
        generations=10**6, max_evaluations=s.budget, optimizer_iterations=s.local_iterations,
        random_state=seed, n_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "uncertainty left at default": we do not use the MDL criterion
        reg.fit(X, y)
    names = [str(x) for x in placeholders(X.shape[1])]
    symbols = {n: sympy.Symbol(n) for n in names}
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Model contains no variables": a constant is a valid front member
        for member in reg.pareto_front_:
            text = reg.get_model_string(member["tree"], precision=17, names=names)
            out.append(sympy.sympify(text, locals=symbols))
    return out


def julia_available() -> bool:
    """Whether PySR can start without downloading Julia (``julia`` on PATH or PYTHON_JULIACALL_EXE set)."""
    return bool(shutil.which("julia") or os.environ.get("PYTHON_JULIACALL_EXE"))


def check_available(backend: str) -> None:
    """Raise ValueError (one line) when ``backend`` is unknown or cannot run on this machine."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "pysr":
        if importlib.util.find_spec("pysr") is None:
            raise ValueError("the pysr backend needs PySR: pip install 'orbitlaw[pysr]' (or use --backend operon)")
        if not julia_available():
            raise ValueError("the pysr backend needs Julia, which was not found (install it, e.g. with juliaup, and "
                             "put `julia` on PATH or set PYTHON_JULIACALL_EXE; or use --backend operon)")


def _pysr(X, y, seed, s: SearchSettings) -> list[sympy.Expr]:
    check_available("pysr")
    from pysr import PySRRegressor

    names = [str(x) for x in placeholders(X.shape[1])]
    model = PySRRegressor(
        niterations=s.niterations, binary_operators=["+", "*"],
        unary_operators=[_PYSR_UNARY[o] for o in s.operators if o in _PYSR_UNARY],
        extra_sympy_mappings={"inv": lambda x: 1 / x}, maxsize=s.maxsize,
        elementwise_loss="EpsilonInsLoss(1e-8)" if s.loss == "epsilon-l1" else "L1DistLoss()",
        model_selection="score", random_state=seed, deterministic=True,
        parallelism="serial", progress=False, verbosity=0, temp_equation_file=True)
    model.fit(X, y, variable_names=names)
    symbols = {n: sympy.Symbol(n) for n in names}
    return [sympy.sympify(e, locals=symbols) if isinstance(e, str) else e.xreplace(
        {sym: symbols[sym.name] for sym in e.free_symbols if sym.name in symbols})
        for e in model.equations_["sympy_format"]]
