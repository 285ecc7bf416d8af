"""What every force probe shares: planet steps of a dataset, their physical state, which steps are
labelled, and the written result (``predictions.csv``, ``metrics.json``).

Alignment. A sequence is ``[time-step token]`` then, per step t, planets 1..N then the star
(``orbitlaw.orbits.generate.token_order``), so planet j (0-based) of step t sits at token position
``p = 1 + t (N + 1) + j``. The hidden state at position p (the model input is ``tokens[:, :context]``)
predicts the force on planet j at step t. At p the model has read every body up to step t - 1 and the
planets up to j at step t (the star's step-t token comes later: attention is causal). This is the
reference alignment (labels at the odd positions of a two-body stream, no shift). Only steps whose planet
token lies inside the context are rows.

Units: AU, yr, M_sun; forces in M_sun AU / yr^2 (G = 4 pi^2).

Labels: the first ``train_sequences`` sequences of the split are labelled at every planet step; the next
``heldout_sequences`` are held out, each with ``labels_per_heldout`` planet steps revealed at random
(seeded). Metrics are on the held-out steps that are not revealed. Two layouts draw the revealed steps
(:func:`assign_labels`): ``orbitlaw`` (a PCG64 stream, the toolkit's own) and ``reference`` (the reference
code's ``numpy.random.RandomState`` draw from the planet token positions, step for step).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.provenance import atomic_path, code_version, dependency_versions, write_json_atomic

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
"""The quantity (:data:`orbitlaw.discovery.verdict.QUANTITIES`) each target's law is about."""

LAYOUTS = ("orbitlaw", "reference")
"""How the revealed held-out steps are drawn; see :func:`assign_labels`."""


def columns(target: str) -> tuple[str, str]:
    """The CSV columns of ``target``'s true and predicted magnitude: ``("F_true", "F_pred")`` or
    ``("a_true", "a_pred")``."""
    return ACCELERATION_COLUMNS if target == "acceleration-magnitude" else ("F_true", "F_pred")


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


def default_plan(n: int, train: int | None, heldout: int | None, labels_per_heldout: int, seed: int,
                 labels_per_sequence: int | None = None) -> LabelPlan:
    """The reference split (first 90% of the split trained on, the rest held out) unless told otherwise.
    ``labels_per_sequence`` L holds out every sequence with L labels each (the Solar System protocol)."""
    if labels_per_sequence is not None:
        if train is not None or heldout is not None:
            raise ValueError("--labels-per-sequence holds out every sequence; do not combine it with "
                             "--train-sequences or --heldout-sequences")
        if labels_per_sequence < 1:
            raise ValueError(f"--labels-per-sequence must be >= 1, got {labels_per_sequence}")
        plan = LabelPlan(0, n, labels_per_sequence, seed)
    else:
        train = int(0.9 * n) if train is None else train
        heldout = n - train if heldout is None else heldout
        plan = LabelPlan(train, heldout, labels_per_heldout, seed)
    plan.validate(n)
    return plan


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when present, else the CPU; ValueError (one line) for an unknown or absent device."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    return torch.device(device if device != "auto" else "cuda" if torch.cuda.is_available() else "cpu")


def require_forces(split, data) -> None:
    if split.forces is None or split.positions is None or split.velocities is None:
        raise ValueError(f"dataset {data} (preset {split.manifest['preset']}) stores no forces; probe a "
                         "two-body, solar-system or nbody dataset")


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


def regression_metrics(true: np.ndarray, pred: np.ndarray) -> dict:
    """R^2, MAE (in the target's units) and R^2 of the log for magnitudes (n,); for vectors (n, 2) the same on
    the magnitudes plus ``r2_vector`` (pooled over x and y) and ``mae_vector``. ``r2_log`` leaves out the
    ``nonpositive_pred`` rows whose predicted magnitude is <= 0 (a raw-scaled head can predict those)."""
    true, pred = np.asarray(true, float), np.asarray(pred, float)
    if len(true) == 0:
        return {"n": 0}
    out = {"n": int(len(true))}
    if true.ndim == 2:
        out["r2_vector"] = _r2(true.ravel(), pred.ravel(), center=True)
        out["mae_vector"] = float(np.mean(np.abs(true - pred)))
        true, pred = np.hypot(*true.T), np.hypot(*pred.T)
    out["r2"] = _r2(true, pred)
    out["mae"] = float(np.mean(np.abs(true - pred)))
    pos = (true > 0) & (pred > 0)
    out["nonpositive_pred"] = int(np.sum(pred <= 0))
    out["r2_log"] = _r2(np.log(true[pos]), np.log(pred[pos])) if pos.sum() > 1 else None
    return out


def _r2(true, pred, center=True) -> float | None:
    ss_tot = np.sum((true - true.mean()) ** 2) if center else np.sum(true**2)
    if len(true) < 2 or ss_tot == 0:
        return None
    return float(1 - np.sum((true - pred) ** 2) / ss_tot)


