"""Linear probes of a frozen pretrained model: how well does each layer's hidden state at a planet token
linearly encode the force and the orbit? (A cheaper window than fine-tuning; cf. Liu et al. 2026, who
find |F| linearly decodable, R^2 > 0.998, from short-context models and Kepler elements from long ones.)

For each layer l = 0 (embeddings) .. n_layer (last block; the residual stream before the final
LayerNorm), the hidden state h_l (d_model) at the planet token of step t (alignment as
:mod:`orbitlaw.discovery.probes.probe_data`) is regressed on each target by ridge regression: features standardised on
the training rows, each target standardised, the penalty chosen per target from a log grid by efficient
leave-one-out cross-validation (``sklearn.linear_model.RidgeCV``). Training rows come from the first
sequences of the split, evaluation rows from the held-out sequences (the probe's split); the score is the
held-out R^2.

Targets (units): ``force_magnitude`` |F| and ``log_force_magnitude`` ln|F| (M_sun AU/yr^2), ``force_x``,
``force_y``; ``accel_x``, ``accel_y`` and ``log_accel_magnitude``: the planet's acceleration F / m1
(AU/yr^2), what a model of motion needs (the planet's own mass never shows in its own motion);
``log_star_accel_magnitude``: ln of the star's acceleration F / m2 = G m1 / r^2 (what predicting the star's
next position needs); ``log_m1``, ``log_m2``: ln of the planet and star masses (M_sun), which of the two
masses a state carries; ``inverse_r2`` 1/r^2 (AU^-2), ``r`` (AU), ``x``, ``y`` planet position (AU), ``a``
semi-major axis (AU) and ``e`` eccentricity of the planet's orbit about the star.

Writes ``OUT/linear_probes.json``: ``layers``, ``r2`` {target: [R^2 per layer]}, ``alpha`` {target:
[chosen penalty per layer]}, ``best`` {target: {layer, r2}}, row counts, settings and code version; and
``OUT/frozen_predictions.csv``, the frozen state's own readout of the force law: on the held-out rows, |F| =
exp of the ln|F| ridge and |a| = exp of the ln|a| ridge, each at its best layer (columns as a probe's
``predictions.csv``: ``F_true``, ``F_pred``, ``a_true``, ``a_pred``, r, m1, m2, ``sequence``, every row
``near_train``), which symbolic regression judges beside the fine-tuned probe's (the frozen-state verdict:
nothing of the model is trained to the force).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from orbitlaw.discovery.probes import probe_data
from orbitlaw.models.batches import check_vocab, read_sequences, token_offset
from orbitlaw.models.evaluate import load_run
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.validate import at_least

LINEAR_TARGETS = ("force_magnitude", "log_force_magnitude", "force_x", "force_y", "accel_x", "accel_y",
                  "log_accel_magnitude", "log_star_accel_magnitude", "log_m1", "log_m2", "inverse_r2", "r", "x",
                  "y", "a", "e")
ALPHAS = tuple(10.0**k for k in range(-3, 6))


@dataclass
class LinearProbeConfig:
    run: str  # pretrained run directory
    data: str  # dataset with forces
    out: str  # output directory
    split: str = "train"  # dataset split
    train_sequences: int | None = None  # None: 90% of the split
    heldout_sequences: int | None = None  # None: the rest
    sequences: int = 2000  # at most this many training and held-out sequences
    steps_per_sequence: int = 10  # planet steps drawn per sequence
    batch: int = 32  # sequences per forward pass
    seed: int = 0  # the rows' draw
    device: str = "auto"  # auto, cpu or cuda

    def validate(self) -> None:
        probe_data.resolve_device(self.device)
        at_least(self, 1, "sequences", "steps_per_sequence", "batch")

    def settings(self) -> dict:
        s = asdict(self)
        s.pop("out")
        s.pop("device")
        s["run"], s["data"] = str(Path(self.run).resolve()), str(Path(self.data).resolve())
        s["kind"] = "linear"
        return s


def target_columns(rows: dict, split) -> dict[str, np.ndarray]:
    """Each linear target (rows,) from the rows' physics and the split's orbital elements."""
    seq, pl = rows["sequence"], rows["planet"]
    return {"force_magnitude": rows["F_true"], "log_force_magnitude": np.log(rows["F_true"]),
            "force_x": rows["Fx_true"], "force_y": rows["Fy_true"], "accel_x": rows["Fx_true"] / rows["m1"],
            "accel_y": rows["Fy_true"] / rows["m1"], "log_accel_magnitude": np.log(rows["F_true"] / rows["m1"]),
            "log_star_accel_magnitude": np.log(rows["F_true"] / rows["m2"]), "log_m1": np.log(rows["m1"]),
            "log_m2": np.log(rows["m2"]), "inverse_r2": 1.0 / rows["r"] ** 2,
            "r": rows["r"], "x": rows["x"], "y": rows["y"], "a": np.asarray(split.a)[seq, pl],
            "e": np.asarray(split.e)[seq, pl]}


def sample_rows(rows: dict, per_sequence: int, seed: int) -> dict:
    """At most ``per_sequence`` random rows of each sequence (seeded), in row order."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x11EA7])))
    seq = rows["sequence"]
    key = rng.random(len(seq))
    order = np.lexsort((key, seq))
    starts = np.r_[0, np.flatnonzero(seq[order][1:] != seq[order][:-1]) + 1] if len(seq) else np.zeros(0, int)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    keep = np.sort(order[rank < per_sequence])
    return {k: v[keep] for k, v in rows.items()}


