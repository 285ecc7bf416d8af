"""Benchmark of the verdict on laws 0.5-5% from Newton's: is a law the rows can tell apart ever called Newtonian?

The verdict matrix (``benchmarks/discover.py``) tests laws at least 3.6% from Newton's. Here every law is a
small departure: an exponent shift in r (r^-2.02, r^-2.05, r^-1.95), in the planet mass (m1^1.03, force only)
or the star mass (m2^0.97), a softened law 1/(r^2 + s^2) with s a tenth of the data set's 5th percentile of r,
and a Yukawa cut-off exp(-r / L)/r^2 with L thirty median r. Each law is measured on each data set: its departure
from Newton (RMS of ln(law / best fit of Newton's form), on the noiseless rows) is recorded, not designed.

Data sets: the verdict matrix's (r uniform or log-uniform on [0.3, 40] AU with uniform or exoplanet masses,
and the (r, m1, m2) of real probe rows on ``two-body`` and ``two-body-exoplanet`` sets; the force, with
Newton's form C m1 m2 / r^2) and ``controls_rows``, rows like the controls' (1,000 systems of 5 planet steps,
r U(1.4, 3.9) AU, both masses U(0.2, 1) M_sun, a ``sequence`` column so that intervals resample systems;
the acceleration, Newton's form C m2 / r^2, as the controls are judged).

Each cell (law x data set, 1% multiplicative Gaussian noise) runs ``--replicates`` independent replicates:
a fresh noise draw and one search seed of its own (``discover_law(seeds=1, first_seed=i)``), judged by the
study's rule (``VERDICT_RULE["orbitlaw"]``: 1% precision, se selection). Each replicate records its verdict,
its own stated resolution (``LAW.json["resolution"]["rms_ln"]``) and the exact law's departure.

Targets (written before the first run): Newton ``newtonian`` in every replicate; a law whose departure is at
least twice the replicate's stated resolution called ``newtonian`` in no more than 1 of 20 replicates.

    python benchmarks/experiments/near_newton.py [--data NAMES] [--laws NAMES] [--replicates 20] [--workers 2]

Writes ``benchmarks/results/near_newton.json`` (resumable: finished cells are kept).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, where the verdict matrix lives
from discover import DATA as MATRIX_DATA  # noqa: E402  (the verdict matrix's data sets)
from discover import probe_rows, synthetic  # noqa: E402

from orbitlaw.discovery.sr.backends import SearchSettings  # noqa: E402
from orbitlaw.discovery.sr.symbolic import discover_law  # noqa: E402
from orbitlaw.orbits.constants import G_EXACT as G  # 4 pi^2 AU^3 M_sun^-1 yr^-2  # noqa: E402
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic  # noqa: E402
from orbitlaw.study.presets import VERDICT_RULE  # noqa: E402

NOISE = 0.01
RULE = VERDICT_RULE["orbitlaw"]

# name: g(r, m1, m2, median r) -> the law's factor beside G m1 m2 (force) or G m2 (acceleration)
LAWS = {
    "newton": lambda r, m1, m2, s: np.ones_like(r),
    "r^-2.02": lambda r, m1, m2, s: r**-0.02,
    "r^-2.05": lambda r, m1, m2, s: r**-0.05,
    "r^-1.95": lambda r, m1, m2, s: r**0.05,
    "m1^1.03": lambda r, m1, m2, s: m1**0.03,
    "m2^0.97": lambda r, m1, m2, s: m2**-0.03,
    "softened": lambda r, m1, m2, s: r**2 / (r**2 + (0.1 * np.quantile(r, 0.05)) ** 2),
    "yukawa": lambda r, m1, m2, s: np.exp(-r / (30 * s)),
}
DATA = (*MATRIX_DATA, "controls_rows")


def controls_rows(seed: int, systems: int = 1000, steps: int = 5) -> dict:
    """Rows like the controls' held-out planet steps: per system both masses (M_sun), per step r (AU)."""
    rng = np.random.default_rng(seed)
    m1, m2 = (np.repeat(rng.uniform(0.2, 1.0, systems), steps) for _ in range(2))
    return {"r": rng.uniform(1.4, 3.9, systems * steps), "m1": m1, "m2": m2,
            "sequence": np.repeat(np.arange(systems), steps)}


def quantity_of(data: str) -> str:
    return "acceleration" if data == "controls_rows" else "force"


def newton_departure(values: np.ndarray, rows: dict, quantity: str) -> float:
    """RMS of ln(law / C * Newton's form), C fitted (median of the log ratio), on the noiseless rows."""
    form = rows["m2"] / rows["r"] ** 2 * (rows["m1"] if quantity == "force" else 1.0)
    d = np.log(values) - np.log(form)
    return float(np.sqrt(np.mean((d - np.median(d)) ** 2)))


def cell_rows(law: str, data: str, rows: dict) -> tuple[np.ndarray, float]:
    """The noiseless target of ``law`` on ``rows`` and its departure from Newton."""
    quantity = quantity_of(data)
    r, m1, m2 = rows["r"], rows["m1"], rows["m2"]
    values = G * m2 / r**2 * (m1 if quantity == "force" else 1.0) * LAWS[law](r, m1, m2, float(np.median(r)))
    return values, newton_departure(values, rows, quantity)


