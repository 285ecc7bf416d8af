"""Oracle baselines written through the same path as the fine-tuned probe (same rows, same labels, same
``predictions.csv`` and ``metrics.json``), so the symbolic regression treats them alike.

- ``knn`` (the reference oracle): k-nearest-neighbours regression on the true state (planet minus star
  position and velocity, AU and AU/yr, planet and star masses, M_sun), features standardised on the
  labels, k = 2, fitted on exactly the probe's labelled steps; predicts the target: |F| or (F_x, F_y) in
  M_sun AU/yr^2, or the planet's |a| = |F| / m1 in AU/yr^2.
- ``knn-window`` and ``mlp-window``: the fair oracles of a chunked model (docs/controls.md): k-NN
  (k = ``neighbors``) or an MLP (two hidden layers of 64, scikit-learn, early stopping; a magnitude |F|
  or |a| learned as its log) on exactly the raw positions a model trained on chunks of
  W = ``window_steps`` steps reads at the row: the W (N + 1) body positions (AU) ending at the planet's
  token (the first positions of a sequence repeat its first position), standardised on the labels. They
  say what those positions can tell (``window_inputs="bins"``: the same positions snapped to the tokeniser's
  bin centres, what a model fed bin ids could know at best). As for a chunked model, ``near_train`` (the
  symbolic regression's rows) picks only rows that see a whole window
  (:func:`orbitlaw.discovery.probes.probe_result.full_window`).
- ``true-law``: Newton's law itself, F = G m1 m2 / r^2 along the planet-star line (|a| = G m2 / r^2 for
  the acceleration), G = 4 pi^2 AU^3 M_sun^-1 yr^-2. Exact on two-body data (R^2 = 1 up to rounding); on
  nbody data it misses the planets' mutual pulls.

The oracles need no run: the rows are those of a model with ``context`` tokens (default: the whole
sequence, ``seq_len - 1``, as the reference's 999-token block).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from orbitlaw import orbits
from orbitlaw.discovery.probes import labels, probe_data, probe_result
from orbitlaw.discovery.probes.registry import ORACLES
from orbitlaw.models.gpt import WINDOW_ENDS
from orbitlaw.validate import FieldError, at_least


@dataclass
class OracleConfig:
    oracle: str  # ORACLES
    data: str  # dataset with forces
    out: str  # PROBE directory
    target: str = "force-magnitude"  # probe_data.TARGETS
    split: str = "train"  # dataset split
    context: int | None = None  # tokens per sequence (None: all)
    train_sequences: int | None = None  # None: 90% of the split
    heldout_sequences: int | None = None  # None: the rest
    labels_per_heldout: int = 2  # revealed steps per held-out sequence
    labels_per_sequence: int | None = None  # L: every sequence held out with L labels
    neighbors: int = 2  # k of the k-NN oracles
    window_steps: int = 3  # W: steps of raw positions the window oracles read
    window_end: str = "planet"  # the window ends at the planet's token or the step's last
    window_inputs: str = "positions"  # WINDOW_INPUTS: the window's positions as they are, or snapped to bin centres
    seed: int = 0  # label draw, MLP
    near_train: int = 5000  # held-out steps marked near_train
    protocol: str = "orbitlaw"  # the label layout: orbitlaw or reference

    def validate(self) -> None:
        if self.protocol not in labels.LAYOUTS:
            raise ValueError(f"unknown protocol {self.protocol!r}; choose orbitlaw or reference")
        if self.oracle not in ORACLES:
            raise ValueError(f"unknown oracle {self.oracle!r}; choose one of {', '.join(ORACLES)}")
        if self.target not in probe_data.TARGETS:
            raise ValueError(f"unknown target {self.target!r}; choose {', '.join(probe_data.TARGETS)}")
        at_least(self, 2, "context")
        at_least(self, 1, "window_steps", "neighbors")
        at_least(self, 0, "near_train")
        if self.window_end not in WINDOW_ENDS:
            raise ValueError(f"unknown --window-end {self.window_end!r}; choose {' or '.join(WINDOW_ENDS)}")
        if self.window_inputs not in WINDOW_INPUTS:
            raise ValueError(f"unknown --window-inputs {self.window_inputs!r}; choose {' or '.join(WINDOW_INPUTS)}")
        if self.window_inputs != "positions" and not self.oracle.endswith("-window"):
            raise FieldError(message=f"`window_inputs` is for the window oracles; `oracle` {self.oracle} reads the "
                             "true state")
        if self.window_end != "planet" and not self.oracle.endswith("-window"):
            raise FieldError(message=f"`window_end` is for the window oracles; `oracle` {self.oracle} reads the true "
                             "state")

    def settings(self) -> dict:
        s = asdict(self)
        s.pop("out")
        s["data"] = str(Path(self.data).resolve())
        s["kind"] = self.oracle
        if self.window_inputs == "positions":  # the default reads as before: its settings (and caches) unchanged
            s.pop("window_inputs")
        return s


def true_law(rows: dict, target: str) -> np.ndarray:
    """Newton's law for each row's planet and its star: (rows,) |F| or (rows, 2) F (M_sun AU/yr^2), or the
    planet's (rows,) |a| = G m2 / r^2 (AU/yr^2), as ``target`` asks."""
    r = rows["r"]
    if target == "acceleration-magnitude":
        return orbits.G * rows["m2"] / r**2
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
    y = probe_data.true_values(rows, target)[lab]
    k = min(neighbors, int(lab.sum()))
    model = KNeighborsRegressor(n_neighbors=k).fit(scaler.transform(X[lab]), y)
    return model.predict(scaler.transform(X))


