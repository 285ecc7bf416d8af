"""The inductive-bias probe (Vafa et al. 2025; docs/protocol.md, "The inductive-bias probe"): does the model
extrapolate from a few labels the way a model of the true state would?

Protocol (the reference code, ``generate_white_noise_and_oracle_predictions.py`` and
``compute_inductive_bias.py`` of its physics folder, with the differences listed below):

1. **State.** Per planet step: the planet's position and velocity relative to the star (rx, ry in AU,
   vx, vy in AU/yr) and the mass ratio m1/m2, each standardised (mean and standard deviation over the
   planet steps of the split's first 2,000 sequences).
2. **Datasets.** ``datasets`` times: draw ``sequences`` sequences; draw ``candidates`` Gaussian
   projections w of the standardised state and keep the one whose distances |Δ(s·w)| best rank-correlate
   (Spearman) with the state distances ||Δs|| (on 400 of the dataset's planet steps); the target is s·w,
   standardised over the dataset's planet steps. Reveal ``labels_per_sequence`` (reference 2) planet steps
   per sequence.
3. **Fine-tune.** The pretrained run with a fresh linear head (d -> 1, N(0, 0.02) weights, zero bias, as
   the force probe's) on the final LayerNorm; the whole model trained ``iterations`` full-batch steps with
   the per-sequence masked MSE on the revealed steps (AdamW 0.9/0.95, weight decay 0.1 on matrices,
   constant ``lr``, clip 1.0). A fresh copy of the run per dataset.
4. **Oracles,** fitted on the same revealed (state, target) pairs: least squares with an intercept, and an
   MLP 5 -> 5 -> ReLU -> 5 -> ReLU -> 1 (Adam, lr 0.05, 1,000 full-batch epochs, seeded).
5. **Extrapolations.** ``samples`` unrevealed planet steps of the dataset's sequences: the fine-tuned
   model's, each oracle's and the true target's values there.
6. **Curve and score.** For every pair of sampled steps, the distance between the model's two values and
   between the oracle's; pairs pooled over datasets and binned by the oracle distance into ``bins`` equal
   bins from 0 to the largest; per bin the mean oracle distance and the mean model distance. A model with
   the oracle's inductive bias lies on the diagonal; the score is the mean over non-empty bins of
   |mean model distance - mean oracle distance| (0 is the oracle's bias; the reference's figure: large
   for its transformer). The true target's curve is reported beside it (how far the oracle itself is from
   the truth).

Differences from the reference code, each deliberate: only planet steps are labelled, sampled and
compared (the reference samples every position, including star tokens, whose all-zero states share one
value); the model's curve pools every dataset (the reference's uses only its last dataset, a bug: it
builds the stack of all datasets and then uses the loop's last value); extrapolations are on unrevealed
steps (the reference also samples revealed ones); the oracle MLP is seeded; bins include their edges.

Reference sizes: 100 datasets of 100 sequences, 100 iterations, 2,000 samples
(:data:`REFERENCE_SIZES`); the defaults are smaller for the CPU. Resumes after a kill: each dataset's
result is written on its own (``PROBE/datasets/NNN.npz``, atomically) and kept; the settings they were
made with (the run's latest checkpoint and the code version included) must match to be reused.

Outputs: ``PROBE/inductive_bias.json`` (curves, scores per oracle, per-dataset fit, settings, seed, code
version) and ``PROBE/inductive_bias.png`` (the calibration plot).
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from orbitlaw.discovery.probes import probe_data
from orbitlaw.discovery.probes.probe import ForceProbe, open_run, predict, sequence_mse
from orbitlaw.models.batches import read_sequences
from orbitlaw.models.loop import adamw, autocast
from orbitlaw.provenance import atomic_path, code_version, dependency_versions, write_json_atomic
from orbitlaw.validate import FieldError, at_least, positive

REFERENCE_SIZES = {"datasets": 100, "sequences": 100, "iterations": 100, "samples": 2000}
"""The reference's sizes (``--reference-sizes``)."""

ORACLES = ("linear", "mlp")
STATE_ROWS_SEQUENCES = 2000
PROJECTION_ROWS = 400


