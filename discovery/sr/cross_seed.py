"""The seeds' decision: they vote on a form, the winner is refitted on all rows and graded
(:mod:`orbitlaw.discovery.sr.verdict`), giving the LAW.json dictionary (:func:`cross_seed_verdict`)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import sympy

from orbitlaw.discovery.sr import choice, expression_text, powerlaw
from orbitlaw.discovery.sr import law as laws
from orbitlaw.discovery.sr import verdict as verdicts
from orbitlaw.discovery.sr.backends import placeholders
from orbitlaw.discovery.sr.seed_fit import robust_constant
from orbitlaw.orbits.constants import G_EXACT
from orbitlaw.provenance import code_version, dependency_versions


def render(expr: sympy.Expr, features: list[str]) -> str:
    """The expression with the placeholders x0.. replaced by the feature names, roots merged
    (:func:`orbitlaw.discovery.sr.choice.readable`)."""
    return str(_named(expr, features))


def _named(expr: sympy.Expr, features: list[str]) -> sympy.Expr:
    """:func:`render`'s expression before printing (also what the LaTeX form prints)."""
    names = [sympy.Symbol(f) for f in features]  # one symbol per column, whatever its name holds
    return choice.readable(expr).xreplace(dict(zip(placeholders(len(features)), names, strict=True)))


