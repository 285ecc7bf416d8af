"""Benchmark of the symbolic regression + verdict (``discovery.symbolic``): does it recover the law?

For each synthetic law, ``--seeds`` independent fits (each on ``--points`` rows drawn from 5,000, best of
``--restarts`` searches) on data shaped like the two-body probe set: r log-uniform in [0.3, 40] AU,
planet and star masses U(1e-4, 1.01e-2) Msun. Reports, per law: how many seeds recover its form
(exponents for power laws; for the non-power laws: how many seeds call it Newtonian, which must be 0),
the constant's relative error, and the wall and CPU seconds per fit (one seed = one fit, single-threaded,
``--workers`` fits in parallel; on a loaded machine the CPU seconds are the fair measure).

    python benchmarks/discover.py --out benchmarks/results/discover.json
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from discovery.backends import SearchSettings
from discovery.symbolic import discover_law
from orbits.provenance import code_version, write_json_atomic

G = 4 * math.pi**2

# name: (law, exponents of (r, m1, m2) or None for laws that are not power laws, noise)
CASES = {
    "newton_exact": (lambda r, m1, m2: G * m1 * m2 / r**2, (-2, 1, 1), 0.0),
    "newton_noise1pct": (lambda r, m1, m2: G * m1 * m2 / r**2, (-2, 1, 1), 0.01),
    "inverse_cube": (lambda r, m1, m2: G * m1 * m2 / r**3, (-3, 1, 1), 0.0),
    "planet_squared_inverse_r": (lambda r, m1, m2: G * m1**2 * m2 / r, (-1, 2, 1), 0.0),
    "newton_exp_cutoff": (lambda r, m1, m2: G * m1 * m2 / r**2 * np.exp(-r / 5), None, 0.0),
    "softened_newton": (lambda r, m1, m2: G * m1 * m2 / (r**2 + 1.0), None, 0.0),
}


def data(law, noise: float, n: int = 5000, seed: int = 1234) -> dict:
    rng = np.random.default_rng(seed)
    r = np.exp(rng.uniform(np.log(0.3), np.log(40.0), n))
    m1 = rng.uniform(1e-4, 1.01e-2, n)
    m2 = rng.uniform(1e-4, 1.01e-2, n)
    F = law(r, m1, m2) * (1 + noise * rng.standard_normal(n))
    return {"r": r, "m1": m1, "m2": m2, "F": F}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=int, default=SearchSettings().budget, help="Operon evaluations per search")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--selection", default="best", choices=["best", "score"])
    parser.add_argument("--out", default="benchmarks/results/discover.json")
    args = parser.parse_args()

    results = {}
    for name in args.cases.split(","):
        law, exponents, noise = CASES[name]
        start = time.perf_counter()
        out = discover_law(data(law, noise), "F", seeds=args.seeds, points=args.points, restarts=args.restarts,
                           workers=args.workers, progress=True, selection=args.selection,
                           settings=SearchSettings(budget=args.budget))
        wall = time.perf_counter() - start
        seconds = [s["seconds"] for s in out["per_seed"]]
        cpu = [s["cpu_seconds"] for s in out["per_seed"]]
        row = {"noise": noise, "true_exponents": exponents, "wall_seconds": wall,
               "seconds_per_fit_max": max(seconds), "seconds_per_fit_mean": float(np.mean(seconds)),
               "cpu_seconds_per_fit_max": max(cpu), "cpu_seconds_per_fit_mean": float(np.mean(cpu)),
               "newtonian_seeds": out["newtonian_seeds"], "seeds": args.seeds, "reported": out["expression"],
               "reported_newtonian": out["newtonian"],
               "per_seed": [s["expression"] for s in out["per_seed"]]}
        if exponents is not None:
            ok, const_err = 0, []
            for s in out["per_seed"]:
                p = s["power_law"]
                if p and tuple(p["exponents"][k] for k in ("r", "m1", "m2")) == exponents:
                    ok += 1
                    const_err.append(abs(p["constant"] - G) / G)
            row.update(form_recovered_seeds=ok, constant_rel_error_max=max(const_err, default=None),
                       constant_within_1pct_seeds=sum(e <= 0.01 for e in const_err))
        results[name] = row
        print(f"{name:28s} recovered={row.get('form_recovered_seeds', '-')}/{args.seeds} "
              f"newtonian={row['newtonian_seeds']}/{args.seeds} fit wall max {row['seconds_per_fit_max']:.2f} s "
              f"mean {row['seconds_per_fit_mean']:.2f} s, cpu max {row['cpu_seconds_per_fit_max']:.2f} s "
              f"-> {row['reported']}")
    write_json_atomic(Path(args.out), {
        "benchmark": "discover", "backend": "operon",
        "settings": {**vars(args), **SearchSettings(budget=args.budget).to_dict()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "code_version": code_version(),
        "results": results})


if __name__ == "__main__":
    main()
