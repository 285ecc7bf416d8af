"""What every force probe reads: a dataset's split with forces, its planet steps as rows (the token each is read
at, its physical state and true force), the steps nearest to training, and the CSV the rows are written as.
Which rows are labelled is :mod:`orbitlaw.discovery.probes.labels`; the written result
:mod:`orbitlaw.discovery.probes.probe_result`.

Alignment. A sequence is ``[time-step token]`` then, per step t, planets 1..N then the star
(``orbitlaw.orbits.generate.token_order``), so planet j (0-based) of step t sits at token position
``p = 1 + t (N + 1) + j``. The hidden state at position p (the model input is ``tokens[:, :context]``)
predicts the force on planet j at step t. At p the model has read every body up to step t - 1 and the
planets up to j at step t (the star's step-t token comes later: attention is causal). This is the
reference alignment (labels at the odd positions of a two-body stream, no shift). Only steps whose planet
token lies inside the context are rows.

Units: AU, yr, M_sun; forces in M_sun AU / yr^2 (G = 4 pi^2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.discovery.probes.labels import LabelPlan, assign_labels
from orbitlaw.provenance import atomic_path
from orbitlaw.validate import FieldError

STATE_COLUMNS = ("rx", "ry", "vx", "vy", "m1", "m2")
"""The true state of a planet step: position and velocity relative to the star (AU, AU/yr), masses."""

CSV_COLUMNS = ("sequence", "planet", "step", "t", "x", "y", "rx", "ry", "vx", "vy", "r", "m1", "m2",
               "F_true", "F_pred", "labelled", "near_train")
VECTOR_COLUMNS = ("Fx_true", "Fy_true", "Fx_pred", "Fy_pred")
ACCELERATION_COLUMNS = ("a_true", "a_pred")
TARGETS = ("force-magnitude", "force-vector", "acceleration-magnitude")
MAGNITUDE_TARGETS = ("force-magnitude", "acceleration-magnitude")
"""Targets with one value per row (the others: a 2-vector). ``acceleration-magnitude`` is the planet's
acceleration |a| = |F| / m1 (AU/yr^2): what a model that predicts the planet's next position must compute,
G m2 / r^2 by Newton, with no planet mass in it. Its CSV columns are ``a_true`` and ``a_pred`` instead of
``F_true`` and ``F_pred`` (which it leaves as the true force and NaN)."""
QUANTITY = {"force-magnitude": "force", "force-vector": "force", "acceleration-magnitude": "acceleration"}
"""The quantity (:data:`orbitlaw.discovery.sr.verdict.QUANTITIES`) each target's law is about."""

def columns(target: str) -> tuple[str, str]:
    """The CSV columns of ``target``'s true and predicted magnitude: ``("F_true", "F_pred")`` or
    ``("a_true", "a_pred")``."""
    return ACCELERATION_COLUMNS if target == "acceleration-magnitude" else ("F_true", "F_pred")


def default_plan(n: int, train: int | None, heldout: int | None, labels_per_heldout: int, seed: int,
                 labels_per_sequence: int | None = None) -> LabelPlan:
    """The reference split (first 90% of the split trained on, the rest held out) unless told otherwise.
    ``labels_per_sequence`` L holds out every sequence with L labels each (the Solar System protocol)."""
    if labels_per_sequence is not None:
        if train is not None or heldout is not None:
            raise FieldError(message="`labels_per_sequence` holds out every sequence; do not combine it with "
                             "`train_sequences` or `heldout_sequences`")
        if labels_per_sequence < 1:
            raise FieldError("labels_per_sequence", f"must be >= 1, got {labels_per_sequence}")
        plan = LabelPlan(0, n, labels_per_sequence, seed)
    else:
        train = int(0.9 * n) if train is None else train
        if heldout is None and not 0 <= train < n:
            raise FieldError(message=f"`train_sequences` {train} leaves no held-out sequence of the split's {n} "
                             f"(give at most {n - 1}, or set `heldout_sequences`)")
        heldout = n - train if heldout is None else heldout
        plan = LabelPlan(train, heldout, labels_per_heldout, seed)
    plan.validate(n)
    return plan


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when present, else the CPU; ValueError (one line) for an unknown or absent device."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise FieldError(message="`device` cuda: no CUDA device is available")
    return torch.device(device if device != "auto" else "cuda" if torch.cuda.is_available() else "cpu")


