"""Symbolic regression of a force law from a table, with a graded verdict: ``discover_law``.

On features such as ``r`` (AU), ``m1`` (planet, Msun), ``m2`` (star, Msun) and a target such as the force
magnitude (Msun AU / yr^2), ``seeds`` independent fits, each:

1. draws its own rows: ``points`` for the search and as many again, disjoint, held out for selection
   (each at most half the table);
2. runs ``restarts`` searches on the search rows, less their gross errors (:mod:`orbitlaw.discovery.sr.outliers`),
   and adds the log-space power-law screen's candidate (:mod:`orbitlaw.discovery.sr.powerlaw`) to their merged
   Pareto fronts;
3. simplifies, refits and prunes every front member on the search rows (:func:`law.polish`), in the error
   metric of the target (:func:`law.metric_for`: log error for a positive target, so that rows of every
   magnitude count alike; relative L1 otherwise);
4. scores the polished candidates on the held-out rows only and chooses by the PySR rule (``best`` or
   ``score``): a term that fits a few search rows (noise, or a high-leverage corner) earns nothing there.

The seeds then vote: the form a strict majority chose is refitted on all rows and graded
(:mod:`orbitlaw.discovery.sr.verdict`); without a majority, or when the law explains the target no better than a
constant, the verdict is ``inconclusive`` and ``newtonian`` is false.

``protocol="reference"`` is instead the reference's symbolic regression (docs/protocol.md, "The force probe and
its symbolic regression"; :func:`fit_galaxy`): per seed ("galaxy") ``points`` random rows, ``restarts``
searches with the epsilon-insensitive L1 loss, each reporting its own model chosen by the PySR score on its own
front, and the galaxy keeping the restart with the highest score; errors in relative L1, no held-out rows, no
power-law screen. The same cross-seed decision and grades are then applied.

One seed is :mod:`orbitlaw.discovery.sr.seed_fit`, the seeds' vote :mod:`orbitlaw.discovery.sr.cross_seed`, the
table :mod:`orbitlaw.discovery.sr.table`. The result is the LAW.json dictionary (see :func:`discover_law`). A run
writes each finished seed to ``<out>.partial/`` so that a killed run resumes where it stopped, with the same result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from orbitlaw.discovery.sr import choice, expression_text, units
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr import verdict as verdicts
from orbitlaw.discovery.sr.backends import REFERENCE_OPERATORS, SearchSettings, check_available, placeholders
from orbitlaw.discovery.sr.cross_seed import cross_seed_verdict
from orbitlaw.discovery.sr.rule import PRECISION
from orbitlaw.discovery.sr.seed_fit import PROTOCOLS, fit_seed_task
from orbitlaw.discovery.sr.table import GROUP_COLUMN, MIN_POINTS, load_table
from orbitlaw.orbits.workers import drop_shared_pool, shared_pool
from orbitlaw.provenance import write_json_atomic
from orbitlaw.validate import FieldError, at_least, at_most


@dataclass
class DiscoverConfig:
    """What a symbolic regression is asked: which column to explain by which, how hard to search, by which rule.

    target: the column to explain (e.g. ``F_pred``); features: the input columns (e.g. r in AU, m1 and m2 in
    Msun); subset: boolean columns that must all be true for a row to be used (e.g. ``near_train``).
    seeds: independent fits, of seeds first_seed .. first_seed + seeds - 1; points: rows drawn per seed for
    the search, and as many again held out for selection (each at most half the table); restarts: searches
    per seed; settings: each search's (:class:`~orbitlaw.discovery.sr.backends.SearchSettings`; None: the
    defaults); workers: seeds fitted side by side (never changes the result).
    selection: ``"se"`` (highest score among candidates within two standard errors of the lowest held-out
    error, paired per row), ``"best"`` (PySR: within 1.5x of it) or ``"score"``; None: the protocol's
    (``"se"``; ``"score"`` under ``"reference"``).
    metric: ``"auto"`` (``"log"`` for a positive target, else ``"relative"``), ``"log"`` or ``"relative"``.
    protocol: ``"orbitlaw"`` (the module doc) or ``"reference"`` (:func:`~orbitlaw.discovery.sr.seed_fit.fit_galaxy`;
    it fixes ``selection="score"``, ``metric="relative"`` and the epsilon-insensitive L1 loss: passing anything
    else for those is a ValueError).
    tolerance: the precision of the verdict (``"se"`` selection only; :func:`choice.choose`): each seed reports
    the simplest front member whose held-out predictions depart from the law it chose by at most this
    (:func:`choice.departure` in the error metric: RMS of the log ratio for ``"log"``, of the difference over
    the mean for ``"relative"``; 0.01 is 1%); 0: an exact test. None (the default): the study's precision
    (:data:`~orbitlaw.discovery.sr.rule.PRECISION`, 2%) under ``"se"`` selection, else 0
    (:attr:`rule_tolerance`).
    quantity: what the target is, which decides Newton's form (:data:`orbitlaw.discovery.sr.verdict.QUANTITIES`):
    ``"force"`` on the planet (``C * m1 * m2 / r**2``) or the planet's ``"acceleration"`` (``C * m2 / r**2``).
    units: {column: unit} for every feature and the target (``{"r": "AU", "F": "AU^4 yr^-4", ...}``): search the
    target over prefactor and dimensionless groups (:mod:`orbitlaw.discovery.sr.units`); None: no analysis.
    """

    target: str
    features: list[str] = field(default_factory=lambda: ["r", "m1", "m2"])
    subset: list[str] = field(default_factory=list)
    backend: str = "operon"
    seeds: int = 5
    first_seed: int = 0
    points: int = 1000
    restarts: int = 3
    settings: SearchSettings | None = None
    workers: int = 1
    selection: str | None = None
    metric: str = "auto"
    protocol: str = "orbitlaw"
    tolerance: float | None = None
    quantity: str = "force"
    units: dict[str, str] | None = None

    def __post_init__(self):
        self.features, self.subset = list(self.features), list(self.subset)

    def validate(self) -> None:
        """ValueError (:class:`~orbitlaw.validate.FieldError` for a field out of range) for what cannot run."""
        verdicts.newton_exponents(self.quantity)  # a ValueError naming the choices
        at_least(self, 1, "seeds", "restarts", "workers")
        at_most(self, 10_000, "seeds", "restarts", why="independent searches")
        at_least(self, MIN_POINTS, "points")
        at_least(self, 0, "first_seed")
        if self.selection is not None and self.selection not in choice.SELECTIONS:
            raise ValueError(f"unknown model selection {self.selection!r}: use {', '.join(choice.SELECTIONS)}")
        if self.tolerance is not None and not (isinstance(self.tolerance, (int, float))
                                               and not isinstance(self.tolerance, bool) and 0 <= self.tolerance < 1):
            raise FieldError("tolerance", f"must be a fraction in [0, 1), got {self.tolerance!r}")
        if self.tolerance and self.rule_selection != "se":
            raise ValueError(f"a tolerance applies to the 'se' selection only, not {self.rule_selection!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}: use {' or '.join(PROTOCOLS)}")
        if self.protocol == "reference":
            if self.rule_selection != "score":
                raise FieldError(message=f"`protocol` reference chooses models by score; `selection` {self.selection} "
                                 "contradicts it")
            if self.metric not in ("auto", "relative"):
                raise FieldError(message=f"`protocol` reference measures relative L1 error; `metric` {self.metric} "
                                 "contradicts it")
        if self.units is not None:
            if self.protocol == "reference":
                raise FieldError(message="`units` applies to the orbitlaw protocol only, not the reference's")
            try:
                self.dimensions()
            except ValueError as exc:  # a missing or unreadable unit, or a target no product of features makes
                raise FieldError(message=f"`units`: {exc}") from None
        at_least(self.search_settings, 3, "maxsize")
        self.search_settings.validate()

    def dimensions(self) -> units.Analysis | None:
        """The dimensional analysis of ``units`` (None without units)."""
        return None if self.units is None else units.analyse(self.units, self.features, self.target)

    @property
    def rule_selection(self) -> str:
        """``selection``, or the protocol's when not given."""
        if self.selection is not None:
            return self.selection
        return "score" if self.protocol == "reference" else "se"

    @property
    def rule_tolerance(self) -> float:
        """``tolerance``, or when not given the study's precision under ``"se"`` selection (0 under the others)."""
        if self.tolerance is not None:
            return float(self.tolerance)
        return PRECISION if self.rule_selection == "se" else 0.0

    @property
    def search_settings(self) -> SearchSettings:
        """``settings`` (the defaults when None), with the reference's epsilon-insensitive loss and operators under
        its protocol."""
        settings = self.settings or SearchSettings()
        if self.protocol == "reference":
            return dataclasses.replace(settings, loss="epsilon-l1", operators=REFERENCE_OPERATORS)
        return settings

    def error_metric(self, y: np.ndarray) -> str:
        """The error metric for target values ``y`` (``metric``, resolved; ValueError if ``y`` cannot take it)."""
        if self.protocol == "reference":
            return "relative"
        if self.metric == "auto":
            return laws.metric_for(y)
        if self.metric not in laws.METRICS:
            raise ValueError(f"unknown error metric {self.metric!r}: use auto, {' or '.join(laws.METRICS)}")
        if self.metric == "log" and not np.all(y > 0):
            raise ValueError(f"the log error metric needs a positive target; {self.target!r} has "
                             f"{int(np.sum(y <= 0))} rows <= 0 (use --metric relative)")
        return self.metric


