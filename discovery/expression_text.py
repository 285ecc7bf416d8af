"""Expressions read back from files without evaluating text.

``sympy.sympify`` evaluates Python: an expression string planted in a resume file would run code. Files
the toolkit reads back (the symbolic regression's per-seed resume files, ``llm run``'s ``sr/``) are parsed
here instead: Python's ``ast`` parses the text (parsing runs nothing), and the tree is rebuilt node by node
from a whitelist, numbers, the named symbols, + - * / ** and the functions below. Anything else (an
attribute, a subscript, a lambda, an unknown name or call) is a one-line ValueError. The text is what
``str(expr)`` of a sympy expression prints, so ``parse(str(e), symbols) == e`` for the expressions the
search produces (floats are read from their digits, as sympify reads them).
"""

from __future__ import annotations

import ast

import sympy

FUNCTIONS = {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "exp": sympy.exp, "log": sympy.log,
             "sqrt": sympy.sqrt, "Abs": sympy.Abs, "tanh": sympy.tanh, "sinh": sympy.sinh, "cosh": sympy.cosh}
CONSTANTS = {"E": sympy.E, "pi": sympy.pi, "oo": sympy.oo, "zoo": sympy.zoo, "nan": sympy.nan, "I": sympy.I}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a**b}
MAX_TEXT = 100_000


def parse(text: str, symbols: dict[str, sympy.Symbol]) -> sympy.Expr:
    """The sympy expression that ``text`` (as ``str(expr)`` prints it) describes, over ``symbols``
    (name -> Symbol). ValueError naming the offending part for anything outside the whitelist."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise ValueError("an expression must be a string of at most 100,000 characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an expression: {text[:80]!r} ({exc.msg})") from None
    return _build(tree.body, text, symbols)


def _build(node: ast.AST, text: str, symbols: dict) -> sympy.Expr:
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
