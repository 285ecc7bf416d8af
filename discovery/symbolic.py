"""Symbolic regression of a force law from a table, with a graded verdict: ``discover_law``.

On features such as ``r`` (AU), ``m1`` (planet, Msun), ``m2`` (star, Msun) and a target such as the force
magnitude (Msun AU / yr^2), ``seeds`` independent fits, each:

1. draws its own rows: ``points`` for the search and as many again, disjoint, held out for selection
   (each at most half the table);
2. runs ``restarts`` searches on the search rows, less their gross errors (:mod:`orbitlaw.discovery.outliers`),
   and adds the log-space power-law screen's candidate (:mod:`orbitlaw.discovery.powerlaw`) to their merged
   Pareto fronts;
3. simplifies, refits and prunes every front member on the search rows (:func:`law.polish`), in the error
   metric of the target (:func:`law.metric_for`: log error for a positive target, so that rows of every
   magnitude count alike; relative L1 otherwise);
4. scores the polished candidates on the held-out rows only and chooses by the PySR rule (``best`` or
   ``score``): a term that fits a few search rows (noise, or a high-leverage corner) earns nothing there.

The seeds then vote: the form a strict majority chose is refitted on all rows and graded
(:mod:`orbitlaw.discovery.verdict`); without a majority, or when the law explains the target no better than a
constant, the verdict is ``inconclusive`` and ``newtonian`` is false.

``protocol="reference"`` is instead the reference's symbolic regression (science.md §5,
:func:`fit_galaxy`): per seed ("galaxy") ``points`` random rows, ``restarts`` searches with the
epsilon-insensitive L1 loss, each reporting its own model chosen by the PySR score on its own front, and
the galaxy keeping the restart with the highest score; errors in relative L1, no held-out rows, no
power-law screen. The same cross-seed decision and grades are then applied.

The result is the LAW.json dictionary (see :func:`discover_law`). A run writes each finished seed to
``<out>.partial/`` so that a killed run resumes where it stopped, with the same result.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import shutil
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import sympy
from tqdm import tqdm

from orbitlaw.discovery import expression_text, outliers, powerlaw
from orbitlaw.discovery import law as laws
from orbitlaw.discovery import verdict as verdicts
from orbitlaw.discovery.backends import SearchSettings, check_available, placeholders, prepare, search
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.orbits.workers import die_with_parent

GROUP_COLUMN = "sequence"
"""Rows that share this column's value (a probe's planet steps of one sequence) are not independent: the
bootstrap interval of the constant resamples whole groups."""

MIN_POINTS = 20
"""Fewer usable rows than this cannot support (or refute) a three-variable law."""


def _column_error(name: str, available: list[str]) -> ValueError:
    close = difflib.get_close_matches(name, available, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (columns: {', '.join(available)})"
    return ValueError(f"column {name!r} not found{hint}")


def _as_bool(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype == bool:
        return values
    text = np.char.lower(np.asarray(values, dtype=str))
    ok = np.isin(text, ["true", "false", "1", "0", "1.0", "0.0"])
    if not ok.all():
        raise ValueError(f"column {name!r} used as --subset must be boolean (True/False or 1/0)")
    return np.isin(text, ["true", "1", "1.0"])


def load_table(table, target: str, features: list[str], subset: list[str] = ()) -> tuple[np.ndarray, np.ndarray,
                                                                                          dict]:
    """Features X (n, d) and target y (n,) from a CSV path, a DataFrame or a mapping of columns.

    Rows with a non-finite value in any used column are dropped and counted; rows where a ``subset``
    column is false are left out. Raises ValueError (one line) for missing or non-numeric columns, a
    constant target and fewer than ``MIN_POINTS`` usable rows.
    """
    source = str(table) if isinstance(table, (str, Path)) else "<table>"
    if isinstance(table, (str, Path)):
        import pandas as pd

        path = Path(table)
        if path.is_dir():
            raise ValueError(f"input table {path} is a directory, not a CSV file; name the file (e.g. "
                             f"{path / 'predictions.csv'} for a probe's output)")
        if not path.is_file():
            raise ValueError(f"input table {path} does not exist")
        try:
            table = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {path} as CSV: {str(exc).splitlines()[0]}") from None
    columns = list(table.keys())
    if len(set(features)) != len(features) or not features:
        raise ValueError(f"features must be distinct column names, got {','.join(features)!r}")
    if target in features:
        raise ValueError(f"the target {target!r} cannot also be a feature")
    for name in [target, *features, *subset]:
        if name not in columns:
            raise _column_error(name, columns)
    data = {}
    for name in [target, *features]:
        try:
            data[name] = np.asarray(table[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"column {name!r} is not numeric") from None
    keep = np.ones(len(data[target]), dtype=bool)
    for name in subset:
        keep &= _as_bool(np.asarray(table[name]), name)
    finite = np.all([np.isfinite(v) for v in data.values()], axis=0)
    dropped = int(np.sum(keep & ~finite))
    keep &= finite
    n = int(keep.sum())
    if n < MIN_POINTS:
        raise ValueError(f"only {n} usable rows in {source} ({dropped} dropped as NaN/inf); "
                         f"symbolic regression needs at least {MIN_POINTS}")
    y = data[target][keep]
    if np.ptp(y) == 0 or not np.any(y):
        raise ValueError(f"target column {target!r} is constant ({y[0]:g}): there is no law to find")
    X = np.column_stack([data[f][keep] for f in features])
    info = {"input": source, "target": target, "features": list(features), "subset": list(subset),
            "rows": int(len(keep)), "rows_used": n, "dropped_nonfinite": dropped}
    if GROUP_COLUMN in columns and GROUP_COLUMN not in features:
        info["groups"] = np.asarray(table[GROUP_COLUMN])[keep]  # popped by discover_law: not JSON
    return X, y, info


def _render(expr: sympy.Expr, features: list[str]) -> str:
    """The expression with the placeholders x0.. replaced by the feature names."""
    names = [sympy.Symbol(f) for f in features]  # one symbol per column, whatever its name holds
    return str(expr.xreplace(dict(zip(placeholders(len(features)), names, strict=True))))


def split_rows(n: int, points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ``seed``'s disjoint search and held-out rows (sorted indices): ``min(points, n // 2)`` held out,
    ``min(points, n - held out)`` for the search."""
    order = np.random.default_rng(seed).permutation(n)
    held = min(points, n // 2)
    used = min(points, n - held)
    return np.sort(order[:used]), np.sort(order[used:used + held])


def fit_seed(X: np.ndarray, y: np.ndarray, seed: int, backend: str, points: int, restarts: int,
             selection: str, settings: SearchSettings, metric: str = "log", tolerance: float = 0.0) -> dict:
    """One seed: search on its search rows, polish there, choose on its held-out rows (module doc)."""
    prepare(backend)
    start, cpu = time.perf_counter(), time.process_time()
    rows, held = split_rows(len(y), points, seed)
    Xs, ys, Xh, yh = X[rows], y[rows], X[held], y[held]
    symbols = placeholders(X.shape[1])
    found = powerlaw.screen_candidates(Xs, ys, symbols)  # integer, fractional and real exponents
    base = powerlaw.screen(Xs, ys, symbols)
    clean = ~outliers.gross_errors(Xs, ys)  # the search alone leaves gross errors out (see outliers)
    with np.errstate(all="ignore"):
        ratio = None if base is None else ys / laws.evaluate(base, symbols, Xs)
    if ratio is None or not np.all(np.isfinite(ratio)):  # a target or feature <= 0: search the raw target
        for restart in range(restarts):
            found += search(backend, Xs[clean], ys[clean], seed=seed * 1000 + restart, settings=settings)
    else:  # search the departure g = y / base from the best power law; candidates are base * g
        residual = dataclasses.replace(settings, maxsize=max(3, settings.maxsize - laws.complexity(base) + 1))
        for restart in range(restarts):
            found += [base * g for g in search(backend, Xs[clean], ratio[clean], seed=seed * 1000 + restart,
                                               settings=residual)]
    # Polishing (simplify, refit, prune) costs ~10-50 ms an expression: only the raw fronts get it, the
    # front in the metric and the front in relative L1 (the search's own scale: a raw expression whose
    # constants only polishing makes sensible in log space is kept by the second).
    unique = list({sympy.srepr(e): e for e in found}.values())
    predictions = [laws.evaluate(e, symbols, Xs) for e in unique]
    keep = {}
    for m in dict.fromkeys([metric, "relative"]):
        raw = [laws.Candidate(e, laws.complexity(e), laws.error(ys, p, m)) for e, p in zip(unique, predictions,
                                                                                             strict=True)]
        keep.update({sympy.srepr(c.expr): c.expr for c in laws.pareto(raw)})
    polished = [laws.polish(e, symbols, Xs, ys, metric) for e in keep.values()]
    # The best constant roots every front, as in PySR (whose fronts start at size 1): without it the simplest
    # law on a front scores 0 and any more complex one that is better by a hair (noise) outscores it.
    polished.append(laws.Candidate(verdicts.best_constant(ys, metric), 1, math.nan))
    held_pred = {str(c.expr): laws.evaluate(c.expr, symbols, Xh) for c in polished}
    per_row = {key: laws.row_errors(yh, pred, metric) for key, pred in held_pred.items()}
    held_out = [laws.Candidate(c.expr, c.complexity, float(np.mean(per_row[str(c.expr)]))) for c in polished]
    front = laws.pareto(held_out)
    chosen = laws.choose(front, selection, per_row, held_pred, tolerance, metric)
    exact = laws.choose(front, selection, per_row, held_pred, 0.0, metric) if tolerance else chosen
    both = np.concatenate([rows, held])
    expr = _robust_constant(chosen.expr, symbols, X[both], y[both], metric)
    exact_expr = expr if exact is chosen else _robust_constant(exact.expr, symbols, X[both], y[both], metric)
    return {"seed": seed, "expression": str(expr), "exact_expression": str(exact_expr), "exact_error": exact.error,
            "error": chosen.error, "complexity": chosen.complexity,
            "search_rows": len(rows), "gross_errors_left_out": int(np.sum(~clean)), "holdout_rows": len(held),
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu, "pareto": [c.to_dict() for c in front]}


def _robust_constant(expr: sympy.Expr, symbols: list[sympy.Symbol], X: np.ndarray, y: np.ndarray,
                     metric: str) -> sympy.Expr:
    """A power law's constant refitted by :func:`powerlaw.fit_constant` on (X, y); other forms unchanged."""
    names = [str(s) for s in symbols]
    power = laws.power_law(expr, names)
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
        front = laws.pareto(cands)
        per_restart.append((laws.choose(front, "score"), front))
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


def _fit_seed_task(args) -> dict:
    protocol, *rest = args
    if protocol == "reference":
        X, y, seed, backend, points, restarts, _, settings, _, _ = rest
        return fit_galaxy(X, y, seed, backend, points, restarts, settings)
    return fit_seed(*rest)


def discover_law(table, target: str, features=("r", "m1", "m2"), backend: str = "operon", seeds: int = 5,
                 points: int = 1000, restarts: int = 3, selection: str | None = None,
                 settings: SearchSettings | None = None, subset=(), workers: int = 1, progress: bool = False,
                 resume_dir: str | Path | None = None, metric: str = "auto", protocol: str = "orbitlaw",
                 first_seed: int = 0, tolerance: float = laws.TOLERANCE, quantity: str = "force") -> dict:
    """Run the symbolic regression and return the LAW.json dictionary.

    Args:
        table: CSV path, DataFrame or mapping of equal-length columns.
        target: the column to explain (e.g. ``F_pred``); features: the input columns (e.g. r, m1, m2).
        seeds: independent fits, of seeds first_seed .. first_seed + seeds - 1; points: rows drawn per seed
            for the search, and as many again held out for selection (each at most half the table);
            restarts: searches per seed.
        selection: ``"se"`` (highest score among candidates within two standard errors of the lowest
            held-out error, paired per row), ``"best"`` (PySR: within 1.5x of it) or ``"score"``; None:
            the protocol's (``"se"``; ``"score"`` under ``"reference"``).
        metric: ``"auto"`` (``"log"`` for a positive target, else ``"relative"``), ``"log"`` or ``"relative"``.
        protocol: ``"orbitlaw"`` (the module doc) or ``"reference"`` (:func:`fit_galaxy`; it fixes
            ``selection="score"``, ``metric="relative"`` and the epsilon-insensitive L1 loss: passing
            anything else for those is a ValueError).
        subset: boolean columns that must all be true for a row to be used (e.g. ``near_train``).
        resume_dir: where finished seeds are kept so that a killed run resumes (None: not kept).
        tolerance: the precision of the verdict (``"se"`` selection only; :func:`law.choose`): each seed
            reports the simplest front member whose held-out predictions depart from the law it chose by at
            most this (:func:`law.departure` in the error metric: RMS of the log ratio for ``"log"``, of the
            difference over the mean for ``"relative"``; 0.01 is 1%). 0 (the default): an exact test.
        quantity: what the target is, which decides Newton's form (:data:`orbitlaw.discovery.verdict.QUANTITIES`):
            ``"force"`` on the planet (``C * m1 * m2 / r**2``) or the planet's ``"acceleration"``
            (``C * m2 / r**2``: no planet mass).

    Returns keys ``expression`` (sympy string in the feature names) and ``expression_latex``, ``verdict``
    (one of :data:`orbitlaw.discovery.verdict.VERDICTS`) and ``inconclusive_reasons``, ``newtonian`` (bool: the
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
    features = list(features)
    subset = list(subset)
    verdicts.newton_exponents(quantity)  # a ValueError naming the choices
    if seeds < 1 or points < MIN_POINTS or restarts < 1 or workers < 1 or first_seed < 0:
        raise ValueError(f"need seeds >= 1, points >= {MIN_POINTS}, restarts >= 1, workers >= 1 and a first "
                         "seed >= 0")
    seed_ids = range(first_seed, first_seed + seeds)
    if selection is None:
        selection = "score" if protocol == "reference" else "se"
    if selection not in laws.SELECTIONS:
        raise ValueError(f"unknown model selection {selection!r}: use {', '.join(laws.SELECTIONS)}")
    if not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 1):
        raise ValueError(f"the tolerance must be a fraction in [0, 1), got {tolerance!r}")
    if tolerance and selection != "se":
        raise ValueError(f"a tolerance applies to the 'se' selection only, not {selection!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}: use {' or '.join(PROTOCOLS)}")
    settings = settings or SearchSettings()
    if protocol == "reference":
        if selection != "score":
            raise ValueError(f"--protocol reference chooses models by score; --selection {selection} contradicts it")
        if metric not in ("auto", "relative"):
            raise ValueError(f"--protocol reference measures relative L1 error; --metric {metric} contradicts it")
        metric = "relative"
        settings = dataclasses.replace(settings, loss="epsilon-l1")
    if settings.maxsize < 3:
        raise ValueError(f"maxsize must be at least 3, got {settings.maxsize}")
    X, y, data_info = load_table(table, target, features, subset)
    groups = data_info.pop("groups", None)
    data_info["bootstrap_resamples"] = f"{GROUP_COLUMN}s" if groups is not None else "rows"
    check_available(backend)
    if metric == "auto":
        metric = laws.metric_for(y)
    elif metric not in laws.METRICS:
        raise ValueError(f"unknown error metric {metric!r}: use auto, {' or '.join(laws.METRICS)}")
    elif metric == "log" and not np.all(y > 0):
        raise ValueError(f"the log error metric needs a positive target; {target!r} has {int(np.sum(y <= 0))} "
                         "rows <= 0 (use --metric relative)")
    reference = protocol == "reference"
    config = {"protocol": protocol, "backend": backend, "seeds": seeds, "first_seed": first_seed, "points": points,
              "restarts": restarts,
              "selection": selection, "metric": metric, "tolerance": float(tolerance), "quantity": quantity,
              "selected_on": "each restart's own front, best restart by score" if reference else "held-out rows",
              "power_law_screen": not reference, "search": settings.to_dict()}
    # A seed's result depends on everything but the number of seeds (more seeds later reuse these) and the
    # quantity, which only grades the laws the seeds found.
    digest = hashlib.sha256(json.dumps([{k: v for k, v in config.items()
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
    tasks = [(protocol, X, y, s, backend, points, restarts, selection, settings, metric, tolerance) for s in todo]
    bar = tqdm(total=seeds, initial=seeds - len(todo), desc=f"symbolic regression ({backend})", unit="seed",
               disable=not progress)

    def record(result):
        results[result["seed"]] = result
        if resume is not None:
            resume.mkdir(parents=True, exist_ok=True)
            write_json_atomic(resume / f"seed_{result['seed']}.json", {"digest": digest, "result": result})
        bar.update()

    if workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=get_context("spawn"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            for result in pool.map(_fit_seed_task, tasks):
                record(result)
    else:
        for task in tasks:
            record(_fit_seed_task(task))
    bar.close()
    return cross_seed_verdict([results[s] for s in seed_ids], X, y, features, data_info, config, groups)


def _data_hash(X: np.ndarray, y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(X).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()


def _parses(result, n_features: int) -> bool:
    """Whether a resumed seed result's expressions are all plain expressions over the placeholders (read by
    :mod:`orbitlaw.discovery.expression_text`, never evaluated)."""
    symbols = {str(s): s for s in placeholders(n_features)}
    try:
        for text in [result["expression"], result.get("exact_expression", result["expression"]),
                     *(c["expression"] for c in result["pareto"])]:
            expression_text.parse(text, symbols)
    except (ValueError, KeyError, TypeError):
        return False
    return True


def cross_seed_verdict(per_seed: list[dict], X, y, features: list[str], data_info: dict, config: dict,
                       groups: np.ndarray | None = None) -> dict:
    """The seeds vote on a form; the winner is refitted on all rows and graded (:mod:`orbitlaw.discovery.verdict`)."""
    symbols = placeholders(len(features))
    names = [str(s) for s in symbols]
    metric = config["metric"]
    quantity = config.get("quantity", "force")
    locals_ = {n: s for n, s in zip(names, symbols, strict=True)}
    exprs = [expression_text.parse(r["expression"], locals_) for r in per_seed]
    forms = [laws.form(e, names) for e in exprs]
    votes, winner, best, shared = _vote(forms, [r["error"] for r in per_seed])
    final = _refit_all_rows(exprs[best], forms[best], symbols, X, y, metric)
    # the exact test's law (before the precision replaced anything): the seeds' own exact choices, voted alike
    exact_exprs = [expression_text.parse(r.get("exact_expression", r["expression"]), locals_) for r in per_seed]
    if [str(e) for e in exact_exprs] == [str(e) for e in exprs]:
        exact, exact_votes, exact_winner = final, votes, winner
    else:
        exact_forms = [laws.form(e, names) for e in exact_exprs]
        exact_votes, exact_winner, exact_best, _ = _vote(exact_forms, [r.get("exact_error", r["error"])
                                                                       for r in per_seed])
        exact = _refit_all_rows(exact_exprs[exact_best], exact_forms[exact_best], symbols, X, y, metric)

    def judged(expr):
        power = laws.power_law(expr, names)
        if power is not None:
            power["exponents"] = {f: power["exponents"][n] for f, n in zip(features, names, strict=True)}
        return power

    rows = []
    for r, e in zip(per_seed, exprs, strict=True):
        power = judged(e)
        grade = verdicts.form_grade(power, quantity)
        rows.append({**r, "expression": _render(e, features), "power_law": power,
                     "exact_expression": _render(expression_text.parse(r.get("exact_expression", r["expression"]),
                                                                       locals_), features),
                     "newtonian": grade == "newtonian", "verdict": grade,
                     "pareto": [{**c, "expression": _render(expression_text.parse(c["expression"], locals_),
                                                            features)} for c in r["pareto"]]})
    power = judged(final.expr)
    majority = votes[winner] > len(per_seed) / 2
    baseline = verdicts.constant_error(y, metric)
    exponent_se = None
    if power is not None and metric == "log":
        se = verdicts.exponent_errors(X, y, [power["exponents"][f] for f in features])
        exponent_se = None if se is None else {f: float(s) for f, s in zip(features, se, strict=True)}
    precision = float(config.get("tolerance", 0.0))
    test = verdicts.newton_test(X, y, features, quantity, precision, seed=len(per_seed), groups=groups)
    verdict, reasons = verdicts.grade(power, rows=len(y), majority=majority, law_error=final.error,
                                      baseline_error=baseline, exponent_se=exponent_se, quantity=quantity, test=test)
    if power is not None:
        exponents = [power["exponents"][f] for f in features]
        power["exponent_se"] = exponent_se
        interval = powerlaw.constant_interval(X, y, exponents, metric, seed=len(per_seed), groups=groups)
        power["constant_ci95"] = list(interval) if interval else None
        newton_form = verdicts.form_grade(power, quantity) == "newtonian"
        G = laws.G_AU_MSUN_YR
        power["G_relative_error"] = (power["constant"] - G) / G if newton_form else None
        power["G_relative_error_ci95"] = [(c - G) / G for c in interval] if newton_form and interval else None
    rendered = final.expr.xreplace(dict(zip(symbols, [sympy.Symbol(f) for f in features], strict=True)))
    departure = _departure_from_newton(final.expr, symbols, X, y, features, quantity, metric)
    exact_departure = _departure_from_newton(exact.expr, symbols, X, y, features, quantity, metric, groups,
                                             seed=len(per_seed))
    fitted = test["exponents"] if test else (dict(zip(features, map(float, powerlaw.fit_exponents(X, y)), strict=True))
                                             if powerlaw.applicable(X, y) else None)
    exact_power = judged(exact.expr)
    return {
        "expression": _render(final.expr, features),
        "expression_latex": sympy.latex(rendered),
        "verdict": verdict,
        "inconclusive_reasons": reasons,
        "newtonian": verdict == "newtonian",
        "power_law": power,
        "newton_test": test,
        "resolution": test["resolution"] if test else None,
        "rule": rule_of(config),
        "error": final.error,
        "error_metric": metric,
        "constant_error": baseline,
        "newton_departure": departure and departure[0],
        "exact": {"expression": _render(exact.expr, features), "form": verdicts.form_grade(exact_power, quantity),
                  "power_law": exact_power, "seeds_agreeing": exact_votes[exact_winner],
                  "newton_departure": exact_departure and exact_departure[0],
                  "newton_departure_ci95": exact_departure and exact_departure[1]},
        "newton_departure_exact": exact_departure and exact_departure[0],
        "newton_departure_exact_ci95": exact_departure and exact_departure[1],
        "fitted_exponents": fitted,
        "fitted_exponents_ci95": test["exponents_ci95"] if test else None,
        "complexity": final.complexity,
        "seeds": len(per_seed),
        "seeds_agreeing": votes[winner],
        "form_agreeing": shared[forms[best]],
        "majority": majority,
        "newtonian_seeds": sum(r["newtonian"] for r in rows),
        "per_seed": rows,
        "pareto": rows[best]["pareto"],
        "backend": config["backend"],
        "settings": config,
        "data": data_info,
        "code_version": code_version(),
        "dependency_versions": dependency_versions(),
    }


def rule_of(config: dict) -> dict:
    """The rule a verdict was decided by, as every law row states it: the precision (tolerance: an RMS of ln),
    the quantity whose Newtonian form counts, the model selection, the protocol and the intervals' level."""
    return {"precision": float(config.get("tolerance", 0.0)), "quantity": config.get("quantity", "force"),
            "selection": config.get("selection", "se"), "metric": config["metric"],
            "protocol": config.get("protocol", "orbitlaw"),
            "interval": f"{verdicts.INTERVAL_LEVEL:.0%} bootstrap over systems"}


