"""The SRBench Feynman benchmark (benchmarks/srbench.py): its equation table, SRBench's symbolic-solution
criterion, and one tiny end-to-end run with its resume. The benchmark's numbers are not asserted here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import feynman_equations as database  # noqa: E402
import physo_results  # noqa: E402
import srbench  # noqa: E402
import srbench_criterion  # noqa: E402

from orbitlaw.discovery.sr import expression_text  # noqa: E402


def test_the_table_has_the_hundred_equations_once_each():
    source = (ROOT / "benchmarks" / "feynman_equations.py").read_text()
    table = source[source.index("EQUATIONS = {"):source.index("ORBITAL = {")]
    keys = re.findall(r'^    "(feynman_\w+)":', table, re.M)
    assert len(keys) == len(set(keys)) == len(database.EQUATIONS) == 100  # no record silently overwritten
    assert keys[0] == "feynman_I_6_2a" and keys[-1] == "feynman_III_21_20"
    assert sorted(r["number"] for r in database.EQUATIONS.values()) == list(range(1, 101))


@pytest.mark.parametrize("name", list(srbench.EQUATIONS))
def test_every_formula_parses_and_is_finite_on_its_ranges(name):
    names = srbench.variable_names(name)
    assert len(names) == len(set(names)) and srbench.TARGET not in names
    expr = srbench.true_expression(name)
    assert expr.free_symbols == set(srbench.symbol_table(name).values())  # every variable a plain Symbol
    for v, low, high in srbench.EQUATIONS[name]["variables"]:
        assert low < high, v
    columns = srbench.draw(name, 100, np.random.default_rng(0))
    y = srbench.evaluate(expr, names, columns)
    assert y.shape == (100,) and np.isfinite(y).all()


def test_the_orbital_laws_hold_at_the_earth():
    """In AU, yr and M_sun: the Earth's period is 1 yr, its circular speed 2 pi AU/yr, escape speed sqrt(2) times
    that; vis-viva at r = a is the circular speed."""
    at = {"a": 1.0, "M": 1.0, "m": 0.0, "r": 1.0, "m1": 3e-6, "m2": 1.0}

    def value(name):
        expr = srbench.true_expression(name)
        return float(expr.subs({s: at[str(s)] for s in expr.free_symbols}))
    assert value("kepler_third_law") == pytest.approx(1.0)
    assert value("circular_velocity") == pytest.approx(2 * np.pi)
    assert value("escape_velocity") == pytest.approx(2 * np.pi * np.sqrt(2))
    assert value("vis_viva") == pytest.approx(2 * np.pi)
    assert value("newton_gravity") == pytest.approx(4 * np.pi**2 * 3e-6)
    assert set(database.ORBITAL).isdisjoint(database.EQUATIONS) and set(database.ORBITAL) <= set(srbench.EQUATIONS)


def test_sympy_names_are_symbols_through_the_table():
    assert not isinstance(sympy.sympify("gamma"), sympy.Symbol)  # why the table is needed
    expr = srbench.true_expression("feynman_II_13_17")  # a variable named I, not the imaginary unit
    assert sympy.Symbol("I", positive=True) in expr.free_symbols and not expr.has(sympy.I)
    assert sympy.Symbol("beta", positive=True) in srbench.true_expression("feynman_III_17_37").free_symbols


def test_roots_split_or_merged_are_the_same_solution_on_positive_ranges():
    """sqrt(M)/sqrt(r) is sqrt(M/r) for M, r > 0 (every range of the table): a fitted speed of a circular orbit
    written either way is a solution, and a wrong exponent is not."""
    table = srbench.symbol_table("circular_velocity")
    true = srbench.true_expression("circular_velocity")
    for text in ("6.2814*sqrt(M)/sqrt(r)", "6.2814*sqrt(M/r)"):
        assert srbench_criterion.symbolic_solution(true, expression_text.parse(text, table)), text
    assert not srbench_criterion.symbolic_solution(true, expression_text.parse("6.2814*M/sqrt(r)", table))


def test_physo_rates_are_fractions_of_table_equations():
    assert len(physo_results.PHYSO_RATES) == 97
    for name, rates in physo_results.PHYSO_RATES.items():
        assert name in database.EQUATIONS
        assert set(rates) <= {0.0, 0.001, 0.01, 0.1} and {0.0, 0.001, 0.01} <= set(rates)
        assert all(0.0 <= r <= 1.0 for r in rates.values())
    assert "commit" in physo_results.PHYSO_SOURCE and "results_summary.csv" in physo_results.PHYSO_SOURCE


x, y, z = sympy.symbols("x y z")
TRUE = x**2 * y / z


@pytest.mark.parametrize("model, solved", [
    (x**2 * y / z, True),                     # exactly equal
    (1.0 * x**2 * y / z + 2.5, True),         # a constant offset
    (3.7 * x**2 * y / z, True),               # a constant factor
    (0.99999 * x**2 * y / z, True),           # equal after SRBench's rounding
    (x**3 * y / z, False),                    # a wrong exponent
    (x**2 * y, False),                        # a missing variable
    (x**2 * y / z + 0.3 * x, False),          # an extra term
    (sympy.Integer(0), False),                # the zero model (ratio 0 is a constant, yet not a solution)
])
def test_symbolic_solution_on_known_cases(model, solved):
    assert srbench_criterion.symbolic_solution(TRUE, model) is solved


def test_symbolic_solution_with_a_sympy_name_as_variable():
    true = srbench.true_expression("feynman_I_39_11")  # 1/(gamma-1)*pr*V
    table = srbench.symbol_table("feynman_I_39_11")
    assert srbench_criterion.symbolic_solution(true, expression_text.parse("-1.0*V*pr/(1 - gamma)", table))
    assert not srbench_criterion.symbolic_solution(true, expression_text.parse("V*pr/gamma", table))
    # the database's pi is 3.1415926535 to SRBench: a fitted 1/(2*pi) coefficient is the same law
    true = srbench.true_expression("feynman_II_13_17")
    model = expression_text.parse("0.159154943091895*I/(c**2*epsilon*r)", srbench.symbol_table("feynman_II_13_17"))
    assert srbench_criterion.symbolic_solution(true, model)


def test_a_check_that_runs_too_long_is_not_solved():
    big = sum(sympy.sin(k * x + y) ** k * sympy.exp(x / (k + y)) for k in range(1, 25))
    out = srbench_criterion.assess(big, big + x * sympy.cos(y) ** 7, timeout=0.3)
    assert out["timed_out"] and not out["solved"]


def test_one_easy_equation_end_to_end_and_resume(tmp_path):
    out = tmp_path / "srbench.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "srbench.py"), "--equations", "feynman_I_12_1", "--noise", "0",
           "--seeds", "1", "--workers", "1", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp_path)
    result = json.loads(out.read_text())
    (cell,) = result["cells"].values()
    assert cell["equation"] == "feynman_I_12_1" and cell["noise"] == 0.0 and cell["seed"] == 0
    assert cell["error"] is None and cell["solved"] is True and cell["cpu_seconds"] > 0
    assert srbench_criterion.symbolic_solution(srbench.true_expression("feynman_I_12_1"),
                                     expression_text.parse(cell["expression"], srbench.symbol_table("feynman_I_12_1")))
    summary = result["summary"]["0.0"]
    assert summary["equations"] == 1 and summary["solved_expected"] == 1 and summary["physo_solved_expected"] == 1.0
    assert result["cells_computed"] == 1 and (tmp_path / "srbench.png").exists()
    assert result["code_version"] and "sympy" in result["dependency_versions"]
    assert not (tmp_path / "srbench.json.partial").exists()

    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp_path)
    again = json.loads(out.read_text())
    assert again["cells_computed"] == 0 and again["cells_reused"] == 1
    assert again["cells"] == result["cells"]

    table = subprocess.run([*cmd, "--markdown"], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert "| feynman_I_12_1 | `mu*Nn` | 1/1 | 1.0 |" in table

    # a replication on an unused seed adds its cell beside the first run's, which it reuses
    subprocess.run([*cmd[:-2], "--seeds", "2", "--out", str(out)], check=True, capture_output=True, cwd=tmp_path)
    both = json.loads(out.read_text())
    assert both["cells_computed"] == 1 and both["cells_reused"] == 1 and both["selection"]["seeds"] == [0, 1]
    subprocess.run([*cmd, "--first-seed", "1"], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert json.loads(out.read_text())["selection"]["seeds"] == [1]
    bad = subprocess.run([*cmd, "--seeds", "0"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "--seeds must be >= 1" in bad.stderr


def test_every_formula_is_dimensionally_consistent_with_the_units_table():
    """srbench --units: each formula's output scales by one integer power per base unit on every row; a table that
    makes a formula inconsistent is refused by name."""
    assert set(database.UNITS) == {v[0] for e in database.EQUATIONS.values() for v in e["variables"]}
    for name in srbench.EQUATIONS:
        srbench.units_of(name)
    assert srbench.units_of("feynman_I_10_7")["target"] == "kg"
    assert srbench.units_of("kepler_third_law")["target"] == "yr"
    assert srbench.units_of("feynman_I_12_2")["target"] == "kg m s^-2"


def test_an_inconsistent_units_table_is_refused(monkeypatch):
    monkeypatch.setitem(database.UNITS, "v", "m")  # m_0 / sqrt(1 - v**2/c**2) with v a length
    with pytest.raises(ValueError, match="feynman_I_10_7: the formula is not dimensionally consistent in s "):
        srbench.units_of("feynman_I_10_7")
