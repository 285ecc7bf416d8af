"""Oracle baselines written through the same path as the fine-tuned probe (same rows, same labels, same
``predictions.csv`` and ``metrics.json``), so the symbolic regression treats them alike.

- ``knn`` (the reference oracle): k-nearest-neighbours regression on the true state (planet minus star
  position and velocity, AU and AU/yr, planet and star masses, M_sun), features standardised on the
  labels, k = 2, fitted on exactly the probe's labelled steps; predicts |F| or (F_x, F_y) in
  M_sun AU/yr^2.
- ``true-law``: Newton's law itself, F = G m1 m2 / r^2 along the planet-star line, G = 4 pi^2
  AU^3 M_sun^-1 yr^-2. Exact on two-body data (R^2 = 1 up to rounding); on nbody data it misses the
  planets' mutual pulls.

The oracles need no run: the rows are those of a model with ``context`` tokens (default: the whole
sequence, ``seq_len - 1``, as the reference's 999-token block).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import orbits
from discovery import probe_data

ORACLES = ("knn", "true-law")


@dataclass
class OracleConfig:
    oracle: str
    data: str
    out: str
    target: str = "force-magnitude"
    split: str = "train"
    context: int | None = None
    train_sequences: int | None = None
    heldout_sequences: int | None = None
    labels_per_heldout: int = 2
    labels_per_sequence: int | None = None
    neighbors: int = 2
    seed: int = 0
    near_train: int = 5000
    protocol: str = "orbitlaw"

    def validate(self) -> None:
        if self.protocol not in probe_data.LAYOUTS:
            raise ValueError(f"unknown protocol {self.protocol!r}; choose orbitlaw or reference")
        if self.oracle not in ORACLES:
            raise ValueError(f"unknown oracle {self.oracle!r}; choose knn or true-law")
        if self.target not in probe_data.TARGETS:
            raise ValueError(f"unknown target {self.target!r}; choose force-magnitude or force-vector")
        if self.context is not None and self.context < 2:
            raise ValueError(f"--context must be >= 2, got {self.context}")
        if self.neighbors < 1:
            raise ValueError(f"--neighbors must be >= 1, got {self.neighbors}")
        if self.near_train < 0:
            raise ValueError("--near-train must be >= 0")

    def settings(self) -> dict:
        s = asdict(self)
        s.pop("out")
        s["data"] = str(Path(self.data).resolve())
        s["kind"] = self.oracle
        return s


def true_law(rows: dict, target: str) -> np.ndarray:
    """Newton's force on each row's planet from its star: (rows,) |F| or (rows, 2) F, M_sun AU/yr^2."""
    r = rows["r"]
    mag = orbits.G * rows["m1"] * rows["m2"] / r**2
    if target == "force-magnitude":
        return mag
    return -np.stack([rows["rx"], rows["ry"]], 1) / r[:, None] * mag[:, None]  # towards the star


def knn(rows: dict, target: str, neighbors: int = 2) -> np.ndarray:
    """kNN regression on the standardised true state, fitted on the labelled rows; predicts every row."""
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.preprocessing import StandardScaler

    lab = rows["labelled"]
    X = probe_data.states(rows)
    scaler = StandardScaler().fit(X[lab])
    y = probe_data.true_forces(rows, target)[lab]
    k = min(neighbors, int(lab.sum()))
    model = KNeighborsRegressor(n_neighbors=k).fit(scaler.transform(X[lab]), y)
    return model.predict(scaler.transform(X))


def run_oracle(cfg: OracleConfig) -> dict:
    """Fit/evaluate an oracle and write OUT/predictions.csv and OUT/metrics.json; returns the metrics."""
    cfg.validate()
    settings = cfg.settings()
    split = probe_data.open_split(cfg.data, cfg.split)
    context = cfg.context if cfg.context is not None else split.tokens.shape[1] - 1
    context = min(context, split.tokens.shape[1])
    plan = probe_data.default_plan(len(split), cfg.train_sequences, cfg.heldout_sequences, cfg.labels_per_heldout,
                                   cfg.seed, cfg.labels_per_sequence)
    rows = probe_data.build_rows(split, plan, context, cfg.protocol)  # the protocol's held-out label draw
    settings.update(plan=asdict(plan), context=context)
    probe_data.check_out(Path(cfg.out), settings)
    pred = true_law(rows, cfg.target) if cfg.oracle == "true-law" else knn(rows, cfg.target, cfg.neighbors)
    return probe_data.write_result(Path(cfg.out), split, rows, pred, cfg.target, cfg.oracle, settings,
                                   near_k=cfg.near_train)