def _vote(forms: list[str], errors: list[float]) -> tuple[Counter, str, int, Counter]:
    """The seeds' vote on ``forms`` (:func:`law.form` of each seed's law): the votes, the winning ballot, the
    representative seed and how many of the winners share its exact form.

    The seeds vote on the verdict's level of detail: a power law by its exponents, anything else as "not a power
    law" (five seeds with five different non-power laws agree that it is not a power law). The representative
    is the exact form most of the winning seeds chose, then the lowest held-out error."""
    ballots = [f if f.startswith("power_law:") else "not-a-power-law" for f in forms]
    votes = Counter(ballots)
    median_error = {b: float(np.median([e for e, g in zip(errors, ballots, strict=True) if g == b])) for b in votes}
    winner = max(votes, key=lambda b: (votes[b], -median_error[b], b))
    members = [i for i, b in enumerate(ballots) if b == winner]
    shared = Counter(forms[i] for i in members)
    best = min(members, key=lambda i: (-shared[forms[i]], errors[i], i))
    return votes, winner, best, shared


def _departure_from_newton(expr: sympy.Expr, symbols, X: np.ndarray, y: np.ndarray, features: list[str],
                           quantity: str, metric: str, groups: np.ndarray | None = None,
                           seed: int | None = None) -> tuple[float, list[float] | None] | None:
    """How far the law ``expr`` is from Newton's form for ``quantity`` on the rows: the RMS of
    ln(law / C_N * Newton's form), C_N fitted on the rows (:func:`powerlaw.fit_constant`), with (when ``seed``
    is given) its 95% interval over bootstrap resamples of whole systems (``groups``), the law held fixed and
    C_N refitted on each resample. None unless every feature is one of r, m1, m2 with Newton's among them, the
    metric is log and the law is positive and finite on every row."""
    newton_k = verdicts.newton_exponents(quantity)
    if not (set(features) <= set(newton_k) and {f for f, k in newton_k.items() if k} <= set(features)
            and metric == "log" and np.all(X > 0)):
        return None
    basis = np.log(X) @ np.asarray([newton_k[f] for f in features], dtype=np.float64)
    with np.errstate(all="ignore"):
        law = np.log(laws.evaluate(expr, symbols, X))
    if not np.all(np.isfinite(law)):
        return None  # a law that predicts <= 0 somewhere: undefined
    residual = np.log(y) - basis  # ln C_N is its median

    def rms(idx):
        return float(np.sqrt(np.mean((law[idx] - basis[idx] - np.median(residual[idx])) ** 2)))

    value = rms(slice(None))
    if seed is None:
        return value, None
    draw = powerlaw.Resampler(len(y), seed, groups)
    lo, hi = powerlaw.percentile_interval(np.array([rms(draw.next()) for _ in range(1000)]), verdicts.INTERVAL_LEVEL)
    return value, [float(lo), float(hi)]


def _refit_all_rows(expr: sympy.Expr, form: str, symbols, X, y, metric: str) -> laws.Candidate:
    """The winning seed's law refitted on every row: a power law's constant robustly
    (:func:`powerlaw.fit_constant`), any other law polished; never a change of form."""
    final = laws.polish(expr, symbols, X, y, metric)
    if laws.form(final.expr, [str(s) for s in symbols]) != form:  # refitting must not change the form that won
        final = laws.Candidate(laws.refit(expr, symbols, X, y, metric), laws.complexity(expr), math.nan)
    final.expr = _robust_constant(final.expr, symbols, X, y, metric)
    final.error = laws.error(y, laws.evaluate(final.expr, symbols, X), metric)
    return final


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


def discover_to_file(out: str | Path, table, **kwargs) -> dict:
    """``discover_law`` with resume state beside ``out``, LAW.json written atomically, state removed."""
    resume = partial_dir(out)
    law = discover_law(table, resume_dir=resume, **kwargs)
    write_law(law, out)
    shutil.rmtree(resume, ignore_errors=True)
    return law
