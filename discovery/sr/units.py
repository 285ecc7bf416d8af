"""Dimensional analysis before the search (Buckingham pi): ``orbitlaw discover --units``.

Given the units of every feature and of the target, a law ``y = f(x_1, ..., x_n)`` that holds in any choice
of units can be written ``y = P(x) * g(pi_1(x), ..., pi_k(x))``, where ``P`` is a product of powers of the
features with the target's units (the *prefactor*) and the ``pi_j`` are products of powers with no units (the
*groups*, a basis of the null space of the features' unit matrix; ``k = n - rank``). Searching ``g`` over ``k``
dimensionless variables instead of ``f`` over ``n`` is what lets the search find, for example, a relativistic
mass ``m_0 / sqrt(1 - v**2/c**2)``: with units it is ``m_0 * g(c/v)``, a one-variable problem; and every
candidate it returns is dimensionally consistent.

Units are written as products of powers of base-unit names: ``"kg m^2 s^-2"``, ``"kg*m/s^2"``, ``"AU^3/yr^2"``,
``"1"`` (no units). Each distinct name is one dimension: write every quantity of a dimension in the same unit
(``m`` and ``km`` would be two dimensions). In a unit system where a constant of nature is a pure number (the
toolkit's AU, yr, M_sun with G = 4 pi^2), the constant's units fold into the quantities: a mass there carries
``AU^3/yr^2``.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy

from orbitlaw.discovery.sr.powerlaw import monomial

_FACTOR = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)(?:(?:\^|\*\*)([+-]?\d+))?$")


def parse_unit(text: str) -> dict[str, int]:
    """``"kg m^2 s^-2"`` or ``"kg*m/s^2"`` -> {"kg": 1, "m": 2, "s": -2}; ``"1"`` or ``""`` -> {} (no units).
    Everything after a ``/`` is in the denominator (``J/kg/K`` is J kg^-1 K^-1). ValueError naming the text
    for anything else."""
    powers: dict[str, int] = {}
    parts = str(text).strip().split("/")
    for i, part in enumerate(parts):
        factors = [f for f in re.split(r"[\s*]+", part.strip().replace("**", "^")) if f]
        if i and not factors:
            raise ValueError(f"unit {text!r}: nothing after '/'")
        for factor in factors:
            if factor == "1":
                continue
            match = _FACTOR.match(factor)
            if match is None:
                raise ValueError(f"unit {text!r}: cannot read {factor!r} (write products of powers of unit names, "
                                 "e.g. 'kg m^2 s^-2', 'kg*m/s^2', or '1' for none)")
            name, power = match.group(1), int(match.group(2) or 1)
            powers[name] = powers.get(name, 0) + (-power if i else power)
    return {name: p for name, p in powers.items() if p}


def format_unit(powers: dict[str, int]) -> str:
    """{"kg": 1, "s": -2} -> ``"kg s^-2"``; {} -> ``"1"``."""
    return " ".join(n if p == 1 else f"{n}^{p}" for n, p in sorted(powers.items())) or "1"


@dataclass(frozen=True)
class Analysis:
    """The prefactor and groups of one table. ``prefactor``: one exponent per feature (Fractions: 3/2 in Kepler's
    a**(3/2)/sqrt(M)); ``groups``: for each dimensionless group one integer exponent per feature (as Fractions)."""

    features: tuple[str, ...]
    prefactor: tuple[Fraction, ...]
    groups: tuple[tuple[Fraction, ...], ...]

    @staticmethod
    def _values(exponents, values: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = np.ones(len(values))
            for j, k in enumerate(exponents):
                if k:
                    out = out * values[:, j] ** float(k)
        return out

    def reduce(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, n) features and (rows,) target -> the groups (rows, k) and ``y / prefactor`` (rows,). ValueError
        naming the rows when a value is not finite (a zero feature under a negative power, a negative one under a
        root; :func:`orbitlaw.discovery.sr.symbolic.discover_law` checks every row before any seed runs)."""
        Z = np.stack([self._values(g, X) for g in self.groups], axis=1) if self.groups else np.zeros((len(y), 0))
        P = self._values(self.prefactor, X)
        with np.errstate(all="ignore"):
            t = y / P
        bad = ~(np.all(np.isfinite(Z), axis=1) & np.isfinite(P) & (P != 0) & np.isfinite(t))
        if bad.any():
            text = self.text()
            raise ValueError(f"dimensional analysis: the prefactor {text['prefactor']} or a group "
                             f"({', '.join(text['groups']) or 'none'}) is not finite on {int(bad.sum())} of {len(t)} "
                             "rows (a feature that is zero, or negative under a fractional power)")
        return Z, t

    def lift(self, expr: sympy.Expr, group_symbols, symbols) -> sympy.Expr:
        """``g(z_1..z_k)`` -> ``P(x) * g(pi_1(x)..pi_k(x))`` over the feature symbols."""
        subs = {z: monomial(g, symbols) for z, g in zip(group_symbols, self.groups, strict=True)}
        return monomial(self.prefactor, symbols) * expr.xreplace(subs)

    def text(self) -> dict:
        """The analysis in the feature names, for LAW.json: {"prefactor": "m_0", "groups": ["c/v"]}."""
        names = [sympy.Symbol(n) for n in self.features]
        return {"prefactor": str(monomial(self.prefactor, names)),
                "groups": [str(monomial(g, names)) for g in self.groups]}


