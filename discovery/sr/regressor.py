"""A scikit-learn face over :func:`~orbitlaw.discovery.sr.symbolic.discover_law`: :class:`LawRegressor` and the
:class:`Law` it finds.

``LawRegressor(seeds=5).fit(X, y)`` runs the same symbolic regression as ``orbitlaw discover`` (the same
:class:`~orbitlaw.discovery.sr.symbolic.DiscoverConfig`, the same rule), on the columns of ``X`` (a DataFrame,
or an array with ``feature_names``) against ``y``; ``predict``, ``sympy``, ``latex``, ``verdict_`` and
``pareto_`` then read the law it chose, as PySR's ``PySRRegressor`` does::

    from orbitlaw import LawRegressor
    model = LawRegressor(quantity="acceleration").fit(table[["r", "m1", "m2"]], table["a_pred"])
    model.verdict_, model.sympy(), model.predict(table[["r", "m1", "m2"]])

:class:`Law` wraps a LAW.json dictionary (what ``discover`` writes and :func:`discover_law` returns) with the
same readings, so a law found by the command line reads the same: ``Law.read("LAW.json").sympy()``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import sympy
from sklearn.base import BaseEstimator, RegressorMixin

from orbitlaw.discovery.sr import expression_text
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr.backends import SearchSettings
from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law
from orbitlaw.errors import first_line

PARETO_COLUMNS = ("complexity", "expression")


@dataclasses.dataclass(frozen=True)
class Law:
    """A law and its verdict: ``record`` is the LAW.json dictionary (:func:`discover_law`'s keys)."""

    record: dict

    @classmethod
    def read(cls, path: str | Path) -> Law:
        """The law in a LAW.json file; a one-line ValueError for a file that is not one."""
        path = Path(path)
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read {path} as LAW.json: {first_line(exc)}") from None
        if not isinstance(record, dict) or not {"expression", "verdict", "data"} <= set(record):
            raise ValueError(f"{path} is not a LAW.json (no expression, verdict and data)")
        return cls(record)

    @property
    def features(self) -> list[str]:
        """The feature columns, in the order :meth:`predict` reads them (e.g. r in AU, m1 and m2 in Msun)."""
        return list(self.record["data"]["features"])

    @property
    def expression(self) -> str:
        """The law as sympy prints it, over the feature names (e.g. ``39.48*m1*m2/r**2``)."""
        return self.record["expression"]

    @property
    def verdict(self) -> str:
        """The verdict (:data:`orbitlaw.discovery.sr.verdict.VERDICTS`), e.g. ``newtonian`` or ``power-law``."""
        return self.record["verdict"]

    @property
    def newtonian(self) -> bool:
        """Whether the verdict is ``newtonian``."""
        return bool(self.record["newtonian"])

    @property
    def departure(self) -> float | None:
        """How far the rows lie from Newton's form: the RMS of ln(law / Newton's) of the exact (complexity-capped)
        law over the rows, a fraction (0.012: 1.2%); None where no law was compared."""
        return self.record.get("newton_departure_exact")

    @property
    def departure_ci95(self) -> list[float] | None:
        """The 95% interval of :attr:`departure` (bootstrap over systems where the rows name them)."""
        return self.record.get("newton_departure_exact_ci95")

    @property
    def resolution(self) -> float | None:
        """The finest departure the rows can tell apart (RMS of ln, a fraction): a departure below it is no
        evidence either way."""
        return (self.record.get("resolution") or {}).get("rms_ln")

    def sympy(self) -> sympy.Expr:
        """The law as a sympy expression over the feature names; read without evaluating text
        (:mod:`orbitlaw.discovery.sr.expression_text`)."""
        return expression_text.parse(self.expression, {f: sympy.Symbol(f) for f in self.features})

    def latex(self) -> str:
        """The law in LaTeX."""
        return self.record.get("expression_latex") or sympy.latex(self.sympy())

    def predict(self, X) -> np.ndarray:
        """The law's values on ``X``: a DataFrame or mapping with the feature columns, or an array (n, d) whose
        columns are the features in :attr:`features`' order. Shape (n,), the target's units."""
        values, _ = _columns(X, self.features, "predict")
        return np.array(laws.evaluate(self.sympy(), [sympy.Symbol(f) for f in self.features], values))

    @property
    def pareto(self):
        """The chosen seed's Pareto front as a DataFrame: one row per candidate, from the simplest, with its
        ``complexity``, ``expression`` and the errors it was chosen by."""
        import pandas as pd

        rows = self.record.get("pareto") or []
        columns = [*PARETO_COLUMNS, *sorted({k for r in rows for k in r} - set(PARETO_COLUMNS))]
        return pd.DataFrame(rows, columns=columns).sort_values("complexity", kind="stable").reset_index(drop=True)

    def to_dict(self) -> dict:
        """The LAW.json dictionary."""
        return self.record

    def __repr__(self) -> str:
        return f"Law({self.expression!r}, verdict={self.verdict!r})"


def _columns(X, features: list[str] | None, what: str) -> tuple[np.ndarray, list[str]]:
    """(n, d) float array and its column names from a DataFrame, a mapping of columns or an array."""
    if hasattr(X, "keys") and not isinstance(X, np.ndarray):
        names = [str(k) for k in X.keys()] if features is None else list(features)
        missing = [n for n in names if n not in X.keys()]
        if missing:
            raise ValueError(f"{what}: no column {missing[0]!r} (it has {', '.join(map(str, X.keys()))})")
        return np.column_stack([np.asarray(X[n], dtype=np.float64) for n in names]), names
    array = np.asarray(X, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{what}: expected a table of shape (rows, features), got shape {array.shape}")
    names = list(features) if features is not None else [f"x{i}" for i in range(array.shape[1])]
    if len(names) != array.shape[1]:
        raise ValueError(f"{what}: {array.shape[1]} columns but {len(names)} feature names ({', '.join(names)})")
    return array, names


def search_settings(budget: int | None = None, maxsize: int | None = None) -> SearchSettings:
    """Each search's settings from ``discover``'s ``--budget`` and ``--maxsize`` (None: the default)."""
    return SearchSettings(**{k: v for k, v in (("budget", budget), ("maxsize", maxsize)) if v is not None})


class LawRegressor(RegressorMixin, BaseEstimator):
    """Symbolic regression of a law with a verdict, as a scikit-learn regressor.

    The parameters are :class:`~orbitlaw.discovery.sr.symbolic.DiscoverConfig`'s, with the same defaults and the
    same rule (``tolerance=None``: the protocol's precision, the study's): ``seeds`` independent fits from
    ``first_seed``, each on ``points`` rows and as many held out, best of ``restarts`` searches of ``budget``
    evaluations and expressions up to ``maxsize``; ``quantity`` (``"force"`` or ``"acceleration"``) decides
    Newton's form; ``workers`` fits seeds side by side (never changes the result).

    After :meth:`fit`: ``law_`` (:class:`Law`), ``verdict_``, ``newtonian_``, ``expression_``, ``pareto_`` (a
    DataFrame), ``feature_names_in_`` and ``n_features_in_``.
    """

    def __init__(self, *, seeds: int = 5, first_seed: int = 0, points: int = 1000, restarts: int = 3,
                 budget: int | None = None, maxsize: int = 20, backend: str = "operon", protocol: str = "orbitlaw",
                 selection: str | None = None, metric: str = "auto", tolerance: float | None = None,
                 quantity: str = "force", units: dict[str, str] | None = None, workers: int = 1,
                 progress: bool = False):
        self.seeds, self.first_seed, self.points, self.restarts = seeds, first_seed, points, restarts
        self.budget, self.maxsize, self.backend, self.protocol = budget, maxsize, backend, protocol
        self.selection, self.metric, self.tolerance, self.quantity = selection, metric, tolerance, quantity
        self.units, self.workers, self.progress = units, workers, progress

    def config(self, target: str, features: list[str]) -> DiscoverConfig:
        """The :class:`DiscoverConfig` these parameters ask for, on ``features`` against ``target``."""
        return DiscoverConfig(target=target, features=features, backend=self.backend, seeds=self.seeds,
                              first_seed=self.first_seed, points=self.points, restarts=self.restarts,
                              settings=search_settings(self.budget, self.maxsize), workers=self.workers,
                              selection=self.selection, metric=self.metric,
                              protocol=self.protocol, tolerance=self.tolerance, quantity=self.quantity,
                              units=self.units)

    def fit(self, X, y, feature_names: list[str] | None = None, *, groups=None) -> LawRegressor:
        """Find the law of ``y`` (n,) in the columns of ``X`` (a DataFrame, or an array (n, d) named by
        ``feature_names``; default x0, x1, ...); ``groups`` (n,): which system each row comes from, so that
        the intervals resample whole systems (the ``sequence`` column of a probe's predictions)."""
        values, names = _columns(X, feature_names, "fit")
        target = getattr(y, "name", None) or "y"
        if target in names:
            target = f"{target}_target"
        table = {**{n: values[:, i] for i, n in enumerate(names)}, target: np.asarray(y, dtype=np.float64).ravel()}
        if len(table[target]) != len(values):
            raise ValueError(f"fit: {len(values)} rows of X but {len(table[target])} values of y")
        if groups is not None:
            table["sequence"] = np.asarray(groups)
        self.law_ = Law(discover_law(table, self.config(target, names), progress=self.progress))
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.n_features_in_ = len(names)
        self.verdict_, self.newtonian_ = self.law_.verdict, self.law_.newtonian
        self.expression_, self.pareto_ = self.law_.expression, self.law_.pareto
        return self

    def _law(self) -> Law:
        if not hasattr(self, "law_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this LawRegressor is not fitted yet: call fit(X, y) first")
        return self.law_

    def predict(self, X) -> np.ndarray:
        """The law's values on ``X`` (the columns it was fitted on, by name or in order): shape (n,)."""
        return self._law().predict(X)

    def sympy(self) -> sympy.Expr:
        """The law as a sympy expression over the feature names."""
        return self._law().sympy()

    def latex(self) -> str:
        """The law in LaTeX."""
        return self._law().latex()