@dataclass
class InductiveBiasConfig:
    run: str  # pretrained run directory
    data: str  # dataset with forces
    out: str  # PROBE directory
    split: str = "train"  # dataset split
    datasets: int = 10  # random-function datasets (reference 100)
    sequences: int = 32  # sequences per dataset (reference 100)
    labels_per_sequence: int = 2  # revealed planet steps per sequence
    iterations: int = 100  # full-batch fine-tuning steps per dataset
    lr: float = 6e-4  # constant AdamW learning rate
    samples: int = 1000  # unrevealed steps compared pairwise per dataset (reference 2000)
    bins: int = 20  # bins of the oracle distance
    candidates: int = 50  # Gaussian projections tried per dataset
    seed: int = 0  # datasets, projections, oracle MLP
    batch: int = 32  # micro-batch of sequences (not in the settings)
    device: str = "auto"  # auto, cpu or cuda

    def validate(self) -> None:
        probe_data.resolve_device(self.device)
        at_least(self, 1, "datasets", "sequences", "labels_per_sequence", "iterations", "bins", "candidates", "batch")
        at_least(self, 2, "samples")
        positive(self, "lr")
        at_least(self, 0, "seed")

    def settings(self) -> dict:
        s = asdict(self)
        for name in ("out", "device", "batch"):
            s.pop(name)
        s["run"], s["data"] = str(Path(self.run).resolve()), str(Path(self.data).resolve())
        return s


def from_flags(args, values: dict) -> dict:
    """The config's ``values`` with ``--reference-sizes`` (``args.reference_sizes``): :data:`REFERENCE_SIZES` for
    sizes not given (giving both is a ValueError)."""
    if not args.reference_sizes:
        return values
    if any(name in values for name in REFERENCE_SIZES):
        raise ValueError("--reference-sizes sets --datasets, --dataset-sequences, --iterations and --samples; "
                         "give either")
    return {**values, **REFERENCE_SIZES}


def resumable(out: Path) -> bool:
    """Whether ``out`` holds finished datasets a re-run of the probe keeps."""
    return any((out / "datasets").glob("*.npz"))


# ----------------------------------------------------------------------------------------------------
# State, target functions, oracles


def raw_state(rows: dict) -> np.ndarray:
    """(rows, 5): rx, ry (AU), vx, vy (AU/yr) of the planet relative to the star, and m1/m2."""
    return np.stack([rows["rx"], rows["ry"], rows["vx"], rows["vy"], rows["m1"] / rows["m2"]], axis=1)


def _pair_distances(values: np.ndarray) -> np.ndarray:
    """|v_i - v_j| (1-D values) or ||v_i - v_j|| (rows) over the pairs i < j, as a flat array."""
    values = np.asarray(values, np.float64)
    i, j = np.triu_indices(len(values), k=1)
    diff = values[i] - values[j]
    return np.abs(diff) if diff.ndim == 1 else np.linalg.norm(diff, axis=1)


def _ranks(x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x))
    out[np.argsort(x, kind="stable")] = np.arange(len(x))
    return out


def choose_projection(state: np.ndarray, rng: np.random.Generator, candidates: int) -> np.ndarray:
    """(5,) the Gaussian projection among ``candidates`` whose 1-D distances best rank-correlate with the
    state's distances on up to :data:`PROJECTION_ROWS` rows of ``state`` (standardised, (rows, 5))."""
    pick = rng.choice(len(state), min(PROJECTION_ROWS, len(state)), replace=False)
    ref = _ranks(_pair_distances(state[pick]))
    ref -= ref.mean()
    W = rng.standard_normal((candidates, state.shape[1]))
    best, best_rho = W[0], -np.inf
    for w in W:
        r = _ranks(_pair_distances(state[pick] @ w))
        r -= r.mean()
        rho = float(r @ ref / np.sqrt((r @ r) * (ref @ ref)))
        if rho > best_rho:
            best, best_rho = w, rho
    return best


def linear_oracle(X: np.ndarray, y: np.ndarray, X_new: np.ndarray) -> np.ndarray:
    A = np.column_stack([X, np.ones(len(X))])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return np.column_stack([X_new, np.ones(len(X_new))]) @ coef


def mlp_oracle(X: np.ndarray, y: np.ndarray, X_new: np.ndarray, seed: int, epochs: int = 1000) -> np.ndarray:
    """The reference's MLP oracle (5 -> 5 -> ReLU -> 5 -> ReLU -> 1, Adam lr 0.05, full batch, MSE), seeded."""
    gen = torch.Generator().manual_seed(seed)
    dims = [X.shape[1], 5, 5, 1]
    layers = []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        lin = torch.nn.Linear(a, b)
        bound = 1 / np.sqrt(a)
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=gen)
            lin.bias.uniform_(-bound, bound, generator=gen)
        layers += [lin, torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)[:, None]
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(xt), yt).backward()
        opt.step()
    with torch.no_grad():
        return net(torch.as_tensor(X_new, dtype=torch.float32))[:, 0].double().numpy()


# ----------------------------------------------------------------------------------------------------
# One dataset