def cross_seed_verdict(per_seed: list[dict], X, y, features: list[str], data_info: dict, config: dict,
                       groups: np.ndarray | None = None) -> dict:
    """The seeds vote on a form; the winner is refitted on all rows and graded
    (:mod:`orbitlaw.discovery.sr.verdict`)."""
    symbols = placeholders(len(features))
    names = [str(s) for s in symbols]
    metric = config["metric"]
    quantity = config.get("quantity", "force")
    locals_ = {n: s for n, s in zip(names, symbols, strict=True)}
    exprs = [expression_text.parse(r["expression"], locals_) for r in per_seed]
    forms = [choice.form(e, names) for e in exprs]
    votes, winner, best, shared = _vote(forms, [r["error"] for r in per_seed])
    final = _refit_all_rows(exprs[best], forms[best], symbols, X, y, metric)
    # the exact test's law (before the precision replaced anything): the seeds' own exact choices, voted alike
    exact_exprs = [expression_text.parse(r.get("exact_expression", r["expression"]), locals_) for r in per_seed]
    if [str(e) for e in exact_exprs] == [str(e) for e in exprs]:
        exact, exact_votes, exact_winner = final, votes, winner
    else:
        exact_forms = [choice.form(e, names) for e in exact_exprs]
        exact_votes, exact_winner, exact_best, _ = _vote(exact_forms, [r.get("exact_error", r["error"])
                                                                       for r in per_seed])
        exact = _refit_all_rows(exact_exprs[exact_best], exact_forms[exact_best], symbols, X, y, metric)

    def judged(expr):
        power = choice.power_law(expr, names)
        if power is not None:
            power["exponents"] = {f: power["exponents"][n] for f, n in zip(features, names, strict=True)}
        return power

    rows = []
    for r, e in zip(per_seed, exprs, strict=True):
        power = judged(e)
        grade = verdicts.form_grade(power, quantity)
        rows.append({**r, "expression": render(e, features), "power_law": power,
                     "exact_expression": render(expression_text.parse(r.get("exact_expression", r["expression"]),
                                                                       locals_), features),
                     "newtonian": grade == "newtonian", "verdict": grade,
                     "pareto": [{**c, "expression": render(expression_text.parse(c["expression"], locals_),
                                                            features)} for c in r["pareto"]]})
    power = judged(final.expr)
    majority = votes[winner] > len(per_seed) / 2
    baseline = verdicts.constant_error(y, metric)
    exponent_se = None
    if power is not None and metric == "log":
        se = powerlaw.exponent_errors(X, y, [power["exponents"][f] for f in features])
        exponent_se = None if se is None else {f: float(s) for f, s in zip(features, se, strict=True)}
    precision = float(config.get("tolerance", 0.0))
    test = verdicts.newton_test(X, y, features, quantity, precision, seed=len(per_seed), groups=groups)
    exact_departure = _departure_from_newton(exact.expr, symbols, X, y, features, quantity, metric, groups,
                                             seed=len(per_seed))
    verdict, reasons = verdicts.grade(power, rows=len(y), majority=majority, law_error=final.error,
                                      baseline_error=baseline, exponent_se=exponent_se, quantity=quantity, test=test,
                                      exact_departure=exact_departure)
    if power is not None:
        exponents = [power["exponents"][f] for f in features]
        power["exponent_se"] = exponent_se
        interval = powerlaw.constant_interval(X, y, exponents, metric, seed=len(per_seed), groups=groups)
        power["constant_ci95"] = list(interval) if interval else None
        newton_form = verdicts.form_grade(power, quantity) == "newtonian"
        power["G_relative_error"] = (power["constant"] - G_EXACT) / G_EXACT if newton_form else None
        power["G_relative_error_ci95"] = ([(c - G_EXACT) / G_EXACT for c in interval] if newton_form and interval
                                         else None)
    rendered = _named(final.expr, features)
    departure = _departure_from_newton(final.expr, symbols, X, y, features, quantity, metric)
    fitted = test["exponents"] if test else (dict(zip(features, map(float, powerlaw.fit_exponents(X, y)), strict=True))
                                             if powerlaw.applicable(X, y) else None)
    exact_power = judged(exact.expr)
    return {
        "expression": render(final.expr, features),
        "expression_latex": sympy.latex(rendered),
        "verdict": verdict,
        "inconclusive_reasons": reasons if verdict == "inconclusive" else [],
        "unresolved_reasons": reasons if verdict == "unresolved" else [],
        "newtonian": verdict == "newtonian",
        "power_law": power,
        "newton_test": test,
        "resolution": test["resolution"] if test else None,
        "power": test["power"] if test else None,
        "rule": rule_of(config),
        "error": final.error,
        "error_metric": metric,
        "constant_error": baseline,
        "newton_departure": departure and departure[0],
        "exact": {"expression": render(exact.expr, features), "form": verdicts.form_grade(exact_power, quantity),
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
    """The seeds' vote on ``forms`` (:func:`choice.form` of each seed's law): the votes, the winning ballot, the
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
    ln(law / C_N * Newton's form), C_N the law's own best fit of Newton's form (the mean of ln(law / Newton's
    form) over the rows, so that a law of Newton's form is 0 on every resample), with (when ``seed`` is given) its
    95% interval over bootstrap resamples of whole systems (``groups``), the law held fixed and C_N refitted on
    each resample (a feature Newton's law lacks has exponent 0 in his form). None unless Newton's own features (of
    r, m1, m2) are among the features, the metric is log and the law is positive and finite on every row."""
    newton_k = verdicts.newton_exponents(quantity)
    if not ({f for f, k in newton_k.items() if k} <= set(features) and metric == "log" and np.all(X > 0)):
        return None
    basis = np.log(X) @ np.asarray([newton_k.get(f, 0) for f in features], dtype=np.float64)
    with np.errstate(all="ignore"):
        law = np.log(laws.evaluate(expr, symbols, X))
    if not np.all(np.isfinite(law)):
        return None  # a law that predicts <= 0 somewhere: undefined
    shape = law - basis  # ln C_N is its mean: the constant of Newton's form nearest the law, in RMS of ln

    def rms(idx):
        return float(np.sqrt(np.mean((shape[idx] - np.mean(shape[idx])) ** 2)))

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
    if choice.form(final.expr, [str(s) for s in symbols]) != form:  # refitting must not change the form that won
        final = laws.Candidate(laws.refit(expr, symbols, X, y, metric), laws.complexity(expr), math.nan)
    final.expr = robust_constant(final.expr, symbols, X, y, metric)
    final.error = laws.error(y, laws.evaluate(final.expr, symbols, X), metric)
    return final