def analyse(units: dict[str, str], features: list[str], target: str) -> Analysis:
    """The :class:`Analysis` of a table whose columns have the given units (one entry per feature and for the
    target). ValueError naming the problem: a column without units, or a target whose units no product of
    powers of the features' units makes."""
    missing = [c for c in [*features, target] if c not in units]
    if missing:
        raise ValueError(f"no unit for {', '.join(missing)} (give one for every feature and the target)")
    columns = [parse_unit(units[c]) for c in features]
    wanted = parse_unit(units[target])
    dims = sorted({d for u in [*columns, wanted] for d in u})
    D = sympy.Matrix([[u.get(d, 0) for u in columns] for d in dims]) if dims else sympy.zeros(0, len(features))
    t = sympy.Matrix([wanted.get(d, 0) for d in dims])
    prefactor = _prefactor(D, t, len(features))
    if prefactor is None:
        have = ", ".join(f"{c}: {format_unit(u)}" for c, u in zip(features, columns, strict=True))
        raise ValueError(f"dimensional analysis: the target {target!r} ({format_unit(wanted)}) is not a product of "
                         f"powers of the features' units ({have})")
    groups = [_integers(v) for v in (D.nullspace() if dims else sympy.eye(len(features)).columnspace())]
    return Analysis(tuple(features), tuple(prefactor), tuple(tuple(g) for g in groups))


def _prefactor(D: sympy.Matrix, t: sympy.Matrix, n: int) -> list[Fraction] | None:
    """Exponents p with D p = t using the fewest features, then the smallest sum of |p|, then the earliest
    features; None when there is none."""
    if D.rows == 0 or not any(t):
        return [Fraction(0)] * n
    rank = D.rank()
    if D.row_join(t).rank() != rank:  # no product of powers of the features has the target's units
        return None
    for size in range(1, rank + 1):  # a solution of fewest features has independent columns: at most rank of them
        best = None
        for cols in itertools.combinations(range(n), size):
            sub = D[:, list(cols)]
            try:
                sol, params = sub.gauss_jordan_solve(t)
            except ValueError:  # inconsistent
                continue
            if params.shape[0]:  # not unique on this subset: a smaller one exists or it is not minimal
                continue
            p = [Fraction(0)] * n
            for c, v in zip(cols, sol, strict=True):
                p[c] = Fraction(int(sympy.fraction(v)[0]), int(sympy.fraction(v)[1]))
            if any(k == 0 for k in (p[c] for c in cols)):
                continue
            cost = sum(abs(k) for k in p)
            if best is None or cost < best[0]:
                best = (cost, p)
        if best is not None:
            return best[1]
    return None


def _integers(v: sympy.Matrix) -> list[Fraction]:
    """A rational null-space vector scaled to coprime integers, its free feature's power positive (``m/M``; for
    ``a: m^2, b: m`` the group is ``b**2/a``)."""
    den = math.lcm(*[int(sympy.fraction(x)[1]) for x in v])
    ints = [int(x * den) for x in v]
    g = int(np.gcd.reduce([abs(i) for i in ints if i]))
    return [Fraction(i // g) for i in ints]
