"""SRBench's Feynman problems for ``orbitlaw discover``'s symbolic regression used as a stand-alone tool.

What it measures: how often the toolkit's symbolic regression (:func:`orbitlaw.discovery.sr.symbolic.discover_law`,
Operon with the toolkit's polishing and held-out selection, default settings, one seed per fit) returns an
expression that is a *symbolic solution* of an equation of the AI Feynman main database (Udrescu & Tegmark
2020; the "Feynman" ground-truth problems of SRBench, La Cava et al. 2021), beside the per-equation rates
PhySO (Tenachi et al. 2023) published for the same problems and noise levels (``feynman_equations.py`` holds
the equations and those rates, with their sources). Beside them, six orbital laws in the toolkit's units (Kepler's
third law for two comparable masses, escape, circular and vis-viva speed, the Hill radius, Newton's force:
``feynman_equations.ORBITAL``), reported per law (``orbital_laws``) and kept out of the database's rates.

One cell is (equation, target noise, seed). It draws ``--rows`` (2,000) rows, each variable uniform on the
database's range, with ``numpy.random.default_rng(seed)``, computes y and adds SRBench's target noise,
``y + N(0, noise * sqrt(mean(y**2)))``, then fits once: ``DiscoverConfig(target=..., features=<variables>,
seeds=1, first_seed=seed, points=--points)``. The target column is named ``target`` (II.6.15a has a variable
``y``). The model is also scored on ``--test-rows`` (500) fresh noiseless rows (R^2), as SRBench scores its
test split.

The criterion (:func:`assess`; SRBench's ``experiment/assess_symbolic_model.py`` and ``symbolic_utils.py`` and
``postprocessing/collate_groundtruth_results.py``, restated, over positive symbols for the variables whose range
is positive, from 0 up, as all of the database's are: on that domain ``sqrt(M)/sqrt(r)`` is ``sqrt(M/r)``, which
sympy does not grant a symbol that may be negative, so a check over plain symbols calls such a model no
solution): a model is checked only when its test R^2 exceeds
0.5. In both expressions ``pi`` becomes 3.1415926535 and every float is rounded (below 1e-4 in size: 0; else to
3 decimals, kept at 3 significant digits); the model is then simplified. It is a symbolic solution when
``true - model`` simplifies to 0 or is a constant, or ``model / true`` is a constant (sympy's ``is_constant``),
and the simplified model is not 0 or nan. Before sympy is asked, a necessary condition is checked on the test
rows (:func:`numerically_far`): a model whose ratio to the truth and whose difference from it both vary by more
than 20% is no solution. Simplifying can take very long on a big expression: each check is
cut after ``--check-timeout`` s (SIGALRM) and then counts as not solved, recorded as ``"timeout"``.

The target, written before the first full run: at 1% noise, the expected number of equations solved
(the mean over seeds, summed over equations) is at least PhySO's expected number on the same equations (the
sum of its published per-equation rates), with a mean CPU time per fit of at most 2 s. The summary reports both
counts and says whether the target is met; a miss is reported as a miss.

Resumable: every finished cell is written (atomically) to ``<out>.partial/`` as it finishes and kept in the
output; a rerun reuses a cell when the code version, the dependency versions, the settings and the equation's
formula and ranges all match. ``--workers`` fits cells side by side in processes (spawn); each fit is
single-threaded, and its CPU time is the fit's own (``per_seed[0]["cpu_seconds"]``).

    python benchmarks/srbench.py --out benchmarks/results/srbench.json
    python benchmarks/srbench.py --equations feynman_I_12_1,feynman_II_6_15a --noise 0.01 --seeds 1 --workers 1
    python benchmarks/srbench.py --markdown --out benchmarks/results/srbench.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import shutil
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import feynman_equations as database
import numpy as np
import physo_results
import sympy
from srbench_criterion import CHECK_TIMEOUT, NUMERIC_FAR, assess, numerically_far, r2_score
from sympy.parsing.sympy_parser import auto_number, parse_expr
from tqdm import tqdm

from orbitlaw.discovery.sr import expression_text
from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law
from orbitlaw.discovery.sr.units import format_unit, parse_unit
from orbitlaw.orbits.workers import die_with_parent
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

EQUATIONS = {**database.EQUATIONS, **database.ORBITAL}
"""Every equation the benchmark knows: the AI Feynman database's 100 and the orbital laws beside it."""
TARGET = "target"  # the target column: no variable of the database is named so (II.6.15a has a ``y``)
NOISES = (0.0, 0.001, 0.01)
ROWS, TEST_ROWS, POINTS = 2000, 500, 1000
R2_GATE = 0.5  # SRBench checks a model symbolically only when its test R^2 exceeds this
FUNCTIONS = {"sqrt": sympy.sqrt, "exp": sympy.exp, "log": sympy.log, "sin": sympy.sin, "cos": sympy.cos,
             "tan": sympy.tan, "tanh": sympy.tanh, "asin": sympy.asin}