def probe_rows(split, plan, model_config, context: int, sequences: int, per_sequence: int, seed: int
               ) -> dict[str, dict]:
    """The probes' rows, ``{"train": rows, "heldout": rows}``: at most ``per_sequence`` random planet steps
    (read at the model's window end) of each of the first ``sequences`` training and held-out sequences of
    ``plan``, so held out by system."""
    train = np.arange(min(sequences, plan.train_sequences))
    held = plan.train_sequences + np.arange(min(sequences, plan.heldout_sequences))
    return {name: sample_rows(probe_data.planet_rows(split, seqs, context + token_offset(model_config),
                                                     model_config.window_end), per_sequence, seed)
            for name, seqs in (("train", train), ("heldout", held))}


@torch.no_grad()
def hidden_features(model, split, rows: dict, context: int, batch: int, device) -> np.ndarray:
    """(n_layer + 1, rows, d_model) float32 hidden states at each row's planet token."""
    seqs = np.unique(rows["sequence"])
    offset = token_offset(model.config)
    feats = None
    for i in range(0, len(seqs), batch):
        chunk = seqs[i:i + batch]
        x = read_sequences(model.config, split, chunk, context).to(device)
        sel = np.flatnonzero(np.isin(rows["sequence"], chunk))
        positions = (rows["token"][sel] - offset).astype(np.int64)
        at = np.unique(positions)  # only the positions some row reads (a chunked model skips the other windows)
        states = model.hidden_states(x, torch.from_numpy(at).to(device))
        b = torch.from_numpy(np.searchsorted(chunk, rows["sequence"][sel])).to(device)
        p = torch.from_numpy(np.searchsorted(at, positions)).to(device)
        if feats is None:
            feats = np.empty((len(states), len(rows["sequence"]), states[0].shape[-1]), np.float32)
        for layer, h in enumerate(states):
            feats[layer, sel] = h[b, p].float().cpu().numpy()
    return feats


def ridge_r2(X_train: np.ndarray, Y_train: np.ndarray, X_test: np.ndarray, Y_test: np.ndarray,
             alphas=ALPHAS) -> tuple[np.ndarray, np.ndarray]:
    """Held-out R^2 (targets,) and chosen penalties (targets,) of a ridge fit per target column."""
    r2, alpha, _ = ridge_fit(X_train, Y_train, X_test, Y_test, alphas)
    return r2, alpha