def require_forces(split, data) -> None:
    if split.forces is None or split.positions is None or split.velocities is None:
        raise ValueError(f"dataset {data} (preset {split.manifest['preset']}) stores no forces; probe a "
                         "two-body, solar-system or nbody dataset")
    if not np.isfinite(np.asarray(split.masses)[:, -1]).any():  # an import without masses: forces all NaN
        raise ValueError(f"dataset {data} has no force labels: its systems' masses are unknown (imported without a "
                         "mass column); import them with masses to probe forces")


def open_split(data, split: str):
    dataset = orbits.load_dataset(data)
    if split not in dataset:
        raise ValueError(f"dataset {data} has no split {split!r}; it has {', '.join(dataset)}")
    out = dataset[split]
    require_forces(out, data)
    return out


# ----------------------------------------------------------------------------------------------------
# Rows: one per (sequence, planet, step) inside the context


def token_position(n_planets, step, planet):
    """Token index of planet ``planet`` (0-based) at step ``step`` in a sequence of ``n_planets``."""
    return 1 + np.asarray(step) * (np.asarray(n_planets) + 1) + np.asarray(planet)


def read_token(n_planets, step, planet, read_at: str = "planet"):
    """The token a planet step is read at: the planet's own (``read_at="planet"``, every token model and
    the default chunked models) or the step's last, the star's (``"step"``: a chunked model whose training
    windows end there, ``GPTConfig.window_end``)."""
    if read_at == "step":
        return token_position(n_planets, step, n_planets)
    if read_at != "planet":
        raise ValueError(f"unknown read position {read_at!r}; choose planet or step")
    return token_position(n_planets, step, planet)


def planet_rows(split, sequences: np.ndarray, context: int, read_at: str = "planet") -> dict[str, np.ndarray]:
    """Columns (each (rows,)) of every planet step of ``sequences`` whose token lies in ``context``: the
    token the step is read at (:func:`read_token`).

    sequence, planet, step, token (int); t (yr); x, y planet position (AU); rx, ry planet minus star
    (AU); vx, vy planet minus star velocity (AU/yr); r (AU); m1 planet, m2 star (M_sun); Fx_true, Fy_true,
    F_true: net force on the planet from the dataset (M_sun AU/yr^2). Sorted by sequence, planet, step.
    """
    sequences = np.asarray(sequences, np.int64)
    n_planets = np.asarray(split.n_planets[sequences], np.int64) if len(sequences) else np.zeros(0, np.int64)
    S = split.positions.shape[1]
    seq_l, pl_l, st_l = [], [], []
    for N in np.unique(n_planets):
        seqs = sequences[n_planets == N]
        steps = np.arange(S)
        planets = np.arange(N)
        pos = read_token(N, steps[None, :], planets[:, None], read_at)  # (N, S)
        pl, st = np.nonzero(pos < context)
        seq_l.append(np.repeat(seqs, len(pl)))
        pl_l.append(np.tile(pl, len(seqs)))
        st_l.append(np.tile(st, len(seqs)))
    if not seq_l:
        seq_l, pl_l, st_l = [np.zeros(0, np.int64)] * 3
    seq, pl, st = (np.concatenate(a).astype(np.int64) for a in (seq_l, pl_l, st_l))
    order = np.lexsort((st, pl, seq))
    seq, pl, st = seq[order], pl[order], st[order]
    star = split.positions.shape[2] - 1
    p = _gather(split.positions, seq, st, pl)
    ps = _gather(split.positions, seq, st, np.full_like(pl, star))
    v = _gather(split.velocities, seq, st, pl)
    vs = _gather(split.velocities, seq, st, np.full_like(pl, star))
    f = _gather(split.forces, seq, st, pl)
    masses = np.asarray(split.masses)
    rows = {"sequence": seq, "planet": pl, "step": st, "token": read_token(split.n_planets[seq], st, pl, read_at),
            "t": np.asarray(split.times)[seq, st], "x": p[:, 0], "y": p[:, 1],
            "rx": p[:, 0] - ps[:, 0], "ry": p[:, 1] - ps[:, 1], "vx": v[:, 0] - vs[:, 0], "vy": v[:, 1] - vs[:, 1],
            "m1": masses[seq, pl], "m2": masses[seq, -1], "Fx_true": f[:, 0], "Fy_true": f[:, 1]}
    rows["r"] = np.hypot(rows["rx"], rows["ry"])
    rows["F_true"] = np.hypot(f[:, 0], f[:, 1])
    keep = np.isfinite(rows["r"]) & np.isfinite(rows["F_true"])  # integrations can stop early (nbody)
    return {k: v[keep] for k, v in rows.items()}