"""The functions the database's formulas use (``ln`` and ``arcsin`` already written ``log`` and ``asin``)."""
CRITERION = ("SRBench's, over positive symbols for the variables of positive range: checked only when test R^2 > 0.5 "
             "and model / true or true - model within 20% of a constant on the test rows; pi -> 3.1415926535 and "
             "floats rounded (|a| < 1e-4 -> 0, "
             "else Float(round(a, 3), 3)) in both, the model simplified; solved when true - model simplifies to 0 "
             "or is a constant, or model / true is a constant, and the simplified model is not 0 or nan")


# --- the equations ---------------------------------------------------------------------------------------

def variable_names(name: str) -> list[str]:
    return [v[0] for v in EQUATIONS[name]["variables"]]


def symbol_table(name: str) -> dict[str, sympy.Symbol]:
    """{variable name: Symbol} of one equation: ``gamma``, ``beta`` or ``I`` are plain symbols here. A variable
    whose range is positive is a positive symbol: on its domain ``sqrt(M)/sqrt(r)`` is ``sqrt(M/r)``, which sympy
    does not grant for a symbol that may be negative or complex (and so would call the ratio of the two not
    constant)."""
    return {v: sympy.Symbol(v, positive=True) if low >= 0 else sympy.Symbol(v)
            for v, low, _ in EQUATIONS[name]["variables"]}