def ridge_fit(X_train: np.ndarray, Y_train: np.ndarray, X_test: np.ndarray, Y_test: np.ndarray,
              alphas=ALPHAS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ridge_r2` and the held-out predictions (test rows, targets)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import r2_score
    from sklearn.preprocessing import StandardScaler

    xs = StandardScaler().fit(X_train)
    ys = StandardScaler().fit(Y_train)
    model = RidgeCV(alphas=alphas, alpha_per_target=True).fit(xs.transform(X_train), ys.transform(Y_train))
    pred = ys.inverse_transform(model.predict(xs.transform(X_test)).reshape(len(X_test), -1))
    r2 = r2_score(Y_test, pred, multioutput="raw_values")
    return np.asarray(r2, float), np.broadcast_to(np.asarray(model.alpha_, float), (Y_train.shape[1],)), pred


def linear_probes(cfg: LinearProbeConfig, progress: bool = True) -> dict:
    """Probe every layer of ``cfg.run`` for every target; write OUT/linear_probes.json; return it."""
    cfg.validate()
    settings = cfg.settings()
    device = probe_data.resolve_device(cfg.device)
    model, run_config = load_run(cfg.run, device)
    split = probe_data.open_split(cfg.data, cfg.split)
    check_vocab(model.config, split)
    context = int(run_config["context"])
    plan = probe_data.default_plan(len(split), cfg.train_sequences, cfg.heldout_sequences, 0, cfg.seed)
    if plan.train_sequences < 1:
        raise ValueError("linear probes need at least one training sequence")
    parts, columns = {}, {}
    rows_of = probe_rows(split, plan, model.config, context, cfg.sequences, cfg.steps_per_sequence, cfg.seed)
    for name, rows in rows_of.items():
        if len(rows["sequence"]) < 2:
            raise ValueError(f"too few {name} planet steps inside the context of {context} tokens")
        columns[name] = target_columns(rows, split)
    # a target the dataset does not know (the orbital elements of trajectories imported without velocities) is
    # left out, not guessed: its R^2 is None
    kept = [t for t in LINEAR_TARGETS if all(np.isfinite(c[t]).all() for c in columns.values())]
    for name, rows in rows_of.items():
        parts[name] = (hidden_features(model, split, rows, context, cfg.batch, device),
                       np.stack([columns[name][t] for t in kept], 1))
    (Xtr, Ytr), (Xte, Yte) = parts["train"], parts["heldout"]
    from tqdm import tqdm

    r2, alpha, preds = [], [], []
    for layer in tqdm(range(len(Xtr)), desc="linear probes", unit="layer", disable=not progress):
        s, a, p = ridge_fit(Xtr[layer], Ytr, Xte[layer], Yte)
        r2.append(s)
        alpha.append(a)
        preds.append(p)
    r2, alpha = np.array(r2), np.array(alpha)
    left_out = {t: None for t in LINEAR_TARGETS if t not in kept}
    result = {"layers": list(range(len(r2))), "targets": kept, "left_out": sorted(left_out),
              "r2": {**{t: [float(v) for v in r2[:, i]] for i, t in enumerate(kept)}, **left_out},
              "alpha": {**{t: [float(v) for v in alpha[:, i]] for i, t in enumerate(kept)}, **left_out},
              "best": {**{t: {"layer": int(np.argmax(r2[:, i])), "r2": float(np.max(r2[:, i]))}
                          for i, t in enumerate(kept)}, **left_out},
              "rows": {"train": int(len(Ytr)), "heldout": int(len(Yte))},
              "layer_meaning": "0 = embeddings, l = output of block l (before the final LayerNorm)",
              "context": context, "settings": settings, "seed": cfg.seed, "code_version": code_version(),
              "dependency_versions": dependency_versions()}
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    frozen_readout(out / "frozen_predictions.csv", rows_of["heldout"], preds, r2, kept)
    write_json_atomic(out / "linear_probes.json", result)
    return result


def frozen_readout(path: Path, rows: dict, preds: list[np.ndarray], r2: np.ndarray,
                   targets: list[str] = LINEAR_TARGETS) -> None:
    """Write the frozen state's |F| and |a| on the held-out ``rows`` (the module doc), from the ln|F| and ln|a|
    ridges' predictions (``preds``: per layer, (rows, targets), the targets ``targets``) at each one's best layer
    by held-out R^2."""
    def best(target):
        i = targets.index(target)
        return np.exp(preds[int(np.argmax(r2[:, i]))][:, i])

    a_true = rows["F_true"] / rows["m1"]
    cols = {"sequence": rows["sequence"], "planet": rows["planet"], "step": rows["step"], "r": rows["r"],
            "m1": rows["m1"], "m2": rows["m2"], "F_true": rows["F_true"], "F_pred": best("log_force_magnitude"),
            "a_true": a_true, "a_pred": best("log_accel_magnitude"), "near_train": np.ones(len(a_true), bool)}
    probe_data.write_csv_atomic(path, cols)
