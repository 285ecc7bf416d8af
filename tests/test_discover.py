"""Symbolic regression and the law verdict (discovery.sr.law, discovery.sr.symbolic, ``orbitlaw discover``)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import sympy

from orbitlaw.cli import main
from orbitlaw.discovery.sr import choice
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr.backends import SearchSettings
from orbitlaw.discovery.sr.symbolic import discover_law, partial_dir
from orbitlaw.discovery.sr.verdict import form_grade

G = 4 * math.pi**2
r, m1, m2 = sympy.symbols("r m1 m2")
NAMES = ["r", "m1", "m2"]
FAST = SearchSettings(budget=10_000)


def table(law, n=1500, noise=0.0, seed=0) -> dict:
    """Two-body-like data: r log-uniform in [0.3, 40] AU, masses U(1e-4, 1.01e-2) Msun."""
    rng = np.random.default_rng(seed)
    cols = {"r": np.exp(rng.uniform(np.log(0.3), np.log(40.0), n)), "m1": rng.uniform(1e-4, 1.01e-2, n),
            "m2": rng.uniform(1e-4, 1.01e-2, n)}
    cols["F"] = law(cols["r"], cols["m1"], cols["m2"]) * (1 + noise * rng.standard_normal(n))
    return cols


def newton(r_, a, b):
    return G * a * b / r_**2


# --- the verdict is decided by the form -------------------------------------------------------------

@pytest.mark.parametrize("expr, exponents", [
    (G * m1 * m2 / r**2, (-2, 1, 1)),
    (3.0 * m2 * m1 * r**-2, (-2, 1, 1)),
    ((2.0 * m1) / (0.5 * r) * (m2 / (4.0 * r)), (-2, 1, 1)),
    (G * m1**2 * m2 / r, (-1, 2, 1)),
    (7.5 * m1 / r**3, (-3, 1, 0)),
    (sympy.powsimp(2.0 * m1**1.5 * m2**1.5, force=True) / r, (-1, 1.5, 1.5)),  # (m1*m2)**1.5 / r
])
def test_power_law_reads_constant_and_exponents(expr, exponents):
    p = choice.power_law(expr, NAMES)
    assert p is not None and tuple(p["exponents"][k] for k in NAMES) == exponents
    assert (form_grade(p) == "newtonian") == (exponents == (-2, 1, 1))
    assert math.isclose(p["constant"], float(expr.subs({r: 1, m1: 1, m2: 1})), rel_tol=1e-12)


@pytest.mark.parametrize("expr", [
    G * m1 * m2 / r**2 * sympy.exp(-r / 5),
    G * m1 * m2 / (r**2 + 1),
    G * m1 * m2 / r**2 + 1e-3,
    G * m1 * m2 * sympy.sin(r) / r**2,
    G * m1 * m2 / r**2 * sympy.Symbol("t"),
])
def test_non_power_laws_are_never_newtonian_however_well_they_fit(expr):
    assert choice.power_law(expr, NAMES) is None
    assert form_grade(choice.power_law(expr, NAMES)) == "not-a-power-law"


def test_polish_refits_constants_and_drops_unsupported_terms():
    data = table(newton)
    X = np.column_stack([data[k] for k in NAMES])
    syms = [r, m1, m2]
    # a backend's raw answer: wrong constant, a 1e-12 intercept and a useless exp(1e-9 r) factor
    raw = 35.0 * m1 * m2 / r**2 * sympy.exp(1e-9 * r) + 1e-12
    c = laws.polish(raw, syms, X, data["F"])
    assert form_grade(choice.power_law(c.expr, NAMES)) == "newtonian", c.expr
    assert math.isclose(choice.power_law(c.expr, NAMES)["constant"], G, rel_tol=1e-9)
    assert c.error < 1e-9 and c.complexity == 7
    # a term the data needs is kept: an exponential cut-off survives polishing
    cut = table(lambda a, b, d: newton(a, b, d) * np.exp(-a / 5))
    c = laws.polish(30.0 * m1 * m2 / r**2 * sympy.exp(-0.3 * r), syms, X, cut["F"])
    assert c.expr.has(sympy.exp) and choice.power_law(c.expr, NAMES) is None and c.error < 1e-9


def test_pareto_scores_and_selection():
    cands = [laws.Candidate(sympy.Symbol("a"), 3, 1.0), laws.Candidate(sympy.Symbol("b"), 5, 0.1),
             laws.Candidate(sympy.Symbol("c"), 7, 1e-3), laws.Candidate(sympy.Symbol("d"), 9, 0.9e-3),
             laws.Candidate(sympy.Symbol("e"), 9, 0.5)]  # dominated
    front = choice.pareto(cands)
    assert [c.complexity for c in front] == [3, 5, 7, 9]
    assert math.isclose(front[2].score, math.log(100) / 2)
    assert choice.choose(front, "score").complexity == 7
    assert choice.choose(front, "best").complexity == 7  # within 1.5x of the best error, highest score
    # when the steepest drop leads to a model far worse than the best, "best" does not take it
    front = choice.pareto([laws.Candidate(sympy.Symbol("a"), 3, 1.0), laws.Candidate(sympy.Symbol("b"), 4, 1e-3),
                         laws.Candidate(sympy.Symbol("c"), 12, 1e-6)])
    assert choice.choose(front, "score").complexity == 4
    assert choice.choose(front, "best").complexity == 12


# --- the search ----------------------------------------------------------------------------------------

def test_recovers_newton_from_noisy_data_and_is_reproducible():
    data = table(newton, noise=0.01)
    out = discover_law(data, "F", seeds=2, points=500, restarts=1, settings=FAST)
    assert out["newtonian"] and out["seeds_agreeing"] == 2 and out["newtonian_seeds"] == 2
    assert out["power_law"]["exponents"] == {"r": -2, "m1": 1, "m2": 1}
    assert abs(out["power_law"]["constant"] - G) / G < 0.01
    assert out["expression"] == str(sympy.sympify(out["expression"]))  # a sympy string in the feature names
    again = discover_law(data, "F", seeds=2, points=500, restarts=1, settings=FAST)
    assert [s["expression"] for s in again["per_seed"]] == [s["expression"] for s in out["per_seed"]]


def test_other_power_law_comes_back_with_its_exponents():
    out = discover_law(table(lambda a, b, d: G * b * d / a**3), "F", seeds=1, points=500, restarts=1)
    assert out["power_law"]["exponents"] == {"r": -3, "m1": 1, "m2": 1} and not out["newtonian"]


def test_exponential_cutoff_is_not_newtonian():
    out = discover_law(table(lambda a, b, d: newton(a, b, d) * np.exp(-a / 5)), "F", seeds=1, points=500,
                       restarts=2, settings=FAST)
    assert not out["newtonian"] and out["newtonian_seeds"] == 0


# --- the command -----------------------------------------------------------------------------------------

@pytest.fixture
def csv(tmp_path):
    data = table(newton, n=800)
    data["F_pred"] = data.pop("F")
    data["near_train"] = np.arange(800) % 4 != 0
    path = tmp_path / "predictions.csv"
    pd.DataFrame(data).to_csv(path, index=False)
    return path


def test_cli_writes_law_and_figure(csv, tmp_path, capsys):
    df = pd.read_csv(csv)
    df.loc[:9, "F_pred"] = np.nan
    df.loc[10:12, "r"] = np.inf
    df.to_csv(csv, index=False)
    out = tmp_path / "law" / "LAW.json"
    assert main(["discover", "--input", str(csv), "--target", "F_pred", "--seeds", "2", "--restarts", "1",
                 "--points", "300", "--budget", "10000", "--subset", "near_train", "--workers", "1",
                 "--out", str(out)]) == 0
    law = json.loads(out.read_text())
    assert law["newtonian"] is True and law["power_law"]["exponents"] == {"r": -2, "m1": 1, "m2": 1}
    # rows with index % 4 == 0 are outside the subset: 7 NaN targets and 2 infinite r fall inside it
    assert law["data"]["rows_used"] == 600 - 9 and law["data"]["dropped_nonfinite"] == 9
    assert {"expression", "newtonian", "power_law", "per_seed", "pareto", "backend", "settings",
            "code_version"} <= set(law)
    assert len(law["per_seed"]) == 2 and all({"expression", "error", "complexity", "newtonian"} <= set(s)
                                             for s in law["per_seed"])
    assert (tmp_path / "law" / "LAW.pareto.png").stat().st_size > 10_000
    assert not partial_dir(out).exists()
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["newtonian"] is True


def test_cli_judges_the_law_of_the_quantity_it_is_told(csv, tmp_path):
    """``--quantity acceleration``: Newton's acceleration has no planet mass, so the force's law is not it."""
    out = tmp_path / "LAW.json"
    assert main(["discover", "--input", str(csv), "--target", "F_pred", "--seeds", "1", "--restarts", "1",
                 "--points", "300", "--budget", "10000", "--workers", "1", "--quantity", "acceleration",
                 "--out", str(out)]) == 0
    law = json.loads(out.read_text())
    assert law["settings"]["quantity"] == "acceleration"
    assert law["power_law"]["exponents"] == {"r": -2, "m1": 1, "m2": 1}
    assert law["verdict"] == "power-law" and not law["newtonian"]


@pytest.mark.parametrize("change, args, message", [
    (None, ["--target", "F_perd"], "column 'F_perd' not found; did you mean 'F_pred'?"),
    (None, ["--features", "r,m1,mass2"], "column 'mass2' not found"),
    (None, ["--subset", "r"], "must be boolean"),
    (lambda df: df.assign(F_pred=3.0), [], "is constant"),
    (lambda df: df.head(15), [], "only 15 usable rows"),
    (lambda df: df.assign(F_pred=np.nan), [], "only 0 usable rows"),
    (lambda df: df.assign(m1="heavy"), [], "column 'm1' is not numeric"),
    (None, ["--backend", "pysr"], "pysr"),
    (None, ["--seeds", "0"], "--seeds must be >= 1, got 0"),
    (None, ["--seeds", "100000"], "--seeds must be <= 10,000"),
    (None, ["--budget", "100000000000000"], "--budget must be <= 100,000,000 (a search of 1e8 evaluations takes hours"),
    (None, ["--maxsize", "5000"], "--maxsize must be <= 200"),
    (None, ["--tolerance", "-0.1"], "tolerance must be a fraction in [0, 1)"),
    (None, ["--tolerance", "0.01", "--selection", "best"], "a tolerance applies to the 'se' selection only"),
    (None, ["--tolerance", "0.01", "--protocol", "reference"], "a tolerance applies to the 'se' selection only"),
    (None, ["--units", "r=AU,m1"], "--units must be COL=UNIT pairs separated by commas, got 'm1'"),
    (None, ["--units", "r=AU,m1=Msun,m2=Msun"], "--units: no unit for F_pred"),
    (None, ["--units", "r=AU,m1=Msun,m2=Msun,r=m,F_pred=Msun"], "--units gives column 'r' twice"),
    (lambda df: df.assign(r=df["r"] * 0), ["--units", "r=AU,m1=Msun,m2=Msun,F_pred=Msun/AU^2"],
     "is not finite on 800 of 800 rows"),
    (None, ["--units", "r=AU,m1=Msun,m2=Msun,F_pred=kg"], "the target 'F_pred' (kg) is not a product of powers"),
    (None, ["--units", "r=A.U.,m1=Msun,m2=Msun,F_pred=Msun"], "cannot read 'A.U.'"),
    (None, ["--units", "r=AU,m1=Msun,m2=Msun,F_pred=Msun", "--protocol", "reference"],
     "--units applies to the orbitlaw protocol only"),
])
def test_cli_bad_input_is_one_line_and_writes_nothing(csv, tmp_path, capsys, change, args, message):
    if change is not None:
        change(pd.read_csv(csv)).to_csv(csv, index=False)
    out = tmp_path / "LAW.json"
    target = [] if "--target" in args else ["--target", "F_pred"]
    assert main(["discover", "--input", str(csv), "--out", str(out), *target, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == [csv]


def test_missing_input_file(tmp_path, capsys):
    assert main(["discover", "--input", str(tmp_path / "no.csv"), "--target", "F", "--out",
                 str(tmp_path / "L.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_killed_run_resumes_with_the_same_result(csv, tmp_path):
    args = ["--input", str(csv), "--target", "F_pred", "--seeds", "3", "--restarts", "1", "--points", "200",
            "--budget", "3000", "--workers", "1"]
    reference = tmp_path / "ref" / "LAW.json"
    assert main(["discover", *args, "--out", str(reference)]) == 0
    out = tmp_path / "run" / "LAW.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "orbitlaw", "discover", *args, "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (partial_dir(out) / "seed_0.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists() and (partial_dir(out) / "seed_0.json").exists()
    assert main(["discover", *args, "--out", str(out)]) == 0
    a, b = json.loads(reference.read_text()), json.loads(out.read_text())
    strip = ("seconds", "cpu_seconds")
    assert [{k: v for k, v in s.items() if k not in strip} for s in a["per_seed"]] == \
        [{k: v for k, v in s.items() if k not in strip} for s in b["per_seed"]]
    assert a["expression"] == b["expression"] and a["newtonian"] == b["newtonian"]


def test_polishing_is_deterministic_within_a_process():
    """The same expression polished on the same rows gives the same constants on every call. Levenberg-
    Marquardt through scipy 1.17's MINPACK did not (5 of 5 repeats differed here), which made two identical
    studies write different laws; the refit uses trust-region reflective instead."""
    from orbitlaw.discovery.sr.backends import placeholders

    rng = np.random.default_rng(3)
    n = 300
    X = np.column_stack([np.exp(rng.uniform(np.log(0.3), np.log(40), n)), rng.uniform(1e-4, 1.01e-2, n),
                         rng.uniform(1e-4, 1.01e-2, n)])
    r, m1, m2 = symbols = placeholders(3)
    y = 39.48 * X[:, 1] * X[:, 2] / X[:, 0] ** 2 * np.exp(0.3 * rng.standard_normal(n))
    F = sympy.Float
    exprs = [F(0.0285) * m1 / r * (F(9.48) * sympy.cos(sympy.cos(sympy.exp(F(-708.11) * m1))) - F(4.4467)),
             F(30.0) * m1 * m2 / r**2 * sympy.exp(F(0.1) * sympy.sin(F(300.0) * m2)),
             F(1.3) * m1 / r * sympy.exp(sympy.exp(F(-12.5) * r))]
    runs = [[sympy.srepr(laws.polish(e, symbols, X, y, "log").expr) for e in exprs] for _ in range(6)]
    assert all(run == runs[0] for run in runs[1:])


def test_worker_seeds_share_one_pool_and_match_one_process(monkeypatch):
    # a study runs many short searches: their seeds go to one pool kept for the process (its workers start once),
    # with the result of one process; a failed search drops the pool, so no queued seed outlives it
    from orbitlaw.orbits import workers

    data = table(newton, n=600, noise=0.01)
    common = dict(features=NAMES, seeds=2, points=200, settings=SearchSettings(budget=2000))
    one = discover_law(data, "F", workers=1, **common)
    two = discover_law(data, "F", workers=2, **common)
    pool = workers.shared_pool(2)

    def seeds(law):  # each seed's result, less how long it took
        return [{k: v for k, v in s.items() if k not in ("seconds", "cpu_seconds")} for s in law["per_seed"]]
    assert seeds(discover_law(data, "F", workers=2, **common)) == seeds(two) == seeds(one)
    assert workers.shared_pool(2) is pool  # the same workers served both runs
    for key in ("expression", "verdict", "power_law"):
        assert two[key] == one[key], key
    from orbitlaw.discovery.sr import symbolic

    monkeypatch.setattr(symbolic, "fit_seed_task", lambda task: task)  # cannot reach a worker: the search fails
    with pytest.raises(Exception, match="pickle"):
        discover_law(data, "F", workers=2, **common)
    assert workers.shared_pool(2) is not pool  # the failed run's pool was dropped: the next one starts anew