def true_expression(name: str) -> sympy.Expr:
    """The equation's formula as sympy, parsed over an explicit table: its variables, :data:`FUNCTIONS` and
    ``pi``; any other name is a NameError (no automatic symbols, no sympy namespace)."""
    table = {**FUNCTIONS, "pi": sympy.pi, **symbol_table(name)}
    return parse_expr(EQUATIONS[name]["formula"], local_dict=table,
                      global_dict={"Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational},
                      transformations=(auto_number,))


def evaluate(expr: sympy.Expr, names: list[str], columns: dict) -> np.ndarray:
    """``expr`` on the columns (numpy), as float64 of the rows' length."""
    f = sympy.lambdify([sympy.Symbol(n) for n in names], expr, modules="numpy")
    with np.errstate(all="ignore"):
        values = np.asarray(f(*(columns[n] for n in names)), dtype=np.float64)
    return np.broadcast_to(values, np.shape(columns[names[0]])).copy()


def units_of(name: str) -> dict[str, str]:
    """{column: unit} of one equation for ``DiscoverConfig.units``: its variables' (:data:`database.UNITS`, or
    :data:`database.ORBITAL_UNITS` for an orbital law) and the target's, read off the formula by scaling: a base
    unit scaled by 2 scales the output by 2^k on every row. ValueError when that factor is not one integer power
    of 2 on every row (the formula is not dimensionally consistent with the table)."""
    table = database.ORBITAL_UNITS if name in database.ORBITAL else database.UNITS
    names = variable_names(name)
    powers = {n: parse_unit(table[n]) for n in names}
    columns = draw(name, 64, np.random.default_rng(0))
    expr = true_expression(name)
    base = evaluate(expr, names, columns)
    target = {}
    for dim in sorted({d for p in powers.values() for d in p}):
        scaled = {n: columns[n] * 2.0 ** powers[n].get(dim, 0) for n in names}
        with np.errstate(all="ignore"):
            k = np.log2(evaluate(expr, names, scaled) / base)
        if not (np.all(np.isfinite(k)) and np.allclose(k, np.round(k[0]), atol=1e-6)):
            raise ValueError(f"{name}: the formula is not dimensionally consistent in {dim} with these units")
        if round(k[0]):
            target[dim] = int(round(k[0]))
    return {**{n: table[n] for n in names}, TARGET: format_unit(target)}


def draw(name: str, rows: int, rng: np.random.Generator) -> dict:
    """``rows`` rows of the equation's variables, each uniform on its range (in the database's order)."""
    return {v: rng.uniform(low, high, rows) for v, low, high in EQUATIONS[name]["variables"]}


def cell_data(name: str, noise: float, seed: int, rows: int = ROWS, test_rows: int = TEST_ROWS):
    """(columns, noisy y, test columns, noiseless test y) of one cell: the rows from
    ``default_rng(seed)``, SRBench's target noise ``N(0, noise * sqrt(mean(y**2)))`` after them (so that a seed's
    rows are the same at every noise level), and the test rows from ``default_rng([seed, 1])``."""
    expr, names = true_expression(name), variable_names(name)
    rng = np.random.default_rng(seed)
    columns = draw(name, rows, rng)
    y = evaluate(expr, names, columns)
    y = y + rng.normal(0.0, noise * math.sqrt(float(np.mean(y**2))), rows)
    test = draw(name, test_rows, np.random.default_rng([seed, 1]))
    return columns, y, test, evaluate(expr, names, test)


# --- one cell --------------------------------------------------------------------------------------------

def judge(row: dict, test: dict, test_y: np.ndarray, timeout: float) -> None:
    """Score ``row["expression"]`` on the test rows and check it by SRBench's criterion, in place: ``r2_test``,
    ``check``, ``solved`` (and ``error`` "timeout" for a check cut short)."""
    name = row["equation"]
    names = variable_names(name)
    model = expression_text.parse(row["expression"], symbol_table(name))
    pred = evaluate(model, names, test)
    row["r2_test"] = r2_score(test_y, pred)
    row["solved"], row["error"] = False, None
    if row["r2_test"] > R2_GATE and not numerically_far(test_y, pred):
        row["check"] = assess(true_expression(name), model, timeout)
        row["solved"] = row["check"]["solved"]
        if row["check"]["timed_out"]:
            row["error"] = "timeout"
    elif row["r2_test"] <= R2_GATE:
        row["check"] = "not checked: test R^2 <= 0.5 (SRBench)"
    else:
        row["check"] = f"not checked: neither model / true nor true - model is within {NUMERIC_FAR:.0%} of a constant"


def recheck_cell(task: dict) -> dict:
    """Judge a finished cell's expression again by the current criterion (no new fit)."""
    row = dict(task["cell"])
    _, _, test, test_y = cell_data(row["equation"], row["noise"], row["seed"], task["rows"], task["test_rows"])
    try:
        judge(row, test, test_y, task["check_timeout"])
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:500]
    row["rechecked"] = True
    return row


def run_cell(task: dict) -> dict:
    """Fit one (equation, noise, seed) cell and judge it; never raises (an error is recorded in the cell)."""
    name, noise, seed = task["equation"], task["noise"], task["seed"]
    row = {"equation": name, "noise": noise, "seed": seed, "key": task["key"], "expression": None, "solved": False,
           "r2_test": None, "check": None, "cpu_seconds": None, "error": None}
    start = time.perf_counter()
    try:
        names = variable_names(name)
        columns, y, test, test_y = cell_data(name, noise, seed, task["rows"], task["test_rows"])
        law = discover_law({**columns, TARGET: y}, DiscoverConfig(
            target=TARGET, features=names, seeds=1, first_seed=seed, points=task["points"], tolerance=0.0,  # exact
            units=units_of(name) if task["units"] else None))
        row["expression"] = law["expression"]
        row["cpu_seconds"] = law["per_seed"][0]["cpu_seconds"]
        row["search_settings"] = law.get("settings")
        if not law["expression"]:
            raise ValueError("discover_law returned no expression")
        judge(row, test, test_y, task["check_timeout"])
    except Exception as exc:  # a benchmark records a failing cell and goes on
        row["error"] = f"{type(exc).__name__}: {exc}"[:500]
    row["wall_seconds"] = time.perf_counter() - start
    return row


