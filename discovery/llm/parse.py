"""Parse an LLM's ``ANSWER: {timestep: value, ...}`` safely (never ``eval``).

Accepted: any text before the answer (reasoning), ``ANSWER:`` in any case, optionally inside Markdown
code fences or bold markers, followed by one brace-delimited dict whose entries are ``key: value``
separated by commas. Keys are non-negative integers, bare or quoted; values are finite decimal numbers
(scientific notation allowed: ``1e-5``, ``1.2E+03``, ``3.0e-05``), bare or quoted. Whitespace and
newlines anywhere, a trailing comma, and ``//`` or ``#`` line comments are tolerated. When the text holds
several ``ANSWER:`` markers (e.g. the example format echoed while reasoning) the last one that parses
wins. Anything else (no marker, no closing brace, ``...`` ellipses, non-numeric values, NaN) is a parse
failure with a reason; the caller keeps the raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MARKER = re.compile(r"ANSWER\s*[:=]", re.IGNORECASE)
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_ENTRY = re.compile(rf"""^(["']?)(\d+)\1\s*:\s*(["']?)({_NUMBER})\3$""")
_COMMENT = re.compile(r"(?m)(?://|#).*$")


@dataclass
class ParsedAnswer:
    """``values``: timestep -> predicted value (units of the prompt's outcomes); ``error``: why parsing
    failed, None on success."""

    values: dict[int, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _dict_body(text: str, start: int) -> tuple[str | None, str]:
    """The text between the first ``{`` after ``start`` and its matching ``}``, or (None, reason)."""
    rest = text[start:]
    stripped = rest.lstrip(" \t\r\n*`")
    stripped = re.sub(r"^(?:python|json|py)\b", "", stripped, flags=re.IGNORECASE).lstrip(" \t\r\n*`")
    if not stripped.startswith("{"):
        return None, "no '{' after ANSWER:"
    depth = 0
    for i, ch in enumerate(stripped):
        if ch == "{":
            depth += 1
            if depth > 1:
                return None, "nested braces in the answer dict"
        elif ch == "}":
            return stripped[1:i], ""
    return None, "the answer dict has no closing '}' (truncated output?)"


def _entries(body: str) -> tuple[dict[int, float], str | None]:
    values: dict[int, float] = {}
    pieces = _COMMENT.sub("", body).split(",")
    for n, piece in enumerate(pieces):
        piece = piece.strip()
        if not piece:
            if n == len(pieces) - 1:
                continue  # trailing comma (or an empty dict)
            return values, f"empty entry after entry {n}"
        m = _ENTRY.match(piece)
        if m is None:
            return values, f"entry {n + 1} is not 'timestep: number': {piece[:40]!r}"
        value = float(m.group(4))
        if value != value or value in (float("inf"), float("-inf")):
            return values, f"entry {n + 1} is not finite: {piece[:40]!r}"
        values[int(m.group(2))] = value
    if not values:
        return values, "the answer dict is empty"
    return values, None


def parse_answer(text: str | None) -> ParsedAnswer:
    """Parse ``text`` (see the module docstring). Never raises."""
    if not isinstance(text, str) or not text.strip():
        return ParsedAnswer(error="empty response")
    markers = list(_MARKER.finditer(text))
    if not markers:
        return ParsedAnswer(error="no 'ANSWER:' in the response")
    last_error = ""
    for m in reversed(markers):
        body, reason = _dict_body(text, m.end())
        if body is None:
            last_error = last_error or reason
            continue
        values, error = _entries(body)
        if error is None:
            return ParsedAnswer(values=values)
        last_error = last_error or error
    return ParsedAnswer(error=last_error)