def discover_law(table, config: DiscoverConfig | str, *, progress: bool = False,
                 resume_dir: str | Path | None = None, **fields) -> dict:
    """Run the symbolic regression and return the LAW.json dictionary.

    Args:
        table: CSV path, DataFrame or mapping of equal-length columns.
        config: a :class:`DiscoverConfig`, or its ``target`` column with its other fields as keyword arguments
            (``discover_law(table, "F_pred", seeds=3)``); keywords given with a config replace its fields.
        progress: a progress bar of the seeds.
        resume_dir: where finished seeds are kept so that a killed run resumes (None: not kept).

    Returns keys ``expression`` (sympy string in the feature names) and ``expression_latex``, ``verdict``
    (one of :data:`orbitlaw.discovery.sr.verdict.VERDICTS`) and ``inconclusive_reasons``, ``newtonian`` (bool: the
    verdict is ``newtonian``), ``power_law`` (None or ``{"constant": C, "constant_ci95": [lo, hi],
    "exponents": {feature: k}, "G_relative_error": ..., "G_relative_error_ci95": [...]}``, the last two
    for Newton's form only), ``seeds_agreeing``, ``majority``, ``newtonian_seeds``, ``error`` (on all
    rows, in ``error_metric``) and ``constant_error`` (the best constant's), ``newton_departure`` (RMS of
    ln(law / best fit of Newton's form for ``quantity``) on all rows; None unless every feature is one of
    r, m1, m2 and Newton's form's are among them, the metric is log and the law is positive everywhere),
    ``fitted_exponents`` ({feature: k} of the least-squares
    (soft-L1) fit ``ln y = c + sum k ln x`` on all rows, whatever law came out: how strongly the target
    moves with each variable; a readout that carries a variable only in part shows its exponent shrunk
    toward 0; None unless every value is positive), ``per_seed``, ``pareto``, ``backend``, ``settings``, ``data``
    and ``code_version``.
    """
    if isinstance(config, str):
        config = DiscoverConfig(config, **fields)
    elif fields:
        config = dataclasses.replace(config, **fields)
    config.validate()
    target, features, backend, seeds = config.target, config.features, config.backend, config.seeds
    points, restarts, first_seed, protocol = config.points, config.restarts, config.first_seed, config.protocol
    selection, tolerance = config.rule_selection, config.rule_tolerance
    quantity, workers = config.quantity, config.workers
    settings = config.search_settings
    seed_ids = range(first_seed, first_seed + seeds)
    X, y, data_info = load_table(table, target, features, config.subset)
    groups = data_info.pop("groups", None)
    data_info["bootstrap_resamples"] = f"{GROUP_COLUMN}s" if groups is not None else "rows"
    check_available(backend)
    metric = config.error_metric(y)
    reference = protocol == "reference"
    recorded = {"protocol": protocol, "backend": backend, "seeds": seeds, "first_seed": first_seed, "points": points,
              "restarts": restarts,
              "selection": selection, "metric": metric, "tolerance": float(tolerance), "quantity": quantity,
              "selected_on": "each restart's own front, best restart by score" if reference else "held-out rows",
              "power_law_screen": not reference, "search": settings.to_dict()}
    dims = config.dimensions()
    if dims is not None:  # recorded only when given, so that a run without units keeps its resume key
        dims.reduce(X, y)  # every row checked before any seed runs (a seed sees only its own rows)
        recorded["units"] = {c: config.units[c] for c in [*features, target]}
        recorded["dimensional_analysis"] = dims.text()
    # A seed's result depends on everything but the number of seeds (more seeds later reuse these) and the
    # quantity, which only grades the laws the seeds found.
    digest = hashlib.sha256(json.dumps([{k: v for k, v in recorded.items()
                                         if k not in ("seeds", "first_seed", "quantity")},
                                        _data_hash(X, y)]).encode()).hexdigest()

    results: dict[int, dict] = {}
    resume = Path(resume_dir) if resume_dir else None
    if resume is not None and resume.is_dir():
        for seed in seed_ids:
            f = resume / f"seed_{seed}.json"
            if f.exists():
                try:
                    saved = json.loads(f.read_text())
                except (OSError, json.JSONDecodeError):
                    continue  # a torn file from before atomic writes, or a foreign one: recompute
                if saved.get("digest") == digest and _parses(saved.get("result"), len(features)):
                    results[seed] = saved["result"]  # else foreign or damaged: recomputed and overwritten
    todo = [s for s in seed_ids if s not in results]
    tasks = [(protocol, X, y, s, backend, points, restarts, selection, settings, metric, tolerance, dims)
             for s in todo]
    bar = tqdm(total=seeds, initial=seeds - len(todo), desc=f"symbolic regression ({backend})", unit="seed",
               disable=not progress)

    def record(result):
        results[result["seed"]] = result
        if resume is not None:
            resume.mkdir(parents=True, exist_ok=True)
            write_json_atomic(resume / f"seed_{result['seed']}.json", {"digest": digest, "result": result})
        bar.update()

    if workers > 1 and len(tasks) > 1:  # one pool for the process: a study's many short searches start it once
        try:
            for result in shared_pool(workers).map(fit_seed_task, tasks):
                record(result)
        except BaseException:  # a failed or interrupted search leaves no queued seed behind for the next call
            drop_shared_pool(workers)
            raise
    else:
        for task in tasks:
            record(fit_seed_task(task))
    bar.close()
    return cross_seed_verdict([results[s] for s in seed_ids], X, y, features, data_info, recorded, groups)