# --- the run ---------------------------------------------------------------------------------------------

def cell_id(name: str, noise: float, seed: int) -> str:
    return f"{name}/{float(noise)!r}/{seed}"


def cell_key(run_key: str, name: str) -> str:
    """What a cell's result depends on: the run's key (code, dependencies, settings) and the equation's data."""
    record = EQUATIONS[name]
    text = json.dumps([run_key, record["formula"], [list(v) for v in record["variables"]]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def partial_dir(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def select(args) -> list[str]:
    names = list(EQUATIONS)
    if args.equations:
        wanted = [n.strip() for n in args.equations.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in EQUATIONS]
        if unknown:
            raise SystemExit(f"unknown equations: {', '.join(unknown)} (names as SRBench spells them, "
                             "e.g. feynman_I_12_1)")
        names = [n for n in names if n in wanted]
    if args.max_variables:
        names = [n for n in names if len(EQUATIONS[n]["variables"]) <= args.max_variables]
    if not names:
        raise SystemExit("no equation selected")
    return names


def load_cells(out: Path, keys: dict[str, str]) -> dict[str, dict]:
    """Finished cells of an earlier run (the output, then ``<out>.partial/``) whose key is the current one."""
    found = {}
    sources = []
    if out.exists():
        with contextlib.suppress(OSError, json.JSONDecodeError):
            sources.extend(json.loads(out.read_text()).get("cells", {}).values())
    if partial_dir(out).is_dir():
        for f in sorted(partial_dir(out).glob("*.json")):
            with contextlib.suppress(OSError, json.JSONDecodeError):
                sources.append(json.loads(f.read_text()))
    for cell in sources:
        if isinstance(cell, dict) and keys.get(cell.get("equation")) == cell.get("key"):
            found[cell_id(cell["equation"], cell["noise"], cell["seed"])] = cell
    return found


def summarise(cells: dict, names: list[str], noises: list[float], seeds: list[int]) -> dict:
    """Per noise level, over the database's equations: equations solved (expected count: the mean over seeds, summed
    over equations), the rate, the same on the equations PhySO has a rate for beside PhySO's expected count there,
    CPU time per fit; and each orbital law's solved seeds k/n (``orbital_laws``)."""
    summary = {}
    orbital = [n for n in names if n in database.ORBITAL]
    names = [n for n in names if n in database.EQUATIONS]  # the database's rates are over its equations only
    for noise in noises:
        per_eq, cpu, errors, timeouts = {}, [], 0, 0
        for name in names:
            rows = [cells[c] for s in seeds if (c := cell_id(name, noise, s)) in cells]
            if rows:
                per_eq[name] = sum(r["solved"] for r in rows) / len(rows)
            cpu += [r["cpu_seconds"] for r in rows if r["cpu_seconds"] is not None]
            errors += sum(r["error"] is not None and r["error"] != "timeout" for r in rows)
            timeouts += sum(r["error"] == "timeout" for r in rows)
        physo = {n: physo_results.PHYSO_RATES[n][noise] for n in per_eq
                 if n in physo_results.PHYSO_RATES and noise in physo_results.PHYSO_RATES[n]}
        summary[repr(float(noise))] = {
            "equations": len(per_eq), "solved_expected": sum(per_eq.values()),
            "rate": sum(per_eq.values()) / len(per_eq) if per_eq else None,
            "physo_equations": len(physo),
            "solved_expected_on_physo_equations": sum(per_eq[n] for n in physo),
            "rate_on_physo_equations": sum(per_eq[n] for n in physo) / len(physo) if physo else None,
            "physo_solved_expected": sum(physo.values()) if physo else None,
            "physo_rate": sum(physo.values()) / len(physo) if physo else None,
            "fits": len(cpu), "cpu_seconds_per_fit_mean": float(np.mean(cpu)) if cpu else None,
            "cpu_seconds_per_fit_max": float(np.max(cpu)) if cpu else None,
            "errors": errors, "check_timeouts": timeouts}
        entry = summary[repr(float(noise))]
        entry["orbital_laws"] = {n: f"{sum(cells[c]['solved'] for c in ids)}/{len(ids)}" for n in orbital
                                 if (ids := [c for s in seeds if (c := cell_id(n, noise, s)) in cells])}
        entry["at_least_physo"] = (None if entry["physo_solved_expected"] is None
                                   else entry["solved_expected_on_physo_equations"] >= entry["physo_solved_expected"])
    return summary


def plot(summary: dict, path: Path, units: bool = False) -> None:
    """The solution rate per noise level beside PhySO's; ``units``: the fits were given the columns' units."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(summary)
    x = np.arange(len(levels))
    fig, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
    ours = [summary[k]["rate_on_physo_equations"] for k in levels]
    physo = [summary[k]["physo_rate"] for k in levels]
    n = max((summary[k]["physo_equations"] for k in levels), default=0)
    name = "orbitlaw discover --units" if units else "orbitlaw discover"
    ax.plot(x, [np.nan if v is None else v for v in ours], "o-", label=f"{name} (1 fit per seed, {n} eq.)")
    ax.plot(x, [np.nan if v is None else v for v in physo], "s--", label=f"PhySO (published, same {n} eq.)")
    ax.set_xticks(x, levels)
    ax.set_xlabel("target noise (SRBench: std = noise x RMS(y))")
    ax.set_ylabel("symbolic-solution rate")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("AI Feynman database, SRBench criterion")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(result: dict) -> str:
    """Per equation: the formula, our solved seeds k/n at each noise level and PhySO's published rate."""
    cells, sel = result["cells"], result["selection"]
    noises, seeds = sel["noise"], sel["seeds"]
    lines = ["| equation | formula | " + " | ".join(f"orbitlaw {n:g}" for n in noises) + " | "
             + " | ".join(f"PhySO {n:g}" for n in noises) + " |", "|---|---|" + "---|" * (2 * len(noises))]
    for name in sel["equations"]:
        ours = []
        for noise in noises:
            rows = [cells[c] for s in seeds if (c := cell_id(name, noise, s)) in cells]
            ours.append(f"{sum(r['solved'] for r in rows)}/{len(rows)}" if rows else "–")
        rates = physo_results.PHYSO_RATES.get(name, {})
        physo = [f"{rates[n]:.1f}" if n in rates else "–" for n in noises]
        lines.append(f"| {name} | `{EQUATIONS[name]['formula']}` | " + " | ".join(ours) + " | "
                     + " | ".join(physo) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--equations", default=None, help="comma-separated names (feynman_I_12_1,...); default all")
    parser.add_argument("--max-variables", type=int, default=None, help="only equations of at most K variables")
    parser.add_argument("--noise", default=",".join(f"{n:g}" for n in NOISES), help="target noise levels")
    parser.add_argument("--seeds", type=int, default=2, help="N seeds, one fit each, from --first-seed")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (a replication on seeds unused in design: --first-seed 2)")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--test-rows", type=int, default=TEST_ROWS)
    parser.add_argument("--points", type=int, default=POINTS, help="DiscoverConfig.points")
    parser.add_argument("--check-timeout", type=float, default=CHECK_TIMEOUT, help="seconds per symbolic check")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--units", action="store_true",
                        help="give the fit every column's units (DiscoverConfig.units: dimensional analysis first), "
                             "as PhySO is given them")
    parser.add_argument("--out", default=None,
                        help="default benchmarks/results/srbench.json (srbench_units.json with --units)")
    parser.add_argument("--figure", default=None, help="default: --out with .png")
    parser.add_argument("--markdown", action="store_true", help="print the per-equation table of --out; run nothing")
    parser.add_argument("--recheck", action="store_true",
                        help="judge the finished cells of --out again by the current criterion, fitting nothing")
    args = parser.parse_args()
    out = Path(args.out or f"benchmarks/results/srbench{'_units' if args.units else ''}.json")
    if args.markdown:
        print(markdown(json.loads(out.read_text())))
        return

    if args.seeds < 1 or args.first_seed < 0:
        parser.error(f"--seeds must be >= 1 and --first-seed >= 0 (got {args.seeds} and {args.first_seed})")
    names = select(args)
    noises = [float(n) for n in args.noise.split(",") if n.strip()]
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    settings = {"rows": args.rows, "test_rows": args.test_rows, "points": args.points,
                "check_timeout": args.check_timeout, "r2_gate": R2_GATE, "target": TARGET,
                "noise_model": "y + N(0, noise * sqrt(mean(y**2)))", "fit": "discover_law, seeds=1, first_seed=seed"}
    if args.units:  # only when given, so that the run key (and the cells) of a run without units stay as they were
        settings["units"] = "feynman_equations.UNITS and ORBITAL_UNITS, the target's by scaling (units_of)"
    version, deps = code_version(), dependency_versions()
    run_key = hashlib.sha256(json.dumps([settings, version, deps], sort_keys=True).encode()).hexdigest()[:16]
    keys = {n: cell_key(run_key, n) for n in EQUATIONS}
    cells = load_cells(out, keys)
    todo = [{"equation": n, "noise": z, "seed": s, "key": keys[n], **{k: settings[k] for k in
             ("rows", "test_rows", "points", "check_timeout")}, "units": args.units}
            for n in names for z in noises for s in seeds if cell_id(n, z, s) not in cells]
    reused = len(names) * len(noises) * len(seeds) - len(todo)
    worker = run_cell
    if args.recheck:  # judge the finished cells again by the current criterion; fit nothing
        todo = [{"cell": c, **{k: settings[k] for k in ("rows", "test_rows", "check_timeout")}}
                for c in cells.values() if c["equation"] in names and c["noise"] in noises and c["seed"] in seeds
                and c.get("expression")]
        worker = recheck_cell
    partial = partial_dir(out)
    start = time.perf_counter()

    def record(row: dict) -> None:
        cells[cell_id(row["equation"], row["noise"], row["seed"])] = row
        partial.mkdir(parents=True, exist_ok=True)
        write_json_atomic(partial / f"{row['equation']}__{row['noise']!r}__{row['seed']}.json", row)
        bar.set_postfix_str(f"{row['equation']} {'solved' if row['solved'] else 'not solved'}"
                            f"{' (' + row['error'][:40] + ')' if row['error'] else ''}")
        bar.update()

    bar = tqdm(total=len(todo), desc="srbench cells", unit="fit")
    if args.workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=min(args.workers, len(todo)), mp_context=get_context("spawn"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            for future in as_completed([pool.submit(worker, t) for t in todo]):
                record(future.result())
    else:
        for task in todo:
            record(worker(task))
    bar.close()

    summary = summarise(cells, names, noises, seeds)
    figure = Path(args.figure) if args.figure else out.with_suffix(".png")
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot(summary, figure, units=args.units)
    search = next((c.get("search_settings") for c in cells.values() if c.get("search_settings")), None)
    result = {
        "benchmark": "srbench-feynman", "settings": {**settings, "workers": args.workers, "discover": search},
        "selection": {"equations": names, "noise": noises, "seeds": seeds},
        "code_version": version, "dependency_versions": deps, "run_key": run_key,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()},
        "physo_source": physo_results.PHYSO_SOURCE, "criterion": CRITERION,
        "cells_reused": reused, "cells_computed": len(todo), "wall_seconds_this_run": time.perf_counter() - start,
        "summary": summary, "figure": figure.name, "cells": dict(sorted(cells.items()))}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    shutil.rmtree(partial, ignore_errors=True)  # every cell is in the output now, where a rerun finds it
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
