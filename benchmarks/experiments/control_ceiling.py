"""What any readout of a W-step window of a ``binary`` orbit can reach, and what the verdict says of it.

The positive control asks a model that reads W = 3 steps of both bodies (docs/controls.md) to carry
|F| = G m1 m2 / r^2, where both masses show only in the curvature. Before blaming the model or the probe,
this measures the ceiling of the readout itself on the control's own rows (the planet steps of a ``binary``
set, held out by system, the 5,000 near-train rows as the probe's ``predictions.csv`` has them), for
orbits of several sizes at the preset's six-month step (the size sets the orbit swept per step,
omega*dt, and so how curved and how well conditioned three points are):

- ``finite-difference``: no learning. Each body's acceleration from its three positions,
  (x_t - 2 x_{t-1} + x_{t-2}) / dt^2, gives the other's mass (|a_planet| r^2 / G = m2), the star's
  unseen position at t is extrapolated quadratically, and F = G m1 m2 / r_t^2. Exact in the limit
  omega*dt -> 0; its error is structured, (omega dt)^2 / 12 per acceleration.
- ``mlp``: the best case of a probe: an MLP (3 x 256, SiLU) trained directly on ln|F| from the 12 raw
  window coordinates of the training systems (the fine-tuned probe must learn the same map through a
  pretrained model).

Each readout's log error (mean, sd, 99th percentile) and the verdict of ``orbitlaw discover`` on its
near-train rows at each ``--tolerances`` (with ``newton_departure``).

    python benchmarks/experiments/control_ceiling.py --out benchmarks/results/control_ceiling.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from orbitlaw.discovery.probes import oracle, probe_data
from orbitlaw.discovery.sr.backends import SearchSettings
from orbitlaw.discovery.sr.symbolic import discover_law
from orbitlaw.orbits import load_dataset, simulate
from orbitlaw.orbits.constants import G_EXACT as G  # 4 pi^2 AU^3 M_sun^-1 yr^-2
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

W = 3


def finite_difference(X: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """|F| (M_sun AU/yr^2) from windows X (rows, 12): star t-3, planet t-2, star t-2, planet t-1, star t-1,
    planet t, each (x, y) in AU; ``dt`` (rows,) in yr."""
    s3, p2, s2, p1, s1, p0 = (X[:, 2 * i:2 * i + 2] for i in range(6))
    h2 = (dt**2)[:, None]
    a_planet, a_star = (p0 - 2 * p1 + p2) / h2, (s1 - 2 * s2 + s3) / h2
    m2 = np.linalg.norm(a_planet, axis=1) * np.linalg.norm(p1 - s1, axis=1) ** 2 / G
    m1 = np.linalg.norm(a_star, axis=1) * np.linalg.norm(p2 - s2, axis=1) ** 2 / G
    r_t = np.linalg.norm(p0 - (3 * s1 - 3 * s2 + s3), axis=1)
    return G * m1 * m2 / r_t**2


def mlp(X: np.ndarray, y: np.ndarray, train: np.ndarray, epochs: int, seed: int) -> np.ndarray:
    """ln|F| predicted for every row by an MLP fitted on the ``train`` rows (standardised in and out)."""
    torch.manual_seed(seed)
    mu, sd = X[train].mean(0), X[train].std(0)
    Xt = torch.tensor((X - mu) / sd, dtype=torch.float32)
    ym, ys = float(y[train].mean()), float(y[train].std())
    yt = torch.tensor((y - ym) / ys, dtype=torch.float32)
    width = 256
    dims, layers = [X.shape[1], width, width, width], []
    for a, b in zip(dims, dims[1:], strict=False):
        layers += [torch.nn.Linear(a, b), torch.nn.SiLU()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    rows = np.nonzero(train)[0]
    steps = max(1, epochs * len(rows) // 512)
    opt = torch.optim.Adam(net.parameters(), 2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=steps)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        b = torch.from_numpy(rng.choice(rows, 512))
        loss = ((net(Xt[b]).squeeze(-1) - yt[b]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        return net(Xt).squeeze(-1).numpy().astype(np.float64) * ys + ym


def verdicts(rows: dict, held: np.ndarray, near: np.ndarray, F: np.ndarray, tolerances, sr_seeds: int,
             budget: int) -> dict:
    table = {k: rows[k][held][near] for k in ("r", "m1", "m2")}
    table["F"] = F[held][near]
    out = {}
    for tol in tolerances:
        law = discover_law(table, "F", seeds=sr_seeds, workers=1, tolerance=tol,
                           settings=SearchSettings(budget=budget))
        out[str(tol)] = {k: law[k] for k in ("verdict", "expression", "newtonian", "newtonian_seeds",
                                             "newton_departure")}
        out[str(tol)]["constant"] = law["power_law"]["constant"] if law["power_law"] else None
    return out


def log_error(pred_ln: np.ndarray, true_ln: np.ndarray) -> dict:
    e = pred_ln - true_ln
    return {"mean": float(e.mean()), "sd": float(e.std()), "abs_p99": float(np.percentile(np.abs(e), 99)),
            "r2": float(1 - e.var() / true_ln.var())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a-ranges", default="4,6;10,15;2,3",
                        help="semi-major axis ranges (AU) of the binary sets, ';'-separated (4,6 is the preset's)")
    parser.add_argument("--sequences", type=int, default=2000, help="systems per set; half train the MLP")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--epochs", type=int, default=20, help="MLP passes over the training rows")
    parser.add_argument("--tolerances", default="0,0.01")
    parser.add_argument("--sr-seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=SearchSettings().budget)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default="benchmarks/results/control_ceiling.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tolerances = [float(t) for t in args.tolerances.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="orbitlaw-ceiling-"))
    results = []
    for spec in args.a_ranges.split(";"):
        lo, hi = (float(v) for v in spec.split(","))
        start = time.perf_counter()
        data = simulate("binary", {"train": args.sequences}, args.seed, work / f"binary-a{lo:g}-{hi:g}",
                        overrides={"a_range": [lo, hi]}, progress=False)
        split = load_dataset(data)["train"]
        n = split.positions.shape[0]
        rows = probe_data.planet_rows(split, np.arange(n), 10**9)
        full = rows["token"] - 1 >= 2 * W - 1  # the whole window lies inside the sequence
        rows = {k: v[full] for k, v in rows.items()}
        X = oracle.window_features(split, rows, W)
        dt = np.asarray(split.times)[rows["sequence"], 1] - np.asarray(split.times)[rows["sequence"], 0]
        true_ln = np.log(rows["F_true"])
        train, held = rows["sequence"] < n // 2, rows["sequence"] >= n // 2
        states = probe_data.states(rows)
        near = probe_data.nearest_to_training(states[held], states[train], 5000)
        omega_dt = np.sqrt(G * (rows["m1"] + rows["m2"]) / rows["r"] ** 3) * dt
        entry = {"a_range": [lo, hi], "omega_dt_percentiles_1_50_99": np.percentile(omega_dt, [1, 50, 99]).tolist(),
                 "rows": int(len(true_ln)), "heldout_near_train_rows": int(near.sum()), "readouts": {}}
        fd = finite_difference(X, dt)
        entry["readouts"]["finite-difference"] = {
            "log_error": log_error(np.log(fd[held]), true_ln[held]),
            "verdicts": verdicts(rows, held, near, fd, tolerances, args.sr_seeds, args.budget)}
        t0 = time.perf_counter()
        pred = mlp(X, true_ln, train, args.epochs, args.seed)
        entry["readouts"]["mlp"] = {"epochs": args.epochs, "train_seconds": time.perf_counter() - t0,
                                    "log_error": log_error(pred[held], true_ln[held]),
                                    "verdicts": verdicts(rows, held, near, np.exp(pred), tolerances, args.sr_seeds,
                                                         args.budget)}
        entry["seconds"] = time.perf_counter() - start
        results.append(entry)
        for name, r in entry["readouts"].items():
            print(f"a {lo:g}-{hi:g} AU  {name:18s} log error sd {r['log_error']['sd']:.4f} "
                  f"mean {r['log_error']['mean']:+.4f}  " + "  ".join(
                      f"tol {t}: {v['verdict']} ({v['newtonian_seeds']}/{args.sr_seeds}, departure "
                      f"{v['newton_departure']:.4f})" for t, v in r["verdicts"].items()), flush=True)
        write_json_atomic(Path(args.out), {"benchmark": "control_ceiling", "settings": vars(args),
                                           "code_version": code_version(),
                                           "dependency_versions": dependency_versions(), "results": results})
    print(json.dumps({"out": args.out}))


if __name__ == "__main__":
    main()
