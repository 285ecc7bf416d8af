"""The table symbolic regression reads: features and target columns of a CSV, a DataFrame or a mapping,
cleaned of non-finite rows and filtered by boolean ``subset`` columns (:func:`load_table`)."""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np

GROUP_COLUMN = "sequence"
"""Rows that share this column's value (a probe's planet steps of one sequence) are not independent: the
bootstrap interval of the constant resamples whole groups."""

MIN_POINTS = 20
"""Fewer usable rows than this cannot support (or refute) a three-variable law."""


def _column_error(name: str, available: list[str]) -> ValueError:
    close = difflib.get_close_matches(name, available, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (columns: {', '.join(available)})"
    return ValueError(f"column {name!r} not found{hint}")


def _as_bool(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype == bool:
        return values
    text = np.char.lower(np.asarray(values, dtype=str))
    ok = np.isin(text, ["true", "false", "1", "0", "1.0", "0.0"])
    if not ok.all():
        raise ValueError(f"column {name!r} used as --subset must be boolean (True/False or 1/0)")
    return np.isin(text, ["true", "1", "1.0"])


def load_table(table, target: str, features: list[str], subset: list[str] = ()) -> tuple[np.ndarray, np.ndarray,
                                                                                          dict]:
    """Features X (n, d) and target y (n,) from a CSV path, a DataFrame or a mapping of columns.

    Rows with a non-finite value in any used column are dropped and counted; rows where a ``subset``
    column is false are left out. Raises ValueError (one line) for missing or non-numeric columns, a
    constant target and fewer than ``MIN_POINTS`` usable rows.
    """
    source = str(table) if isinstance(table, (str, Path)) else "<table>"
    if isinstance(table, (str, Path)):
        import pandas as pd

        path = Path(table)
        if path.is_dir():
            raise ValueError(f"input table {path} is a directory, not a CSV file; name the file (e.g. "
                             f"{path / 'predictions.csv'} for a probe's output)")
        if not path.is_file():
            raise ValueError(f"input table {path} does not exist")
        try:
            table = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {path} as CSV: {str(exc).splitlines()[0]}") from None
    columns = list(table.keys())
    if len(set(features)) != len(features) or not features:
        raise ValueError(f"features must be distinct column names, got {','.join(features)!r}")
    if target in features:
        raise ValueError(f"the target {target!r} cannot also be a feature")
    for name in [target, *features, *subset]:
        if name not in columns:
            raise _column_error(name, columns)
    data = {}
    for name in [target, *features]:
        try:
            data[name] = np.asarray(table[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"column {name!r} is not numeric") from None
    keep = np.ones(len(data[target]), dtype=bool)
    for name in subset:
        keep &= _as_bool(np.asarray(table[name]), name)
    finite = np.all([np.isfinite(v) for v in data.values()], axis=0)
    dropped = int(np.sum(keep & ~finite))
    keep &= finite
    n = int(keep.sum())
    if n < MIN_POINTS:
        raise ValueError(f"only {n} usable rows in {source} ({dropped} dropped as NaN/inf); "
                         f"symbolic regression needs at least {MIN_POINTS}")
    y = data[target][keep]
    if np.ptp(y) == 0 or not np.any(y):
        raise ValueError(f"target column {target!r} is constant ({y[0]:g}): there is no law to find")
    X = np.column_stack([data[f][keep] for f in features])
    info = {"input": source, "target": target, "features": list(features), "subset": list(subset),
            "rows": int(len(keep)), "rows_used": n, "dropped_nonfinite": dropped}
    if GROUP_COLUMN in columns and GROUP_COLUMN not in features:
        info["groups"] = np.asarray(table[GROUP_COLUMN])[keep]  # popped by discover_law: not JSON
    return X, y, info