def _fine_tune(cfg: InductiveBiasConfig, gpt, split, seqs: np.ndarray, targets: np.ndarray, context: int,
               device, torch_seed: int) -> ForceProbe:
    """A fresh copy of the run with a new 1-output head, trained ``cfg.iterations`` full-batch steps on the
    revealed targets ((len(seqs), context, 1), NaN where not revealed)."""
    gpt = copy.deepcopy(gpt)  # the pretrained run, untouched by the datasets before
    torch.manual_seed(torch_seed)
    model = ForceProbe(gpt, 1).to(device)
    optimizer = adamw(model, cfg.lr, 0.1, device=device)
    x_all = read_sequences(gpt.config, split, seqs, context)
    y_all = torch.from_numpy(targets)
    counts = np.isfinite(targets).any(axis=2).sum(axis=1)
    model.train()
    for _ in range(cfg.iterations):
        optimizer.zero_grad(set_to_none=True)
        for i in range(0, len(seqs), cfg.batch):  # accumulate the full batch in micro-batches
            x, y = x_all[i:i + cfg.batch].to(device), y_all[i:i + cfg.batch].to(device)
            with autocast(device):
                loss = sequence_mse(model(x), y)
            held = int((counts[i:i + cfg.batch] > 0).sum())
            (loss * held / int((counts > 0).sum())).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return model


def run_dataset(cfg: InductiveBiasConfig, gpt, split, k: int, context: int, offset: int, mean: np.ndarray,
                std: np.ndarray, device) -> dict[str, np.ndarray]:
    """Dataset ``k``: its target function, fine-tune, oracles; the values at the sampled unrevealed steps
    (``model``, ``linear``, ``mlp``, ``target``: (samples,)) and the fit on the revealed ones."""
    rng = np.random.Generator(np.random.PCG64([cfg.seed, k]))
    seqs = np.sort(rng.choice(len(split), cfg.sequences, replace=False))
    rows = probe_data.planet_rows(split, seqs, context + offset, gpt.config.window_end)
    if not len(rows["sequence"]):
        raise ValueError("no planet step lies inside the run's context")
    state = (raw_state(rows) - mean) / std
    w = choose_projection(state, rng, cfg.candidates)
    y = state @ w
    y = (y - y.mean()) / y.std()
    revealed = np.zeros(len(y), bool)
    for s in seqs:
        where = np.flatnonzero(rows["sequence"] == s)
        revealed[rng.choice(where, min(cfg.labels_per_sequence, len(where)), replace=False)] = True
    hidden = np.flatnonzero(~revealed)
    if len(hidden) < 2:
        raise ValueError("fewer than 2 unrevealed planet steps: use more --sequences or fewer labels")
    sample = np.sort(rng.choice(hidden, min(cfg.samples, len(hidden)), replace=False))

    where = np.searchsorted(seqs, rows["sequence"])
    position = rows["token"] - offset
    targets = np.full((len(seqs), context, 1), np.nan, np.float32)
    targets[where[revealed], position[revealed], 0] = y[revealed]
    model = _fine_tune(cfg, gpt, split, seqs, targets, context, device, torch_seed=cfg.seed * 100_003 + k)
    pred = predict(model, split, seqs, context, cfg.batch, device)[where, position, 0]
    X_lab, y_lab = state[revealed], y[revealed]
    return {
        "model": pred[sample], "target": y[sample],
        "linear": linear_oracle(X_lab, y_lab, state[sample]),
        "mlp": mlp_oracle(X_lab, y_lab, state[sample], seed=cfg.seed * 100_003 + k),
        "revealed_mse": np.float64(np.mean((pred[revealed] - y_lab) ** 2)),
        "projection": w,
    }


# ----------------------------------------------------------------------------------------------------
# Curves


def calibration_curve(results: list[dict], oracle: str, bins: int, of: str = "model") -> dict:
    """Pairs of sampled steps pooled over datasets, binned by the ``oracle``'s distance into ``bins`` equal
    bins from 0 to the largest: per bin the mean oracle distance, the mean distance of ``of`` (the model's,
    or the true target's), the pair count; ``score`` is the mean |difference| over non-empty bins."""
    top = max(float(_pair_distances(r[oracle]).max()) for r in results)
    edges = np.linspace(0.0, top, bins + 1)
    sums_o, sums_m, counts = np.zeros(bins), np.zeros(bins), np.zeros(bins, np.int64)
    for r in results:
        d_o, d_m = _pair_distances(r[oracle]), _pair_distances(r[of])
        b = np.clip(np.searchsorted(edges, d_o, side="right") - 1, 0, bins - 1)
        sums_o += np.bincount(b, d_o, bins)
        sums_m += np.bincount(b, d_m, bins)
        counts += np.bincount(b, minlength=bins)
    full = counts > 0
    mean_o = np.where(full, sums_o / np.maximum(counts, 1), np.nan)
    mean_m = np.where(full, sums_m / np.maximum(counts, 1), np.nan)
    return {"edges": edges.tolist(), "oracle_distance": [None if np.isnan(v) else float(v) for v in mean_o],
            "distance": [None if np.isnan(v) else float(v) for v in mean_m], "pairs": counts.tolist(),
            "score": float(np.mean(np.abs(mean_m[full] - mean_o[full])))}


