"""Gross errors: rows that disagree with their neighbours by far more than the noise (a corrupted measurement).

The search fits its models by least squares (Operon's R^2 and Levenberg-Marquardt constants), so a few rows
off by a factor 10 dominate it: on probe rows where Newton's law is softened (G m1 m2 / (r^2 + 1)), 2% of
rows multiplied by 10 left every seed's search with nothing but the screen's power law, and the verdict
called the law Newtonian. :func:`gross_errors` finds such rows so that the search can leave them
out; the held-out selection and the final fit still see every row (their losses are robust already).

A physical law is smooth in the features; a corrupted row is not. For every row, a straight line in the
log features is fitted by least squares to its ``neighbours`` nearest rows (in standardised log features,
the row itself left out) and the row's log target compared with the line's value at the row: a Hampel
identifier with a local linear trend. A row is a gross error when this residual, studentised by the
line's own uncertainty there, is more than ``threshold`` robust standard deviations (1.4826 MAD over all
rows) from the median residual, **and** more than a factor ``FLOOR_FACTOR`` off. The second condition
keeps the rows of a law that is merely curved in log space (exp(-r) at large r) out of it; the first keeps
a factor-2 scatter that is the data's noise out of it. Flagged rows are dropped from the neighbour fits
and the test is made a second time, so that a corrupted neighbour does not bend its neighbours' lines.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

NEIGHBOURS = 20
THRESHOLD = 5.0
FLOOR_FACTOR = 2.0
"""A gross error is at least a factor 2 off the local trend: a deviation no 1-5% noise makes."""


def gross_errors(X: np.ndarray, y: np.ndarray, neighbours: int = NEIGHBOURS, threshold: float = THRESHOLD,
                 floor_factor: float = FLOOR_FACTOR) -> np.ndarray:
    """Boolean mask (n,) of the rows of (X (n, d), y (n,)) that are gross errors (module doc).

    Defined for a positive target and positive features; elsewhere, or with too few rows for a local
    line (``neighbours`` must exceed d + 1), no row is flagged.
    """
    n, d = X.shape
    if n <= neighbours or neighbours <= d + 1 or np.any(X <= 0) or np.any(y <= 0):
        return np.zeros(n, dtype=bool)
    L = np.log(X)
    sd = L.std(axis=0)
    L = (L - L.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    ly = np.log(y)
    _, idx = cKDTree(L).query(L, k=neighbours + 1)
    idx = idx[:, 1:]  # (n, k): the row itself left out
    A = np.concatenate([np.ones((n, neighbours, 1)), L[idx] - L[:, None, :]], axis=2)  # (n, k, d + 1)
    flagged = np.zeros(n, dtype=bool)
    for _ in range(2):
        w = (~flagged[idx]).astype(np.float64)  # (n, k): flagged neighbours get no weight
        P = np.linalg.pinv(A * w[..., None]) * w[:, None, :]  # (n, d + 1, k): the weighted least-squares map
        at_row = np.einsum("nk,nk->n", P[:, 0, :], ly[idx])  # the line's value at the row (its intercept)
        resid = ly - at_row
        studentised = resid / np.sqrt(1.0 + np.einsum("nk,nk->n", P[:, 0, :], P[:, 0, :]))
        centre = np.median(studentised)
        scale = 1.4826 * float(np.median(np.abs(studentised - centre)))
        flagged = ((np.abs(studentised - centre) > threshold * scale)
                   & (np.abs(resid - np.median(resid)) > math.log(floor_factor)))
    return flagged