def _gather(arr, seq, step, body) -> np.ndarray:
    """arr[seq, step, body] (rows, 2) from a memory-mapped (n, S, B, 2) array, one sequence block at a
    time so only the needed sequences are read."""
    out = np.empty((len(seq), 2))
    if not len(seq):
        return out
    starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
    ends = np.r_[starts[1:], len(seq)]
    block = 256
    i = 0
    while i < len(starts):
        j = min(i + block, len(starts))
        lo, hi = starts[i], ends[j - 1]
        s0, s1 = seq[lo], seq[hi - 1]
        chunk = np.asarray(arr[s0:s1 + 1])
        out[lo:hi] = chunk[seq[lo:hi] - s0, step[lo:hi], body[lo:hi]]
        i = j
    return out


def build_rows(split, plan: LabelPlan, context: int, layout: str = "orbitlaw", read_at: str = "planet") -> dict:
    """Rows of the training and held-out sequences (read at ``read_at``, :func:`read_token`), with labels
    assigned by ``layout`` (:func:`assign_labels`); ValueError if none."""
    seqs = np.arange(plan.train_sequences + plan.heldout_sequences)
    rows = assign_labels(planet_rows(split, seqs, context, read_at), plan, layout)
    if not rows["labelled"].any():
        raise ValueError(f"no labelled planet step lies inside the context of {context} tokens")
    if not (rows["heldout"] & ~rows["labelled"]).any():
        raise ValueError("no held-out planet step is left unlabelled to predict; lower --labels-per-heldout")
    return rows


def states(rows: dict, mask=slice(None)) -> np.ndarray:
    """The true state (rows, 6): rx, ry, vx, vy (AU, AU/yr), m1, m2 (M_sun)."""
    return np.stack([rows[c][mask] for c in STATE_COLUMNS], axis=1)


def true_values(rows: dict, target: str) -> np.ndarray:
    """The target's true values: (rows,) |F| for force-magnitude, (rows, 2) F for force-vector (M_sun AU/yr^2),
    (rows,) the planet's |a| = |F| / m1 for acceleration-magnitude (AU/yr^2)."""
    if target == "force-magnitude":
        return rows["F_true"]
    if target == "acceleration-magnitude":
        return rows["F_true"] / rows["m1"]
    return np.stack([rows["Fx_true"], rows["Fy_true"]], 1)


# ----------------------------------------------------------------------------------------------------
# The held-out steps the symbolic regression keeps


def nearest_to_training(test_states: np.ndarray, train_states: np.ndarray, k: int = 5000) -> np.ndarray:
    """Boolean mask (n_test,) of the ``k`` test states nearest to any training state.

    States are (n, 6) as :func:`states` (rx, ry, vx, vy, m1, m2), compared by plain Euclidean distance
    without scaling, as the reference code does (``top_k_closest_pairs_2d``: 1-nearest-neighbour distance
    of each test state to the training states, then the k smallest). Ties are broken by row order.
    """
    from sklearn.neighbors import NearestNeighbors

    test_states, train_states = np.asarray(test_states, float), np.asarray(train_states, float)
    mask = np.zeros(len(test_states), bool)
    if len(test_states) == 0 or len(train_states) == 0 or k <= 0:
        return mask
    dist, _ = NearestNeighbors(n_neighbors=1).fit(train_states).kneighbors(test_states)
    mask[np.argsort(dist.ravel(), kind="stable")[:k]] = True
    return mask


# ----------------------------------------------------------------------------------------------------
# Metrics and the written result


def write_csv_atomic(path: Path, columns: dict[str, np.ndarray]) -> None:
    """A CSV with a header, floats written with 17 significant digits (exact round trip), bools as
    True/False; written to a temporary file, fsynced and renamed."""
    texts = []
    for values in columns.values():
        values = np.asarray(values)
        if values.dtype == bool:
            texts.append(np.where(values, "True", "False"))
        elif np.issubdtype(values.dtype, np.integer):
            texts.append(values.astype(str))
        else:
            texts.append(np.char.mod("%.17g", values.astype(float)))
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(",".join(columns) + "\n")
        for i in range(0, len(texts[0]) if texts else 0, 65536):
            f.write("".join(",".join(r) + "\n" for r in zip(*(t[i:i + 65536] for t in texts), strict=True)))


