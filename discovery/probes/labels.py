"""Which planet steps of a probe's rows are labelled: the plan (trained and held-out sequences) and the draw.

The first ``train_sequences`` sequences of the split are labelled at every planet step; the next
``heldout_sequences`` are held out, each with ``labels_per_heldout`` planet steps revealed at random
(seeded). Metrics are on the held-out steps that are not revealed. Two layouts draw the revealed steps
(:func:`assign_labels`): ``orbitlaw`` (a PCG64 stream, the toolkit's own) and ``reference`` (the reference
code's ``numpy.random.RandomState`` draw from the planet token positions, step for step). Rows are those of
:func:`orbitlaw.discovery.probes.probe_data.planet_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAYOUTS = ("orbitlaw", "reference")
"""How the revealed held-out steps are drawn; see :func:`assign_labels`."""


@dataclass
class LabelPlan:
    """Which sequences are trained on and held out, and how many held-out steps are revealed."""

    train_sequences: int
    heldout_sequences: int
    labels_per_heldout: int = 2
    seed: int = 0

    def validate(self, n: int) -> None:
        if self.train_sequences < 0 or self.heldout_sequences < 1:
            raise ValueError(f"need train sequences >= 0 and held-out sequences >= 1, got "
                             f"{self.train_sequences} and {self.heldout_sequences}")
        if self.train_sequences + self.heldout_sequences > n:
            raise ValueError(f"{self.train_sequences} train + {self.heldout_sequences} held-out sequences "
                             f"exceed the {n} sequences of the split")
        if self.labels_per_heldout < 0:
            raise ValueError(f"labels per held-out sequence must be >= 0, got {self.labels_per_heldout}")
        if self.train_sequences == 0 and self.labels_per_heldout == 0:
            raise ValueError("no labels: give training sequences or labels per held-out sequence")


def assign_labels(rows: dict, plan: LabelPlan, layout: str = "orbitlaw") -> dict:
    """Add ``heldout`` and ``labelled`` (bool, (rows,)) columns: training sequences fully labelled,
    held-out ones with ``labels_per_heldout`` planet steps revealed, drawn by ``layout``:

    - ``orbitlaw``: one PCG64 stream seeded by ``(plan.seed, 0x1ABE1)`` gives every held-out row a random
      key; each held-out sequence reveals its rows of the smallest keys.
    - ``reference``: :func:`reference_labels` (the reference code's ``RandomState`` draw).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown label layout {layout!r}; choose orbitlaw or reference")
    seq = rows["sequence"]
    heldout = seq >= plan.train_sequences
    if layout == "reference":
        return {**rows, "heldout": heldout, "labelled": ~heldout | reference_labels(rows, plan)}
    labelled = ~heldout
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([plan.seed, 0x1ABE1])))
    idx = np.flatnonzero(heldout)
    key = rng.random(len(idx))
    order = idx[np.lexsort((key, seq[idx]))]
    starts = np.r_[0, np.flatnonzero(seq[order][1:] != seq[order][:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    labelled[order[rank < plan.labels_per_heldout]] = True
    return {**rows, "heldout": heldout, "labelled": labelled}


def reference_labels(rows: dict, plan: LabelPlan) -> np.ndarray:
    """Boolean (rows,): the held-out rows revealed as the reference code reveals them.

    One ``numpy.random.RandomState(plan.seed)``; for each held-out sequence in ascending order, the
    revealed token positions are ``rng.choice(positions, size=min(L, len(positions)), replace=False)``,
    ``positions`` the sequence's planet token positions inside the context in ascending order and L =
    ``plan.labels_per_heldout``. On a two-body stream ``positions`` is ``arange(1, context, 2)``, the odd
    indices the reference draws from (``arange(1, seq_len - 1, 2)`` with its 999-token context), so seed 0
    on the reference split (9,000 + 1,000 sequences of 1,000 tokens) reveals the very steps the reference
    reveals. A sequence without rows draws nothing. Rows are as :func:`planet_rows` gives them (sorted
    by sequence).
    """
    seq, token = rows["sequence"], rows["token"]
    revealed = np.zeros(len(seq), bool)
    rng = np.random.RandomState(plan.seed)
    first = plan.train_sequences
    bounds = np.searchsorted(seq, np.arange(first, first + plan.heldout_sequences + 1))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        if hi == lo:
            continue
        positions = np.sort(token[lo:hi])
        picked = rng.choice(positions, size=min(plan.labels_per_heldout, len(positions)), replace=False)
        revealed[lo:hi] = np.isin(token[lo:hi], picked)
    return revealed