def replicate(args) -> dict:
    law, data, rows, i, settings = args
    values, _ = cell_rows(law, data, rows)
    seed = int(hashlib.sha256(f"{law}/{data}/{i}".encode()).hexdigest()[:8], 16)
    table = {**rows, "y": values * (1 + NOISE * np.random.default_rng(seed).standard_normal(len(values)))}
    start = time.process_time()
    out = discover_law(table, "y", seeds=1, first_seed=i, quantity=quantity_of(data), **RULE, **settings)
    return {"replicate": i, "verdict": out["verdict"], "expression": out["expression"],
            "exact_expression": out["exact"]["expression"], "resolution_rms_ln": out["resolution"]["rms_ln"],
            "resolution": out["resolution"], "newton_test_disagrees": out["newton_test"]["disagrees"],
            "exact_departure": out["newton_departure_exact"], "fitted_exponents": out["fitted_exponents"],
            "fit_cpu_seconds": out["per_seed"][0]["cpu_seconds"], "cpu_seconds": time.process_time() - start}


def summarise(law: str, departure: float, reps: list[dict]) -> dict:
    newtonian = sum(r["verdict"] == "newtonian" for r in reps)
    resolved = [r for r in reps if departure >= 2 * r["resolution_rms_ln"]]
    row = {"law": law, "departure": departure, "replicates": len(reps), "newtonian": newtonian,
           "verdicts": {v: sum(r["verdict"] == v for r in reps) for v in sorted({r["verdict"] for r in reps})},
           "resolution_rms_ln_median": float(np.median([r["resolution_rms_ln"] for r in reps])),
           "resolved_replicates": len(resolved),
           "resolved_newtonian": sum(r["verdict"] == "newtonian" for r in resolved),
           "cpu_seconds_mean": float(np.mean([r["cpu_seconds"] for r in reps])),
           "fit_cpu_seconds_mean": float(np.mean([r["fit_cpu_seconds"] for r in reps]))}
    if law == "newton":
        row["meets_target"] = newtonian == len(reps)
    else:
        row["meets_target"] = row["resolved_newtonian"] <= max(1, len(resolved)) / 20
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=",".join(DATA), help=f"comma-separated, of {', '.join(DATA)}")
    ap.add_argument("--laws", default=",".join(LAWS))
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default=None, help="where the probe data sets are made (default: a temp dir)")
    ap.add_argument("--out", default="benchmarks/results/near_newton.json")
    args = ap.parse_args()
    out = Path(args.out)
    settings = {"points": args.points, "restarts": args.restarts}
    key = hashlib.sha256(json.dumps({**settings, "replicates": args.replicates, "rule": RULE},
                                    sort_keys=True).encode()).hexdigest()[:16]
    previous = json.loads(out.read_text()) if out.exists() else {}
    results = previous.get("results", {}) if previous.get("settings_key") == key else {}
    work = Path(args.work or tempfile.mkdtemp(prefix="orbitlaw-near-newton-"))
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for data in args.data.split(","):
            if data == "controls_rows":
                rows = controls_rows(200)
            else:
                seed = 100 + MATRIX_DATA.index(data)  # the verdict matrix's own rows
                rows = probe_rows(data.removeprefix("probe_"), work, seed) if data.startswith("probe_") else (
                    synthetic(data, seed))
            for law in args.laws.split(","):
                cell = f"{law}/{data}"
                if cell in results or (law == "m1^1.03" and quantity_of(data) == "acceleration"):
                    continue
                _, departure = cell_rows(law, data, rows)
                reps = list(pool.map(replicate, [(law, data, rows, i, settings) for i in range(args.replicates)]))
                results[cell] = {**summarise(law, departure, reps), "data": data, "quantity": quantity_of(data),
                                 "per_replicate": reps}
                row = results[cell]
                print(f"{cell:45s} departure {departure:6.2%} resolution {row['resolution_rms_ln_median']:6.2%} "
                      f"newtonian {row['newtonian']}/{len(reps)} (resolved: {row['resolved_newtonian']}/"
                      f"{row['resolved_replicates']}) {row['verdicts']} cpu {row['cpu_seconds_mean']:.2f} "
                      f"{'ok' if row['meets_target'] else 'MISS'}", flush=True)
                write_json_atomic(out, {"benchmark": "near_newton", "settings_key": key, "results": results})
    summary = {"cells": len(results), "cells_meeting_targets": sum(r["meets_target"] for r in results.values()),
               "misses": [c for c, r in results.items() if not r["meets_target"]],
               "resolved_called_newtonian": sum(r["resolved_newtonian"] for r in results.values()
                                                if r["law"] != "newton"),
               "resolved_replicates": sum(r["resolved_replicates"] for r in results.values() if r["law"] != "newton"),
               "newton_replicates_newtonian": "{}/{}".format(
                   sum(r["newtonian"] for r in results.values() if r["law"] == "newton"),
                   sum(len(r["per_replicate"]) for r in results.values() if r["law"] == "newton")),
               "fit_cpu_seconds_max": float(max(p["fit_cpu_seconds"] for r in results.values()
                                                for p in r["per_replicate"])),
               "cpu_seconds_per_replicate_mean": float(np.mean([p["cpu_seconds"] for r in results.values()
                                                                for p in r["per_replicate"]])),
               "fit_cpu_seconds_mean": float(np.mean([p["fit_cpu_seconds"] for r in results.values()
                                                      for p in r["per_replicate"]])),
               "wall_seconds_this_run": time.perf_counter() - start}
    write_json_atomic(out, {"benchmark": "near_newton", "settings_key": key, "rule": RULE, "noise": NOISE,
                            "settings": {**settings, "replicates": args.replicates, "workers": args.workers,
                                         **SearchSettings().to_dict()},
                            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                            "code_version": code_version(), "dependency_versions": dependency_versions(),
                            "summary": summary, "results": results})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
