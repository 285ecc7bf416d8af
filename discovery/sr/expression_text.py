"""Expressions read back from files without evaluating text.

``sympy.sympify`` evaluates Python: an expression string planted in a resume file would run code. Files
the toolkit reads back (the symbolic regression's per-seed resume files, ``llm run``'s ``sr/``) are parsed
here instead: Python's ``ast`` parses the text (parsing runs nothing), and the tree is rebuilt node by node
from a whitelist, numbers, the named symbols, + - * / ** and the functions below. Anything else (an
attribute, a subscript, a lambda, an unknown name or call) is a one-line ValueError. The text is what
``str(expr)`` of a sympy expression prints, so ``parse(str(e), symbols) == e`` for the expressions the
search produces (floats are read from their digits, as sympify reads them).

Parsing is bounded as well as safe: sympy multiplies out a power of two numbers at once, so ``10**10**8``
would build a hundred-million-digit integer and hang the command that reads it. A numeric exponent is at
most :data:`MAX_EXPONENT` in size, and a power of two numbers at most :data:`MAX_DIGITS` digits; a tree
deeper than Python can parse is refused too. Every number the tree makes along the way (a literal, or what
sympy folds a function or operation of numbers into) is at most :data:`MAX_MAGNITUDE` in size, a float64's
range, which no law a search evaluated can exceed: ``cos(exp(4.05e6))`` would otherwise ask sympy for the
cosine of a 1.7-million-digit number, which it computes exactly and which never returns. The laws a search
writes are far inside these bounds.
"""

from __future__ import annotations

import ast
import sys

import sympy

FUNCTIONS = {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "exp": sympy.exp, "log": sympy.log,
             "sqrt": sympy.sqrt, "Abs": sympy.Abs, "tanh": sympy.tanh, "sinh": sympy.sinh, "cosh": sympy.cosh}
CONSTANTS = {"E": sympy.E, "pi": sympy.pi, "oo": sympy.oo, "zoo": sympy.zoo, "nan": sympy.nan, "I": sympy.I}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b}
MAX_TEXT = 100_000
MAX_EXPONENT = 1000  # the largest numeric exponent read back (a law's exponents are a few units)
MAX_DIGITS = 4000  # the largest number a power of two numbers may make (digits; Python prints up to 4,300)
MAX_MAGNITUDE = sys.float_info.max  # the largest |number| anywhere in the tree: a float64's (1.8e308)


def parse(text: str, symbols: dict[str, sympy.Symbol]) -> sympy.Expr:
    """The sympy expression that ``text`` (as ``str(expr)`` prints it) describes, over ``symbols``
    (name -> Symbol). ValueError naming the offending part for anything outside the whitelist."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise ValueError("an expression must be a string of at most 100,000 characters")
    try:
        tree = ast.parse(text, mode="eval")
        return _build(tree.body, text, symbols)
    except SyntaxError as exc:
        raise ValueError(f"not an expression: {text[:80]!r} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"expression nested too deeply to read: {text[:80]!r}") from None


def _power(base: sympy.Expr, exponent: sympy.Expr, text: str) -> sympy.Expr:
    """``base**exponent``, refused (ValueError) where sympy would build an unbounded number."""
    if exponent.is_Number and exponent.is_finite and abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is larger than {MAX_EXPONENT} in expression {text[:80]!r}")
    if base.is_Rational and exponent.is_Number and exponent.is_finite and base != 0:
        digits = max(int(abs(base.p)).bit_length(), int(base.q).bit_length()) * 0.30103 * float(abs(exponent))
        if digits > MAX_DIGITS:
            raise ValueError(f"a power in expression {text[:80]!r} would have about {digits:.0f} digits "
                             f"(at most {MAX_DIGITS:,} are read)")
    return base**exponent


def _build(node: ast.AST, text: str, symbols: dict) -> sympy.Expr:
    """The sympy expression of ``node``, refused (ValueError) where it folds into a number beyond
    :data:`MAX_MAGNITUDE`, before anything is built on it."""
    value = _node(node, text, symbols)
    # the numbers this node made: itself, or the coefficient and constant term sympy folded into it (x/exp(-9e6)
    # is 1e3908650*x); a constant left unevaluated (exp(4050000)) is sized by evalf, cheap as its parts are bounded
    made = [value] if value.is_Number or not value.free_symbols else [a for a in value.args if a.is_Number]
    for number in made:
        size = abs(number if number.is_Number else number.evalf(15))
        if size.is_Number and size.is_finite and size > MAX_MAGNITUDE:
            raise ValueError(f"a number in expression {text[:80]!r} is about {sympy.Float(size, 3)}, beyond "
                             f"{MAX_MAGNITUDE:.3g} (a float64's range, the one a law is evaluated in)")
    return value


def _node(node: ast.AST, text: str, symbols: dict) -> sympy.Expr:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _power(_build(node.left, text, symbols), _build(node.right, text, symbols), text)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_build(node.left, text, symbols), _build(node.right, text, symbols))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _build(node.operand, text, symbols)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        literal = ast.get_source_segment(text, node)
        return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Float(literal)
    if isinstance(node, ast.Name):
        if node.id in symbols:
            return symbols[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise ValueError(f"unknown name {node.id!r} in expression {text[:80]!r}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
            and not node.keywords and len(node.args) == 1:
        return FUNCTIONS[node.func.id](_build(node.args[0], text, symbols))
    raise ValueError(f"{type(node).__name__} is not allowed in an expression: {text[:80]!r}")


def parse_law(law: dict, key: str = "expression") -> sympy.Expr:
    """A LAW.json's law (``law[key]``) as a sympy expression over its own feature names (``law["data"]["features"]``).

    Read a law this way, never with ``sympy.sympify``: sympify takes a column named ``E``, ``I``, ``S``, ``N``,
    ``Q``, ``pi``, ``gamma`` or ``beta`` for sympy's constant or function of that name (``E*gamma/I`` would become
    e times the gamma function over the imaginary unit)."""
    symbols = {name: sympy.Symbol(name) for name in law["data"]["features"]}
    return parse(law[key], symbols)