WINDOW_INPUTS = ("positions", "bins")
"""What the window oracles read: the continuous positions (AU), or the same positions snapped to the centres of
the tokeniser's bins (``bins``: what a model fed bin ids could know at best, 0.0143 AU bins for the reference's
tokeniser), so that a binned window's own distance from Newton can be set beside a model's."""


def window_features(split, rows: dict, window_steps: int, inputs: str = "positions") -> np.ndarray:
    """(rows, 2 W (N + 1)) the raw positions (AU) a model trained on W-step chunks reads at each row: the
    W (N + 1) continuous positions ending at the row's token (its planet's or the step's last, as the rows
    were read; continuous index token - 1), earlier
    than the sequence start filled with its first position; with ``inputs="bins"`` each coordinate is the centre
    of its tokeniser bin (the split's own tokeniser). One planet count per split."""
    counts = np.unique(np.asarray(split.n_planets)[np.unique(rows["sequence"])])
    if len(counts) != 1:
        raise ValueError("window oracles need one planet count per dataset")
    L = window_steps * (int(counts[0]) + 1)
    seqs, inverse = np.unique(rows["sequence"], return_inverse=True)
    cont = split.continuous(seqs)  # (S, T, 2)
    idx = np.maximum(rows["token"][:, None] - 1 - np.arange(L - 1, -1, -1)[None, :], 0)  # (rows, L)
    window = cont[inverse[:, None], idx].reshape(len(idx), 2 * L)
    if inputs == "bins":
        spec = split.tokenizer
        window = spec.decode(spec.encode(window)[0])
    return window


def window_mlp(seed: int):
    """The MLP oracle's (unfitted) regressor: sklearn, 64 x 64, early stopping, on standardised inputs."""
    from sklearn.neural_network import MLPRegressor

    return MLPRegressor(hidden_layer_sizes=(64, 64), early_stopping=True, max_iter=300, random_state=seed)


def fit_predict_window(X: np.ndarray, rows: dict, target: str, oracle: str, neighbors: int, seed: int
                       ) -> np.ndarray:
    """Fit k-NN or an MLP on the labelled rows of features X; predict every row (|F| or F, M_sun AU/yr^2)."""
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.preprocessing import StandardScaler

    lab = rows["labelled"]
    scaler = StandardScaler().fit(X[lab])
    y = probe_data.true_values(rows, target)[lab]
    if oracle == "knn-window":
        model = KNeighborsRegressor(n_neighbors=min(neighbors, int(lab.sum()))).fit(scaler.transform(X[lab]), y)
        return model.predict(scaler.transform(X))
    magnitude = target in probe_data.MAGNITUDE_TARGETS
    z = np.log(y) if magnitude else y / np.sqrt(np.mean(y**2))
    pred = window_mlp(seed).fit(scaler.transform(X[lab]), z).predict(scaler.transform(X))
    return np.exp(pred) if magnitude else pred * np.sqrt(np.mean(y**2))


def run_oracle(cfg: OracleConfig) -> dict:
    """Fit/evaluate an oracle and write OUT/predictions.csv and OUT/metrics.json; returns the metrics."""
    cfg.validate()
    settings = cfg.settings()
    split = probe_data.open_split(cfg.data, cfg.split)
    context = cfg.context if cfg.context is not None else split.tokens.shape[1] - 1
    context = min(context, split.tokens.shape[1])
    plan = probe_data.default_plan(len(split), cfg.train_sequences, cfg.heldout_sequences, cfg.labels_per_heldout,
                                   cfg.seed, cfg.labels_per_sequence)
    rows = probe_data.build_rows(split, plan, context, cfg.protocol, cfg.window_end)  # the protocol's label draw
    settings.update(plan=asdict(plan), context=context)
    probe_result.check_out(Path(cfg.out), settings)
    eligible = None  # the state oracles read every row whole
    if cfg.oracle == "true-law":
        pred = true_law(rows, cfg.target)
    elif cfg.oracle == "knn":
        pred = knn(rows, cfg.target, cfg.neighbors)
    else:
        X = window_features(split, rows, cfg.window_steps, cfg.window_inputs)
        pred = fit_predict_window(X, rows, cfg.target, cfg.oracle, cfg.neighbors, cfg.seed)
        eligible = probe_result.full_window(rows, X.shape[1] // 2, offset=1)  # continuous index token - 1
    return probe_result.write_result(Path(cfg.out), split, rows, pred, cfg.target, cfg.oracle, settings,
                                   near_k=cfg.near_train, eligible=eligible)