def check_out(out: Path, settings: dict) -> None:
    """Refuse an ``out`` that is a file or holds a result of different settings (creates nothing)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    metrics = out / "metrics.json"
    if metrics.exists():
        import json

        from orbitlaw.provenance import inside

        inside(out, metrics, "probe output")  # a link out of the output is refused, never read
        try:
            old = json.loads(metrics.read_text()).get("settings")
        except ValueError:
            old = None
        if old is not None and not same_settings(old, settings):
            raise ValueError(f"{out} holds a probe result with different settings; choose another --out")


def same_settings(old: dict, new: dict) -> bool:
    """Whether recorded settings ``old`` equal ``new``; a result written before the fine-tune recorded its
    ``protocol`` (or its lr ``schedule``) was an ``orbitlaw`` one (at a constant lr)."""
    for key, before in (("protocol", "orbitlaw"), ("schedule", "constant")):
        if key in new and key not in old:
            old = {**old, key: before}
    return old == new


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


def full_window(rows: dict, window: int | None, offset: int) -> np.ndarray:
    """Boolean mask (rows,): the rows whose reader sees a whole window of ``window`` positions (a chunked
    model, or a window oracle; None: every row). Input position ``token - offset`` reads positions
    ``token - offset - window + 1 ..``, so the first ``window - 1`` positions read only a prefix: at a planet
    step before the W-th of a W-step window no reader can see the curvature that gives the masses, and a
    chunked model was never trained to predict there."""
    if window is None:
        return np.ones(len(rows["token"]), bool)
    return np.asarray(rows["token"]) - offset >= window - 1


def write_result(out: Path, split, rows: dict, pred: np.ndarray, target: str, kind: str, settings: dict,
                 extra: dict | None = None, near_k: int = 5000, eligible: np.ndarray | None = None) -> dict:
    """Write ``out/predictions.csv`` (the held-out rows), ``out/metrics.json`` and, for force vectors on
    the solar-system preset, ``out/force_arrows.png``. ``pred`` is (rows,) or (rows, 2) in the target's units
    (:func:`true_values`), NaN where a row was not predicted. ``eligible`` (rows,): the rows ``near_train``
    (the symbolic regression's rows) may pick from (:func:`full_window`; default every row). Returns the
    metrics dict."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    true = true_values(rows, target)
    predicted = np.all(np.isfinite(pred.reshape(len(pred), -1)), axis=1)
    held, lab = rows["heldout"], rows["labelled"]
    test = held & ~lab
    train_ref = lab & ~held if (lab & ~held).any() else lab
    pool = test if eligible is None else test & eligible
    near = nearest_to_training(states(rows, pool), states(rows, train_ref), near_k)
    near_col = np.zeros(len(held), bool)
    near_col[np.flatnonzero(pool)] = near

    def score(mask):
        mask = mask & predicted
        return regression_metrics(true[mask], pred[mask])

    metrics = {"heldout_unlabelled": score(test), "heldout_all": score(held), "heldout_near_train": score(near_col),
               "train_labelled": score(lab & ~held)}
    cols = {c: rows[c] for c in CSV_COLUMNS if c in rows}
    if target == "force-vector":
        cols["F_pred"] = np.hypot(pred[:, 0], pred[:, 1])
        cols.update(Fx_true=rows["Fx_true"], Fy_true=rows["Fy_true"], Fx_pred=pred[:, 0], Fy_pred=pred[:, 1])
    elif target == "acceleration-magnitude":
        cols.update(F_pred=np.full(len(pred), np.nan), a_true=true, a_pred=pred)
    else:
        cols["F_pred"] = pred
    cols["near_train"] = near_col
    cols = {k: np.asarray(v)[held] for k, v in cols.items()}
    extra_columns = {"force-vector": VECTOR_COLUMNS, "acceleration-magnitude": ACCELERATION_COLUMNS}.get(target, ())
    cols = {k: cols[k] for k in (*CSV_COLUMNS, *extra_columns)}
    write_csv_atomic(out / "predictions.csv", cols)
    result = {"kind": kind, "target": target, "columns": dict(zip(("true", "pred"), columns(target), strict=True)),
              "units": {"force": "M_sun AU/yr^2", "acceleration": "AU/yr^2", "length": "AU", "G": orbits.G},
              "metrics": metrics, "settings": settings, "seed": settings.get("seed"),
              "counts": {"rows": int(len(held)), "labelled": int(lab.sum()), "heldout_rows": int(held.sum()),
                         "heldout_unlabelled": int(test.sum()), "near_train": int(near_col.sum())},
              "dataset": {"path": str(Path(settings["data"]).resolve()), "preset": split.manifest["preset"],
                          "config_hash": split.manifest["config_hash"], "split": settings["split"]},
              "code_version": code_version(),
              "dependency_versions": dependency_versions(), **(extra or {})}
    if target == "force-vector" and split.manifest["preset"] == "solar-system":
        from orbitlaw.discovery.forces_plot import plot_force_arrows

        params = split.manifest["params"]
        names = None if params.get("together") else {
            int(q): params["planets"][int(q) % len(params["planets"])][0] for q in np.unique(cols["sequence"])}
        plot_force_arrows(cols, out / "force_arrows.png", title=kind, names=names)
        result["figure"] = "force_arrows.png"
    write_json_atomic(out / "metrics.json", result)
    return result