def plot_calibration(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ORACLES), figsize=(4.2 * len(ORACLES), 4), squeeze=False)
    for ax, oracle in zip(axes[0], ORACLES, strict=True):
        for name, style in (("model", "o-"), ("target", "s--")):
            curve = doc["curves"][oracle][name]
            xs = [x for x, y in zip(curve["oracle_distance"], curve["distance"], strict=True) if x is not None]
            ys = [y for y in curve["distance"] if y is not None]
            label = (f"fine-tuned model (score {curve['score']:.3f})" if name == "model"
                     else f"true target ({curve['score']:.3f})")
            ax.plot(xs, ys, style, ms=3, label=label)
        top = max(x for x in doc["curves"][oracle]["model"]["edges"])
        ax.plot([0, top], [0, top], color="grey", lw=0.8, label="oracle's own bias")
        ax.set_xlabel(f"{oracle} oracle: distance between extrapolations")
        ax.set_ylabel("distance between extrapolations")
        ax.set_title(f"vs the {oracle} oracle on the true state")
        ax.legend(fontsize=7)
    fig.suptitle(f"inductive-bias probe: {Path(doc['settings']['run']).name}, {doc['settings']['datasets']} "
                 "datasets", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------
# The run


def inductive_bias(cfg: InductiveBiasConfig, progress: bool = True) -> dict:
    """Run (or resume) the probe; writes PROBE/inductive_bias.json and .png and returns the JSON document."""
    cfg.validate()
    settings = cfg.settings()
    device = probe_data.resolve_device(cfg.device)
    gpt, run_config, split, context, offset = open_run(cfg.run, cfg.data, cfg.split)
    if cfg.sequences > len(split):
        raise FieldError(message=f"`sequences` {cfg.sequences} is more than the split's {len(split)} sequences")
    from orbitlaw.models import checkpoint

    settings["checkpoint"] = checkpoint.weights_id(Path(cfg.run))  # a run trained further is another model
    settings["code_version"] = code_version()
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    created = not out.exists()
    done_dir = out / "datasets"
    stamp = out / "settings.json"
    if stamp.exists() and json.loads(stamp.read_text()) != settings:
        raise ValueError(f"{out} holds an inductive-bias probe with different settings; choose another --out")
    base = probe_data.planet_rows(split, np.arange(min(len(split), STATE_ROWS_SEQUENCES)), context + offset,
                                  gpt.config.window_end)
    base_state = raw_state(base)
    mean, std = base_state.mean(axis=0), base_state.std(axis=0)
    std[std == 0] = 1.0
    done_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(stamp, settings)

    from tqdm import tqdm

    results = []
    for k in tqdm(range(cfg.datasets), desc="inductive-bias datasets", unit="dataset", disable=not progress):
        path = done_dir / f"{k:03d}.npz"
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                results.append({name: z[name] for name in z.files})
            continue
        try:
            result = run_dataset(cfg, gpt, split, k, context, offset, mean, std, device)
        except BaseException:
            if created and not any(done_dir.glob("*.npz")):  # nothing kept: leave no output behind
                shutil.rmtree(out, ignore_errors=True)
            raise
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **result)
        results.append(result)

    curves = {o: {"model": calibration_curve(results, o, cfg.bins), "target": calibration_curve(results, o, cfg.bins,
                                                                                                 of="target")}
              for o in ORACLES}
    doc = {"kind": "inductive-bias", "settings": settings, "seed": cfg.seed, "reference_sizes": REFERENCE_SIZES,
           "scores": {o: curves[o]["model"]["score"] for o in ORACLES},
           "target_scores": {o: curves[o]["target"]["score"] for o in ORACLES},
           "curves": curves,
           "datasets": [{"revealed_mse": float(r["revealed_mse"]),
                         "projection": [float(v) for v in r["projection"]]} for r in results],
           "state": {"columns": ["rx", "ry", "vx", "vy", "m1/m2"], "mean": mean.tolist(), "std": std.tolist()},
           "run_config": {"model": run_config["model"], "context": context},
           "code_version": code_version(), "dependency_versions": dependency_versions()}
    plot_calibration(doc, out / "inductive_bias.png")
    write_json_atomic(out / "inductive_bias.json", doc)
    return doc
