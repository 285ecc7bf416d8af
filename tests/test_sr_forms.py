"""Laws as physicists write them (discovery.sr): the square root in the search, the raw target searched beside the
departure from the power-law screen, constants snapped to the simple numbers the rows cannot tell them from,
roots merged in what is shown, and laws read back over their own column names (E, I, gamma...)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy

from orbitlaw.discovery.sr import choice, snapping
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr.backends import OPERATORS, REFERENCE_OPERATORS, SearchSettings, placeholders
from orbitlaw.discovery.sr.expression_text import parse_law
from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law

FAST = SearchSettings(budget=10_000)


def test_the_search_builds_roots_and_the_reference_protocol_keeps_its_operators():
    assert "sqrt" in SearchSettings().operators and SearchSettings().operators == OPERATORS
    reference = DiscoverConfig("F", protocol="reference").search_settings
    assert reference.operators == REFERENCE_OPERATORS and "sqrt" not in reference.operators
    assert DiscoverConfig("F").search_settings.to_dict()["operators"] == list(OPERATORS)
    with pytest.raises(ValueError, match="search operators must be add, mul"):
        DiscoverConfig("F", settings=SearchSettings(operators=("add", "mul", "tanh"))).validate()
    with pytest.raises(ValueError, match="search operators"):
        SearchSettings(operators=("add", "div")).validate()


def test_roots_of_one_denominator_are_shown_merged_and_read_back_as_the_same_power_law():
    a, M, gamma, pr, rho = sympy.symbols("a M gamma pr rho")
    kepler = 1.0 * a ** sympy.Rational(3, 2) * M ** sympy.Rational(-1, 2)
    sound = 0.9999 * sympy.sqrt(gamma) * sympy.sqrt(pr) / sympy.sqrt(rho)
    assert str(choice.readable(kepler)) == "1.0*sqrt(a**3/M)"
    assert str(choice.readable(sound)) == "0.9999*sqrt(gamma*pr/rho)"
    newton = 39.48 * a * M / rho**2
    assert choice.readable(newton) == newton  # integer powers are left alone
    for expr in (kepler, sound):
        names = [str(s) for s in sorted(expr.free_symbols, key=str)]
        assert choice.power_law(choice.readable(expr), names) == choice.power_law(expr, names)
    x = np.linspace(0.5, 3, 7)
    for expr in (kepler,):
        f, g = (sympy.lambdify([a, M], e) for e in (expr, choice.readable(expr)))
        np.testing.assert_allclose(f(x, x[::-1]), g(x, x[::-1]), rtol=1e-12)  # the same function for x > 0


def test_a_constant_the_rows_cannot_tell_from_a_simple_number_is_snapped_and_one_they_resolve_is_kept():
    rng = np.random.default_rng(0)
    x0, x1 = placeholders(2)
    X = np.column_stack([rng.uniform(1, 3, 2000), rng.uniform(1, 3, 2000)])
    y = 0.4 * np.exp(-X[:, 0] ** 2 / 2) * (1 + 0.01 * rng.standard_normal(2000))
    fitted = 0.3994 * sympy.exp(-0.5006 * x0**2)
    snapped = snapping.snap_units(fitted, [x0, x1], X, y, "log")
    assert sympy.Rational(-1, 2) * x0**2 in [a for a in sympy.preorder_traversal(snapped)]
    assert choice.power_law(snapped, ["x0", "x1"]) is None and math.isclose(float(max(laws.constants(snapped))), 0.4,
                                                                          rel_tol=0.01)
    # G = 39.48 is nowhere near a simple number, and 1.04 is 4% from 1 but resolved by noise-free rows: both kept
    newton = 1.04 * X[:, 1] / X[:, 0] ** 2
    kept = snapping.snap_units(sympy.Float(1.04) * x1 / x0**2, [x0, x1], X, newton, "log")
    assert laws.constants(kept) == [sympy.Float(1.04)]


def test_a_gaussian_is_found_although_the_power_law_screen_applies(monkeypatch):
    """exp(-theta**2/2)/sqrt(2 pi) on theta in [1, 3] is positive, so the screen proposes a power law and the
    searches look at the departure from it; the search of the raw target beside them finds the law."""
    rng = np.random.default_rng(0)
    theta = rng.uniform(1, 3, 2000)
    y = np.exp(-theta**2 / 2) / np.sqrt(2 * np.pi)
    y = y + rng.normal(0, 0.01 * np.sqrt(np.mean(y**2)), y.size)
    law = discover_law({"theta": theta, "y": y}, DiscoverConfig("y", features=["theta"], seeds=1))
    expr = parse_law(law)
    assert str(expr).endswith("*exp(-theta**2/2)"), law["expression"]
    assert math.isclose(float(expr.subs(sympy.Symbol("theta"), 0)), 1 / math.sqrt(2 * math.pi), rel_tol=0.01)


def test_columns_named_like_sympy_constants_are_read_back_as_the_columns(tmp_path):
    rng = np.random.default_rng(1)
    cols = {name: rng.uniform(1, 3, 400) for name in ("gamma", "E", "I", "pi")}
    law = discover_law({**cols, "y": cols["gamma"] * cols["E"] / cols["I"]},
                       DiscoverConfig("y", features=list(cols), seeds=1, points=150, restarts=1, settings=FAST))
    path = tmp_path / "LAW.json"
    path.write_text(json.dumps(law))
    expr = parse_law(json.loads(path.read_text()))
    assert all(s.is_Symbol for s in expr.free_symbols) and {str(s) for s in expr.free_symbols} == {"gamma", "E", "I"}
    assert not expr.has(sympy.E, sympy.I, sympy.gamma)
    values = {sympy.Symbol(k): 2.0 for k in cols}
    assert math.isclose(float(expr.subs(values)), 2.0, rel_tol=1e-6)


@pytest.mark.timeout(60)
def test_pruning_never_builds_a_number_beyond_double_range():
    """A law the search returned on an LLM's answers: dropping 23.42 makes exp(4052848.5), whose cosine sympy would
    evaluate with pi to millions of digits (six minutes before the fix). The polish skips that trial, and the same
    substitution on ordinary numbers is xreplace's."""
    x = placeholders(3)
    law = sympy.sympify("39.1235680978042*x1*x2*(0.924223431992575*cos(exp(4052848.54847603*exp(-23.4237270876475*x2)))"
                        " + 0.517848112967121)/x0**2", locals={f"x{i}": s for i, s in enumerate(x)})
    assert laws.substitute(law, {sympy.Float("-23.4237270876475"): sympy.Integer(0)}) is None
    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 2, (300, 3))
    polished = laws.polish(law, x, X, 39.48 * X[:, 1] * X[:, 2] / X[:, 0] ** 2, "log")
    assert math.isfinite(polished.error)
    ordinary = {sympy.Float("0.517848112967121"): sympy.Integer(2), x[2]: sympy.Float(1.5)}
    assert laws.substitute(law, ordinary) == law.xreplace(ordinary)
