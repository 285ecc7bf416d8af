"""Dimensional analysis before the search (discovery/sr/units.py) and the binomial screen
(discovery/sr/binomial.py): units read and refused, the prefactor and groups of known laws, the round trip of
reduce and lift, the screen's exact laws, and ``discover_law(units=...)`` stating Kepler's third law for comparable
masses."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import sympy

from orbitlaw.cli import main
from orbitlaw.discovery.sr import binomial, exponential, law, logarithm, powerlaw, seed_fit, snapping, symbolic, units
from orbitlaw.discovery.sr.backends import placeholders
from orbitlaw.discovery.sr.law import evaluate
from orbitlaw.discovery.sr.symbolic import discover_law


@pytest.mark.parametrize("text, powers", [
    ("kg m^2 s^-2", {"kg": 1, "m": 2, "s": -2}),
    ("kg*m/s^2", {"kg": 1, "m": 1, "s": -2}),
    ("AU**3/yr**2", {"AU": 3, "yr": -2}),
    ("J/kg/K", {"J": 1, "kg": -1, "K": -1}),
    ("m/m", {}),
    ("1", {}),
    ("", {}),
])
def test_units_are_read_as_products_of_powers(text, powers):
    assert units.parse_unit(text) == powers


@pytest.mark.parametrize("text, bad", [("kg^x", "kg^x"), ("3kg", "3kg"), ("m^1.5", "m^1.5"), ("(m/s)^2", "(m")])
def test_unreadable_units_are_refused_by_name(text, bad):
    with pytest.raises(ValueError, match=rf"unit '{re.escape(text)}': cannot read '{re.escape(bad)}'"):
        units.parse_unit(text)
    with pytest.raises(ValueError, match="unit 'm/': nothing after '/'"):
        units.parse_unit("m/")


def test_relativistic_mass_is_its_rest_mass_times_a_function_of_one_ratio():
    a = units.analyse({"m": "kg", "m_0": "kg", "v": "m/s", "c": "m/s"}, ["m_0", "v", "c"], "m")
    assert a.prefactor == (1, 0, 0) and a.groups == ((0, -1, 1),)
    assert a.text() == {"prefactor": "m_0", "groups": ["c/v"]}


def test_keplers_period_needs_a_half_power_prefactor():
    a = units.analyse({"P": "yr", "a": "AU", "M": "AU^3 yr^-2", "m": "AU^3 yr^-2"}, ["a", "M", "m"], "P")
    assert a.prefactor == (Fraction(3, 2), Fraction(-1, 2), 0)
    assert a.text() == {"prefactor": "a**(3/2)/sqrt(M)", "groups": ["m/M"]}


def test_dimensionless_features_are_their_own_groups():
    a = units.analyse({"y": "1", "theta": "1", "n": "1"}, ["theta", "n"], "y")
    assert a.prefactor == (0, 0) and sorted(a.groups) == [(0, 1), (1, 0)]


def test_a_target_no_product_of_features_can_make_is_refused():
    with pytest.raises(ValueError, match=r"the target 'F' \(kg\) is not a product of powers of the features' units "
                                         r"\(r: m\)"):
        units.analyse({"F": "kg", "r": "m"}, ["r"], "F")
    with pytest.raises(ValueError, match="no unit for m2, F"):
        units.analyse({"r": "m", "m1": "kg"}, ["r", "m1", "m2"], "F")


def test_reduce_then_lift_gives_back_the_law():
    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 3.0, (50, 3))
    a = units.analyse({"P": "yr", "a": "AU", "M": "AU^3 yr^-2", "m": "AU^3 yr^-2"}, ["a", "M", "m"], "P")
    y = np.sqrt(X[:, 0] ** 3 / (X[:, 1] + X[:, 2]))
    Z, t = a.reduce(X, y)
    np.testing.assert_allclose(t, 1 / np.sqrt(1 + Z[:, 0]))  # g(m/M) = (1 + m/M)^(-1/2)
    x, z = placeholders(3), placeholders(1)
    law = a.lift(1 / sympy.sqrt(1 + z[0]), z, x)
    np.testing.assert_allclose(evaluate(law, x, X), y)
    with pytest.raises(ValueError, match=r"a\*\*\(3/2\)/sqrt\(M\) or a group \(m/M\) is not finite on 50 of 50"):
        a.reduce(np.column_stack([X[:, 0], -X[:, 1], X[:, 2]]), y)


@pytest.mark.parametrize("law, exact", [
    (lambda z: 1 / np.sqrt(1 - 1 / z[:, 0] ** 2), "1/sqrt(1 - 1/x0**2)"),  # the Lorentz factor of c/v
    (lambda z: np.sqrt(2 - z[:, 0]), "sqrt(2 - x0)"),  # vis-viva over sqrt(M/r), of r/a
    (lambda z: 3 * z[:, 1] / (1 + z[:, 0] * z[:, 1]), "3*x1/(x0*x1 + 1)"),  # a lens, of two groups
])
def test_the_binomial_screen_states_exact_binomial_laws(law, exact):
    rng = np.random.default_rng(1)
    Z = np.column_stack([rng.uniform(1.2, 1.9, 400), rng.uniform(0.5, 2.0, 400)])
    y = law(Z)
    x = placeholders(2)
    truth = sympy.sympify(exact, locals={"x0": x[0], "x1": x[1]})
    found = binomial.screen_candidates(Z, y, x)
    def same(e):  # the law up to a constant factor that is 1 to fitting precision (sqrt(2) is 1.41421356...)
        ratio = sympy.simplify(sympy.powsimp(e / truth, force=True))
        return ratio.is_number and abs(float(ratio) - 1) < 1e-6
    assert any(same(e) for e in found), found


def test_the_binomial_screen_needs_positive_values():
    """Fewer than half the rows with y > 0, or a group <= 0: no log space, no candidate (rows that would otherwise
    give the Lorentz factor)."""
    x = placeholders(1)
    Z = np.linspace(1.2, 1.9, 200)[:, None]
    y = 1 / np.sqrt(1 - 1 / Z[:, 0] ** 2)
    assert binomial.screen_candidates(Z, y, x)  # the control: the same rows, positive, give candidates
    assert binomial.screen_candidates(Z, np.where(np.arange(200) < 120, -y, y), x) == []
    assert binomial.screen_candidates(-Z, y, x) == []


@pytest.mark.parametrize("truth, exact", [
    (lambda z: np.exp(-z[:, 0] ** 2 / 2) / np.sqrt(2 * np.pi), "0.398942280401433*exp(-x0**2/2)"),  # I.6.2a's Gaussian
    (lambda z: np.exp(-(z[:, 0] / z[:, 1]) ** 2 / 2) / z[:, 1], "exp(-x0**2/(2*x1**2))/x1"),  # I.6.2's, of two groups
    (lambda z: 3 * np.exp(-1 / z[:, 1]), "3*exp(-1/x1)"),  # a Boltzmann factor of kT / E
])
def test_the_exponential_screen_states_exponential_laws(truth, exact):
    """1% noise: the exact law, its rate a simple number, is among the candidates."""
    rng = np.random.default_rng(5)
    Z = np.column_stack([rng.uniform(1, 3, 600), rng.uniform(1, 3, 600)])
    y = truth(Z) * (1 + 0.01 * rng.standard_normal(600))
    x = placeholders(2)
    want = sympy.sympify(exact, locals={"x0": x[0], "x1": x[1]})
    found = exponential.screen_candidates(Z, y, x)

    def same(e):  # the exact form, its constant factor within 1%
        ratio = sympy.simplify(e / want)
        return ratio.is_number and abs(float(ratio) - 1) < 0.01
    assert any(same(e) for e in found), found


def test_the_exponential_screen_proposes_only_simple_rates_and_needs_positive_values():
    """A law whose best exponential has a rate far from any simple number (exp(-0.77 x)), or beyond MAX_RATE, gives no
    candidate: such an exponential would take smooth laws of other forms; a simple rate (the control, exp(-x)) gives
    one."""
    x = placeholders(1)
    Z = np.linspace(1.0, 3.0, 200)[:, None]
    assert exponential.screen_candidates(Z, np.exp(-Z[:, 0]), x)  # the control
    assert exponential.screen_candidates(Z, np.exp(-0.77 * Z[:, 0]), x) == []
    assert exponential.screen_candidates(Z, np.exp(-3 * Z[:, 0]), x)  # the largest simple rate, MAX_RATE
    assert exponential.screen_candidates(Z, np.exp(-3.6 * Z[:, 0]), x) == []  # within 5% of 11/3, but beyond it
    assert exponential.screen_candidates(Z, np.where(np.arange(200) < 120, -1.0, 1.0) * np.exp(-Z[:, 0]), x) == []
    assert exponential.screen_candidates(-Z, np.exp(-Z[:, 0]), x) == []


@pytest.mark.parametrize("truth, exact", [
    (lambda z: np.log(z[:, 1] / z[:, 0]), "log(x1/x0)"),  # isothermal work over n k T, of V1/V2 and V2/V1 groups
    (lambda z: 2 * np.sqrt(z[:, 0]) * np.log(z[:, 1]), "2*sqrt(x0)*log(x1)"),  # a log times a power law
])
def test_the_log_screen_states_logarithmic_laws(truth, exact):
    """Ratios either side of 1 (the law changes sign there), 1% noise: the exact law is among the candidates."""
    rng = np.random.default_rng(3)
    Z = rng.uniform(0.2, 5.0, (500, 2))
    y = truth(Z) * (1 + 0.01 * rng.standard_normal(500))
    x = placeholders(2)
    want = sympy.sympify(exact, locals={"x0": x[0], "x1": x[1]})
    found = logarithm.screen_candidates(Z, y, x)
    assert any(sympy.simplify(sympy.expand_log(e - want, force=True)) == 0 for e in found), found


def test_the_log_screen_keeps_distinct_laws_written_with_a_positive_constant():
    """ln(u), ln(1/u) and ln(u**2) are one law: the screen's slots hold different laws, not one law three ways,
    and -T ln(V1/V2) is written T ln(V2/V1)."""
    rng = np.random.default_rng(4)
    Z = rng.uniform(0.2, 5.0, (500, 2))
    x = placeholders(2)
    found = logarithm.screen_candidates(Z, -np.log(Z[:, 0] / Z[:, 1]) * (1 + 0.01 * rng.standard_normal(500)), x)
    logs = [next(iter(e.atoms(sympy.log))).args[0] for e in found]
    def family(u):  # u's powers over their gcd, the first positive: u, 1/u and u**2 are one family
        powers = [int(u.as_powers_dict().get(s, 0)) for s in x]
        g = math.gcd(*powers) * (1 if next(e for e in powers if e) > 0 else -1)
        return tuple(e // g for e in powers)

    families = {family(u) for u in logs}
    assert len(families) == logarithm.KEEP, found  # one candidate per family of u (fitted and snapped share one)
    assert all(e.as_coeff_Mul()[0] > 0 for e in found), found
    assert x[1] / x[0] in logs, found


def test_the_log_screen_needs_positive_finite_groups_and_a_law_of_them():
    x = placeholders(1)
    Z = np.linspace(0.2, 5.0, 100)[:, None]
    assert logarithm.screen_candidates(Z, np.log(Z[:, 0]), x)  # the control
    assert logarithm.screen_candidates(-Z, np.log(Z[:, 0]), x) == []
    assert logarithm.screen_candidates(Z, np.where(np.arange(100) < 3, np.nan, np.log(Z[:, 0])), x) == []
    assert logarithm.screen_candidates(Z, np.zeros(100), x) == []


def test_a_phase_next_to_a_multiple_of_half_pi_is_snapped_there():
    """cos(theta - 3.14161) on rows of -cos(theta) is written -cos(theta); a phase near pi/2 that the rows resolve
    (1.60, 0.029 from it) is tried there and stays."""
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 5, (400, 2))
    x = placeholders(2)
    y = -X[:, 0] * np.cos(X[:, 1]) * (1 + 0.001 * rng.standard_normal(400))
    fitted = x[0] * sympy.cos(x[1] - sympy.Float(3.14161481026966, 15))
    assert snapping.snap_units(fitted, x, X, y, "relative") == -x[0] * sympy.cos(x[1])
    shifted = X[:, 0] * np.cos(X[:, 1] + 1.60)
    resolved = x[0] * sympy.cos(x[1] + sympy.Float(1.60, 15))
    assert snapping._phase_values(1.60)  # the snap is tried: the rows, not the distance, keep the phase
    assert snapping.snap_units(resolved, x, X, shifted, "relative") == resolved


def test_a_scale_shared_by_numerator_and_denominator_is_divided_out_before_snapping():
    """568.3/(568.6 g - 569.1) on rows of 1/(g - 1) (I.43.43's gamma on [2, 5]) is written 1/(g - 1): each of its
    three constants is within 5% of a half-integer of its own, so before it snapped to 568/(1137g/2 - 569). A
    fraction without the spare scale keeps its form, and the value never changes."""
    rng = np.random.default_rng(1)
    X = rng.uniform(2, 5, (400, 1))
    g = placeholders(1)
    y = 1 / (X[:, 0] - 1) * (1 + 0.001 * rng.standard_normal(400))
    fitted = sympy.Float(568.3) / (sympy.Float(568.6) * g[0] - sympy.Float(569.1))
    assert snapping.snap_units(fitted, g, X, y, "relative") == 1 / (g[0] - 1)
    scaled = snapping.one_scale(fitted)
    assert len(law.constants(scaled)) == 2
    np.testing.assert_allclose(law.evaluate(scaled, g, X), law.evaluate(fitted, g, X), rtol=1e-12)
    assert snapping.one_scale(g[0] / (g[0] + sympy.Float(0.1))) == g[0] / (g[0] + sympy.Float(0.1))


def test_a_constant_that_is_a_simple_fraction_to_a_doubles_precision_is_written_as_it():
    """The noiseless II.11.27 and I.50.26 came out as their laws with float halves and thirds (``0.5*alpha*cos(2.0*
    omega*t)``, ``1 - 0.333333333333333*alpha*n``), which sympy cannot reduce, so SRBench's criterion missed them.
    Written exactly, they are; a constant the rows only come near (0.33332) or another (4 pi^2) stays."""
    a, n, x1, w, t = sympy.symbols("alpha n x1 omega t")
    third = a * n / (sympy.Float(-0.333333333333333) * a * n + 1)
    assert snapping.exact_fractions(third) == a * n / (1 - a * n / 3)
    halves = x1 * (sympy.Float(0.5) * a * sympy.cos(sympy.Float(2.0) * w * t) + sympy.Float(0.5) * a + sympy.cos(w * t))
    exact = snapping.exact_fractions(halves)
    assert law.constants(exact) == []
    assert sympy.simplify(exact - x1 * (sympy.cos(w * t) + a * sympy.cos(w * t) ** 2)) == 0
    near = a * n / (sympy.Float(-0.33331792568927) * a * n + 1)
    newton = sympy.Float(4 * np.pi**2) * n / a**2
    assert snapping.exact_fractions(near) == near and snapping.exact_fractions(newton) == newton
    # snapping ends with it: a fit of y = x/3 at noise 0 reads x/3
    X = np.linspace(1, 5, 50)[:, None]
    x = placeholders(1)
    assert snapping.snap_units(sympy.Float(1 / 3) * x[0], x, X, X[:, 0] / 3, "relative") == x[0] / 3


@pytest.mark.parametrize("v, count, limit, want", [
    (1.49, 1, None, ["3/2"]), (0.35, 1, None, ["1/3"]), (-0.52, 2, None, ["-1/2", "-2/3"]),
    (4.2, 1, None, ["13/3"]),  # no clamp without a limit: a fitted a_j of 4.2 is not written 3
    (4.2, 1, 3, ["3"]), (-9.0, 1, 3, ["-3"]),
])
def test_simple_fractions_are_the_nearest_integers_halves_and_thirds(v, count, limit, want):
    assert [str(r) for r in powerlaw.simple_fractions(v, count, limit)] == want


def test_discover_with_units_states_keplers_third_law(tmp_path, capsys):
    """P = sqrt(a^3/(M + m)) (yr; AU and G-masses in AU^3/yr^2) for two stars of comparable mass, 1% noise: with its
    units the law comes back exactly; the LAW.json records the units and the analysis."""
    rng = np.random.default_rng(0)
    a, M, m = rng.uniform(0.5, 10, 1200), rng.uniform(0.1, 5, 1200), rng.uniform(0.1, 5, 1200)
    P = np.sqrt(a**3 / (M + m))
    P = P + rng.normal(0, 0.01 * np.sqrt(np.mean(P**2)), P.size)
    path = tmp_path / "binaries.csv"
    pd.DataFrame({"a": a, "M": M, "m": m, "P": P}).to_csv(path, index=False)
    out = tmp_path / "LAW.json"
    assert main(["discover", "--input", str(path), "--target", "P", "--features", "a,M,m", "--seeds", "1",
                 "--points", "500", "--workers", "1", "--units", "P=yr,a=AU,M=AU^3/yr^2,m=AU^3/yr^2",
                 "--out", str(out)]) == 0
    law = json.loads(out.read_text())
    A, Ms, ms = sympy.symbols("a M m", positive=True)
    found = sympy.sympify(law["expression"], locals={"a": A, "M": Ms, "m": ms})
    ratio = sympy.simplify(found / sympy.sqrt(A**3 / (Ms + ms)))  # SRBench's symbolic solution: a constant ratio
    assert ratio.is_number and abs(float(ratio) - 1) < 0.01, law["expression"]
    assert law["settings"]["units"] == {"a": "AU", "M": "AU^3/yr^2", "m": "AU^3/yr^2", "P": "yr"}
    assert law["settings"]["dimensional_analysis"] == {"prefactor": "a**(3/2)/sqrt(M)", "groups": ["m/M"]}


def test_discover_with_units_states_a_gaussian_of_two_variables():
    """Feynman I.6.2, exp(-theta**2/(2 sigma**2)) / (sqrt(2 pi) sigma) on theta, sigma in [1, 3] (dimensionless), 1%
    noise: the exponential screen on the groups states it (before the screen a sum of sines that fits as well came
    back on every seed of the benchmark)."""
    rng = np.random.default_rng(2)
    theta, sigma = rng.uniform(1, 3, 2000), rng.uniform(1, 3, 2000)
    f = np.exp(-(theta / sigma) ** 2 / 2) / (np.sqrt(2 * np.pi) * sigma)
    f = f + rng.normal(0, 0.01 * np.sqrt(np.mean(f**2)), f.size)
    law = discover_law({"theta": theta, "sigma": sigma, "f": f},
                       symbolic.DiscoverConfig("f", features=["theta", "sigma"], seeds=1,
                                               units={"theta": "1", "sigma": "1", "f": "1"}))
    t, s = sympy.symbols("theta sigma", positive=True)
    truth = sympy.exp(-t**2 / (2 * s**2)) / (sympy.sqrt(2 * sympy.pi) * s)
    ratio = sympy.simplify(sympy.sympify(law["expression"], locals={"theta": t, "sigma": s}) / truth)
    assert ratio.is_number and abs(float(ratio) - 1) < 0.01, law["expression"]


def test_units_change_the_resume_key_and_settle_negative_and_constant_laws():
    """A binding energy -m/n^2 (negative on every row) comes back with its sign; a law with no group left (y = 2 x,
    both lengths) is its prefactor times the best constant; and a run with units never resumes seeds of one
    without (the digest holds the units)."""
    rng = np.random.default_rng(3)
    m, n, x = rng.uniform(1, 5, 400), rng.uniform(1, 5, 400), rng.uniform(1, 5, 400)
    law = discover_law({"m": m, "n": n, "E": -m / n**2}, "E", features=["m", "n"], seeds=1, points=150, restarts=1,
                       units={"m": "J", "n": "1", "E": "J"})
    M, N = sympy.symbols("m n")
    assert sympy.simplify(sympy.sympify(law["expression"], locals={"m": M, "n": N}) + M / N**2) == 0, law["expression"]
    law = discover_law({"x": x, "y": 2 * x}, "y", features=["x"], seeds=1, points=150, restarts=1,
                       units={"x": "m", "y": "m"})
    assert sympy.sympify(law["expression"]) - 2 * sympy.Symbol("x") == 0, law["expression"]
    assert law["settings"]["dimensional_analysis"] == {"prefactor": "x", "groups": []}


def test_a_run_with_units_does_not_resume_seeds_of_one_without(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.uniform(1, 5, 300)
    table = {"x": x, "y": 2 * x}
    calls = []
    real = seed_fit.fit_seed_task
    monkeypatch.setattr(symbolic, "fit_seed_task", lambda task: calls.append(task[-1]) or real(task))
    discover_law(table, "y", features=["x"], seeds=1, points=100, restarts=1, resume_dir=tmp_path)
    discover_law(table, "y", features=["x"], seeds=1, points=100, restarts=1, resume_dir=tmp_path)
    assert calls == [None]  # the second run resumed the first's seed ...
    discover_law(table, "y", features=["x"], seeds=1, points=100, restarts=1, resume_dir=tmp_path,
                 units={"x": "m", "y": "m"})
    assert len(calls) == 2 and calls[1] is not None  # ... and one with units fitted it again
