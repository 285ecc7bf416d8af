"""Symbolic regression of a force law from a table, with a plain verdict: ``discover_law``.

Protocol (the reference's, ``../shared/docs/science.md`` §5): ``seeds`` independent fits (seed i draws
its own ``points`` random rows), each the best of ``restarts`` searches (their Pareto fronts merged),
on features such as ``r`` (AU), ``m1`` (planet, Msun), ``m2`` (star, Msun) and a target such as the
force magnitude (Msun AU / yr^2). Every front member is simplified and refitted (:func:`law.polish`),
the reported model of a seed is chosen by the PySR score, and the seeds vote: the form most seeds agree
on is refitted on all rows and reported with its verdict (power law? Newtonian?).

The result is the LAW.json dictionary (see :func:`discover_law`). A run writes each finished seed to
``<out>.partial/`` so that a killed run resumes where it stopped, with the same result.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import shutil
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import sympy
from tqdm import tqdm

from discovery import law as laws
from discovery.backends import SearchSettings, check_available, placeholders, prepare, search
from orbits.provenance import code_version, write_json_atomic

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
    return X, y, info


def _render(expr: sympy.Expr, features: list[str]) -> str:
    """The expression with the placeholders x0.. replaced by the feature names."""
    names = [sympy.Symbol(f) for f in features]  # one symbol per column, whatever its name holds
    return str(expr.xreplace(dict(zip(placeholders(len(features)), names, strict=True))))


def fit_seed(X: np.ndarray, y: np.ndarray, seed: int, backend: str, points: int, restarts: int,
             selection: str, settings: SearchSettings) -> dict:
    """One seed: ``points`` random rows, ``restarts`` searches, the merged front polished and scored."""
    prepare(backend)
    start, cpu = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(y), size=min(points, len(y)), replace=False))
    Xs, ys = X[rows], y[rows]
    symbols = placeholders(X.shape[1])
    found = []
    for restart in range(restarts):
        found += search(backend, Xs, ys, seed=seed * 1000 + restart, settings=settings)
    # Polishing (simplify, refit, prune) costs ~10 ms an expression: only the merged raw front gets it.
    raw = [laws.Candidate(e, laws.complexity(e), laws.relative_l1(ys, laws.evaluate(e, symbols, Xs)))
           for e in {sympy.srepr(e): e for e in found}.values()]
    front = laws.pareto([laws.polish(c.expr, symbols, Xs, ys) for c in laws.pareto(raw)])
    chosen = laws.choose(front, selection)
    return {"seed": seed, "expression": str(chosen.expr), "error": chosen.error,
            "complexity": chosen.complexity, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu,
            "pareto": [c.to_dict() for c in front]}


def _fit_seed_task(args) -> dict:
    return fit_seed(*args)


def discover_law(table, target: str, features=("r", "m1", "m2"), backend: str = "operon", seeds: int = 5,
                 points: int = 1000, restarts: int = 3, selection: str = "best",
                 settings: SearchSettings | None = None, subset=(), workers: int = 1, progress: bool = False,
                 resume_dir: str | Path | None = None) -> dict:
    """Run the symbolic regression and return the LAW.json dictionary.

    Args:
        table: CSV path, DataFrame or mapping of equal-length columns.
        target: the column to explain (e.g. ``F_pred``); features: the input columns (e.g. r, m1, m2).
        seeds: independent fits 0..seeds-1; points: rows drawn per seed; restarts: searches per seed.
        selection: ``"best"`` (PySR: highest score within 1.5x of the best error) or ``"score"``.
        subset: boolean columns that must all be true for a row to be used (e.g. ``near_train``).
        resume_dir: where finished seeds are kept so that a killed run resumes (None: not kept).

    Returns keys ``expression`` (sympy string in the feature names), ``newtonian`` (bool),
    ``power_law`` (None or ``{"constant": C, "exponents": {feature: k}}``), ``seeds_agreeing``,
    ``newtonian_seeds``, ``error`` (relative L1 on all rows), ``per_seed``, ``pareto``, ``backend``,
    ``settings``, ``data`` and ``code_version``.
    """
    features = list(features)
    subset = list(subset)
    if seeds < 1 or points < MIN_POINTS or restarts < 1 or workers < 1:
        raise ValueError(f"need seeds >= 1, points >= {MIN_POINTS}, restarts >= 1 and workers >= 1")
    if selection not in ("best", "score"):
        raise ValueError(f"unknown model selection {selection!r}: use 'best' or 'score'")
    settings = settings or SearchSettings()
    if settings.maxsize < 3:
        raise ValueError(f"maxsize must be at least 3, got {settings.maxsize}")
    X, y, data_info = load_table(table, target, features, subset)
    check_available(backend)
    config = {"backend": backend, "seeds": seeds, "points": points, "restarts": restarts, "selection": selection,
              "search": settings.to_dict()}
    # A seed's result depends on everything but the number of seeds: more seeds later reuse these.
    digest = hashlib.sha256(json.dumps([{k: v for k, v in config.items() if k != "seeds"},
                                        _data_hash(X, y)]).encode()).hexdigest()

    results: dict[int, dict] = {}
    resume = Path(resume_dir) if resume_dir else None
    if resume is not None and resume.is_dir():
        for seed in range(seeds):
            f = resume / f"seed_{seed}.json"
            if f.exists():
                try:
                    saved = json.loads(f.read_text())
                except (OSError, json.JSONDecodeError):
                    continue  # a torn file from before atomic writes, or a foreign one: recompute
                if saved.get("digest") == digest:
                    results[seed] = saved["result"]
    todo = [s for s in range(seeds) if s not in results]
    tasks = [(X, y, s, backend, points, restarts, selection, settings) for s in todo]
    bar = tqdm(total=seeds, initial=seeds - len(todo), desc=f"symbolic regression ({backend})", unit="seed",
               disable=not progress)

    def record(result):
        results[result["seed"]] = result
        if resume is not None:
            resume.mkdir(parents=True, exist_ok=True)
            write_json_atomic(resume / f"seed_{result['seed']}.json", {"digest": digest, "result": result})
        bar.update()

    if workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=get_context("spawn")) as pool:
            for result in pool.map(_fit_seed_task, tasks):
                record(result)
    else:
        for task in tasks:
            record(_fit_seed_task(task))
    bar.close()
    return _verdict([results[s] for s in range(seeds)], X, y, features, data_info, config)


def _data_hash(X: np.ndarray, y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(X).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()


def _verdict(per_seed: list[dict], X, y, features: list[str], data_info: dict, config: dict) -> dict:
    """The seeds vote on a form; the winner is refitted on all rows and judged."""
    symbols = placeholders(len(features))
    names = [str(s) for s in symbols]
    locals_ = {n: s for n, s in zip(names, symbols, strict=True)}
    exprs = [sympy.sympify(r["expression"], locals=locals_) for r in per_seed]
    forms = [laws.form(e, names) for e in exprs]
    votes = Counter(forms)
    errors = [r["error"] for r in per_seed]
    median_error = {f: float(np.median([e for e, g in zip(errors, forms, strict=True) if g == f])) for f in votes}
    winner = max(votes, key=lambda f: (votes[f], -median_error[f]))
    best = min((i for i, f in enumerate(forms) if f == winner), key=lambda i: per_seed[i]["error"])
    final = laws.polish(exprs[best], symbols, X, y)
    if laws.form(final.expr, names) != winner:  # refitting on all rows must not change the form that won
        final = laws.Candidate(laws.refit(exprs[best], symbols, X, y), per_seed[best]["complexity"], math.nan)
        final.error = laws.relative_l1(y, laws.evaluate(final.expr, symbols, X))

    def judged(expr):
        power = laws.power_law(expr, names)
        if power is not None:
            power["exponents"] = {f: power["exponents"][n] for f, n in zip(features, names, strict=True)}
        return power, laws.is_newtonian(power)

    rows = []
    for r, e in zip(per_seed, exprs, strict=True):
        power, newtonian = judged(e)
        rows.append({**r, "expression": _render(e, features), "power_law": power, "newtonian": newtonian,
                     "pareto": [{**c, "expression": _render(sympy.sympify(c["expression"], locals=locals_),
                                                            features)} for c in r["pareto"]]})
    power, newtonian = judged(final.expr)
    if power is not None:
        power["G_relative_error"] = (power["constant"] - laws.G_AU_MSUN_YR) / laws.G_AU_MSUN_YR if newtonian else None
    return {
        "expression": _render(final.expr, features),
        "newtonian": newtonian,
        "power_law": power,
        "error": final.error,
        "complexity": final.complexity,
        "seeds": len(per_seed),
        "seeds_agreeing": votes[winner],
        "majority": votes[winner] > len(per_seed) / 2,
        "newtonian_seeds": sum(r["newtonian"] for r in rows),
        "per_seed": rows,
        "pareto": rows[best]["pareto"],
        "backend": config["backend"],
        "settings": config,
        "data": data_info,
        "code_version": code_version(),
    }


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