def _data_hash(X: np.ndarray, y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(X).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()


def _parses(result, n_features: int) -> bool:
    """Whether a resumed seed result's expressions are all plain expressions over the placeholders (read by
    :mod:`orbitlaw.discovery.sr.expression_text`, never evaluated)."""
    symbols = {str(s): s for s in placeholders(n_features)}
    try:
        for text in [result["expression"], result.get("exact_expression", result["expression"]),
                     *(c["expression"] for c in result["pareto"])]:
            expression_text.parse(text, symbols)
    except (ValueError, KeyError, TypeError):
        return False
    return True


def write_law(law: dict, out: str | Path) -> Path:
    """Write LAW.json atomically (creating its directory) and return its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, law)
    return out


def partial_dir(out: str | Path) -> Path:
    """Where a run writing ``out`` keeps its finished seeds until it completes."""
    out = Path(out)
    return out.with_name(f".{out.name}.partial")


def discover_to_file(out: str | Path, table, config: DiscoverConfig | str, *, progress: bool = False,
                     **fields) -> dict:
    """:func:`discover_law` with resume state beside ``out``, LAW.json written atomically, state removed."""
    resume = partial_dir(out)
    law = discover_law(table, config, progress=progress, resume_dir=resume, **fields)
    write_law(law, out)
    shutil.rmtree(resume, ignore_errors=True)
    return law
