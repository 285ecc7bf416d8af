"""Benchmark of the law verdict (``orbitlaw.discovery.sr.symbolic.discover_law``): laws x data x noise, k/n over seeds.

Every cell fits one law on one data set with one noise model, ``--seeds`` independent seeds (each on
``--points`` search rows and as many held-out rows drawn from 5,000, best of ``--restarts`` searches), and
counts each seed's own grade (``per_seed[i]["verdict"]``: newtonian, inverse-square-planet-mass,
power-law, not-a-power-law) and the cell's cross-seed verdict.

- laws: Newton G m1 m2/r^2; G m1/r^2 (the LSSAR write-up's form); G m1 m2/r^3; G m1^2 m2/r;
  Newton * exp(-r/5); G m1 m2/(r^2 + 1); Newton + a constant offset (the median Newtonian force of the
  data set, so the offset matters for half the rows); exp(-r); G/r^2 (no masses).
- data: r uniform on [0.3, 40] AU or log-uniform; masses U(1e-4, 1.01e-2) Msun (the two-body variant)
  or the exoplanet priors (planet Gamma fit clipped to [1e-9, 1e-3], star log-normal fit clipped to
  [0.1, 5]); and the (r, m1, m2) of the 5,000 near-train rows of real probe outputs (``predictions.csv``
  of the k-NN oracle through the probe pipeline) on a ``two-body`` and a ``two-body-exoplanet`` set.
- noise: exact; 1% and 5% multiplicative Gaussian; 1% with 2% of the rows multiplied by 10.

Targets (written before the first run): a Newtonian cell is called ``newtonian`` by >= 19/20 seeds with the
constant within 1% of G (3% at 5% noise); no non-Newtonian cell is ever called ``newtonian`` (by a seed or by the cell);
power laws come back with their exponents in >= 19/20 seeds; per fit (one seed: restarts + polishing +
selection, single-threaded) at most 2 s CPU on average and 3 s at most.

Writes JSON (resumable: finished cells are kept) and a confusion-matrix figure.

    python benchmarks/discover.py --out benchmarks/results/discover.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from orbitlaw.discovery.sr.backends import SearchSettings
from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law
from orbitlaw.discovery.sr.verdict import VERDICTS
from orbitlaw.orbits.constants import G_EXACT as G  # 4 pi^2 AU^3 M_sun^-1 yr^-2
from orbitlaw.orbits.presets import PLANET_MASS_GAMMA, STAR_MASS_LOGNORM
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

ROWS = 5000
NEWTON = (-2, 1, 1)

# name: (law(r, m1, m2, offset), expected grade, exponents of (r, m1, m2) or None, constant or None)
LAWS = {
    "newton": (lambda r, a, b, c: G * a * b / r**2, "newtonian", NEWTON, G),
    "planet_mass_inverse_square": (lambda r, a, b, c: G * a / r**2, "inverse-square-planet-mass", (-2, 1, 0), G),
    "inverse_cube": (lambda r, a, b, c: G * a * b / r**3, "power-law", (-3, 1, 1), G),
    "planet_squared_inverse_r": (lambda r, a, b, c: G * a**2 * b / r, "power-law", (-1, 2, 1), G),
    "newton_exp_cutoff": (lambda r, a, b, c: G * a * b / r**2 * np.exp(-r / 5), "not-a-power-law", None, None),
    "softened_newton": (lambda r, a, b, c: G * a * b / (r**2 + 1), "not-a-power-law", None, None),
    "newton_plus_offset": (lambda r, a, b, c: G * a * b / r**2 + c, "not-a-power-law", None, None),
    "exp_decay": (lambda r, a, b, c: np.exp(-r), "not-a-power-law", None, None),
    "no_masses": (lambda r, a, b, c: G / r**2, "power-law", (-2, 0, 0), G),
}
NOISES = {"exact": (0.0, 0.0), "noise1pct": (0.01, 0.0), "noise5pct": (0.05, 0.0),
          "noise1pct_corrupt2pct": (0.01, 0.02)}
DATA = ("r_uniform-mass_uniform", "r_loguniform-mass_uniform", "r_uniform-mass_exoplanet",
        "r_loguniform-mass_exoplanet", "probe_two-body", "probe_two-body-exoplanet")


def synthetic(name: str, seed: int) -> dict:
    """(r, m1, m2) of ROWS rows: r in AU, m1 planet and m2 star mass in Msun."""
    rng = np.random.default_rng(seed)
    r_kind, m_kind = name.split("-")
    r = rng.uniform(0.3, 40.0, ROWS) if r_kind == "r_uniform" else np.exp(rng.uniform(np.log(0.3), np.log(40), ROWS))
    if m_kind == "mass_uniform":
        m = rng.uniform(1e-4, 1.01e-2, (ROWS, 2))
        m1, m2 = m.min(1), m.max(1)  # the lighter body is the planet, as in the two-body preset
    else:
        shape, loc, scale = PLANET_MASS_GAMMA
        m1 = np.clip(loc + scale * rng.standard_gamma(shape, ROWS), 1e-9, 1e-3)
        s, loc, scale = STAR_MASS_LOGNORM
        m2 = np.clip(loc + scale * np.exp(s * rng.standard_normal(ROWS)), 0.1, 5.0)
    return {"r": r, "m1": m1, "m2": m2}


def probe_rows(preset: str, work: Path, seed: int) -> dict:
    """(r, m1, m2) of the near-train rows of a k-NN oracle's predictions.csv on a fresh ``preset`` set."""
    import pandas as pd

    data, probe = work / preset, work / f"oracle-{preset}"
    if not (probe / "predictions.csv").exists():
        for cmd in (["simulate", "--preset", preset, "--splits", "train=2000", "--seed", str(seed), "--out",
                     str(data)],
                    ["probe", "--oracle", "knn", "--data", str(data), "--out", str(probe)]):
            subprocess.run([sys.executable, "-m", "orbitlaw", *cmd], check=True, stdout=subprocess.DEVNULL)
    table = pd.read_csv(probe / "predictions.csv")
    near = table[table["near_train"]]
    return {k: near[k].to_numpy(np.float64) for k in ("r", "m1", "m2")}


def cell_table(law, features: dict, noise: tuple[float, float], seed: int) -> dict:
    sigma, corrupt = noise
    rng = np.random.default_rng(seed)
    r, m1, m2 = features["r"], features["m1"], features["m2"]
    offset = float(np.median(G * m1 * m2 / r**2))
    F = law(r, m1, m2, offset) * (1 + sigma * rng.standard_normal(len(r)))
    if corrupt:
        F[rng.choice(len(r), size=int(round(corrupt * len(r))), replace=False)] *= 10.0
    return {"r": r, "m1": m1, "m2": m2, "F": F}


def table_of(cell: str, features: dict) -> dict:
    """The table of a cell ``law/data/noise``: its law and noise on its data set, seeded by the cell's name."""
    law_name, data_name, noise_name = cell.split("/")
    seed = int(hashlib.sha256(cell.encode()).hexdigest()[:8], 16)
    return cell_table(LAWS[law_name][0], features[data_name], NOISES[noise_name], seed)


def summarise(law_name: str, out: dict, sigma: float) -> dict:
    _, expected, exponents, constant = LAWS[law_name]
    grades = Counter(s["verdict"] for s in out["per_seed"])
    row = {"expected": expected, "cell_verdict": out["verdict"], "cell_expression": out["expression"],
           "seed_verdicts": {v: grades.get(v, 0) for v in VERDICTS if v != "inconclusive"},
           "newtonian_seeds": out["newtonian_seeds"], "seeds": len(out["per_seed"]),
           "cpu_seconds_per_fit": [s["cpu_seconds"] for s in out["per_seed"]],
           "per_seed": [s["expression"] for s in out["per_seed"]]}
    if exponents is not None:
        ok, errs = 0, []
        for s in out["per_seed"]:
            p = s["power_law"]
            if p and tuple(p["exponents"][k] for k in ("r", "m1", "m2")) == exponents:
                ok += 1
                errs.append(abs(p["constant"] - constant) / constant)
        tol = 0.03 if sigma >= 0.05 else 0.01
        row.update(form_recovered_seeds=ok, constant_rel_error_max=max(errs, default=None),
                   constant_within_tolerance_seeds=sum(e <= tol for e in errs), constant_tolerance=tol)
        power = out["power_law"]
        if power is not None and power.get("constant_ci95"):
            row["cell_constant"], row["cell_constant_ci95"] = power["constant"], power["constant_ci95"]
    return row


def check(row: dict, need: int) -> list[str]:
    """The issue's targets for one cell: the list of those it misses."""
    misses = []
    if row["expected"] != "newtonian" and (row["newtonian_seeds"] or row["cell_verdict"] == "newtonian"):
        misses.append("called newtonian")
    if "form_recovered_seeds" in row:
        if row["form_recovered_seeds"] < need:
            misses.append(f"form {row['form_recovered_seeds']}/{row['seeds']}")
        if row["constant_within_tolerance_seeds"] < need:
            misses.append(f"constant {row['constant_within_tolerance_seeds']}/{row['seeds']}")
    elif row["seed_verdicts"][row["expected"]] < need:
        misses.append(f"{row['expected']} {row['seed_verdicts'][row['expected']]}/{row['seeds']}")
    return misses


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    laws, grades = list(LAWS), list(VERDICTS)
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), constrained_layout=True)
    for ax, kind in zip(axes, ("seeds", "cells"), strict=True):
        M = np.zeros((len(laws), len(grades)), dtype=int)
        for row in results.values():
            i = laws.index(row["law"])
            if kind == "seeds":
                for g, n in row["seed_verdicts"].items():
                    M[i, grades.index(g)] += n
            else:
                M[i, grades.index(row["cell_verdict"])] += 1
        ax.imshow(np.log1p(M), cmap="Blues")
        for i in range(len(laws)):
            for j in range(len(grades)):
                if M[i, j]:
                    ax.text(j, i, str(M[i, j]), ha="center", va="center", fontsize=8,
                            color="white" if M[i, j] > M.max() / 3 else "black")
        ax.set_xticks(range(len(grades)), grades, rotation=30, ha="right")
        ax.set_yticks(range(len(laws)), [f"{n} ({LAWS[n][1]})" for n in laws], fontsize=8)
        ax.set_xlabel("verdict")
        ax.set_title("per-seed verdicts (all data x noise)" if kind == "seeds" else
                     "cell verdicts (cross-seed decision)")
    fig.suptitle("orbitlaw discover: true law (rows) vs verdict (columns)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(results: dict) -> str:
    """The matrix as a markdown table: per law and data set, for each noise model (exact / 1% / 5% / 1% with
    2% corrupted) the seeds whose own verdict is the expected one, and the cell verdict when it differs."""
    short = {"r_uniform-mass_uniform": "r U, m U", "r_loguniform-mass_uniform": "r logU, m U",
             "r_uniform-mass_exoplanet": "r U, m exo", "r_loguniform-mass_exoplanet": "r logU, m exo",
             "probe_two-body": "probe two-body", "probe_two-body-exoplanet": "probe two-body-exoplanet"}
    lines = ["| law (expected verdict) | " + " | ".join(short[d] for d in DATA) + " |",
             "|---|" + "---|" * len(DATA)]
    for law_name, (_, expected, *_rest) in LAWS.items():
        cells = []
        for data_name in DATA:
            parts = []
            for noise_name in NOISES:
                row = results.get(f"{law_name}/{data_name}/{noise_name}")
                if row is None:
                    parts.append("–")
                    continue
                text = str(row["seed_verdicts"][expected])
                if row["cell_verdict"] != expected:
                    text += f" ({row['cell_verdict']})"
                if expected != "newtonian" and row["newtonian_seeds"]:
                    text += f" [N:{row['newtonian_seeds']}]"
                parts.append(text)
            cells.append(" / ".join(parts))
        lines.append(f"| {law_name} ({expected}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rule_of(args, **fields) -> DiscoverConfig:
    """The search of target ``F`` every cell runs (the benchmark's --points, --restarts, --budget, --selection and
    --tolerance), with ``fields`` (the seeds, the workers)."""
    return DiscoverConfig(target="F", points=args.points, restarts=args.restarts, selection=args.selection,
                          tolerance=args.tolerance, settings=SearchSettings(budget=args.budget), **fields)


def retime(out: Path, previous: dict, features: dict, args) -> None:
    """Re-run alone (one process, one fit at a time) every fit of ``previous`` whose recorded CPU time is at
    least ``args.retime`` s, and add a ``retime`` section to ``out``.

    A fit's CPU time is not exactly repeatable (shared caches, memory bandwidth, SMT, the process's history):
    the section records the ratio of each fit's time alone to its recorded time, and ``unretimed_bound_seconds``
    = threshold x the largest ratio seen, a bound on any fit that was not re-run. Each fit is seed ``i`` of its
    cell (``first_seed=i``), and its law must come out identical (the per-seed determinism the verdict needs).
    """
    results = previous.get("results", {})
    slow = sorted(((t, cell, i) for cell, row in results.items() for i, t in enumerate(row["cpu_seconds_per_fit"])
                   if t >= args.retime), reverse=True)
    fits = []
    for recorded, cell, i in slow:
        law = discover_law(table_of(cell, features), rule_of(args, seeds=1, first_seed=i, workers=1))
        fit = law["per_seed"][0]
        fits.append({"cell": cell, "seed": i, "cpu_seconds_recorded": recorded, "cpu_seconds_alone": fit["cpu_seconds"],
                     "same_expression": fit["expression"] == results[cell]["per_seed"][i]})
        print(f"{cell:70s} seed {i:2d} recorded {recorded:.2f} s alone {fit['cpu_seconds']:.2f} s "
              f"same law {fits[-1]['same_expression']}", flush=True)
    alone = [f["cpu_seconds_alone"] for f in fits]
    ratios = [f["cpu_seconds_alone"] / f["cpu_seconds_recorded"] for f in fits]
    previous["retime"] = {
        "alone_over_recorded": {"min": min(ratios, default=None), "median": float(np.median(ratios)) if ratios
                                else None, "max": max(ratios, default=None)},
        "unretimed_bound_seconds": args.retime * max(ratios, default=1.0),
        "threshold_seconds": args.retime, "fits": fits, "fits_retimed": len(fits),
        "cpu_seconds_alone_max": max(alone, default=None),
        "cpu_seconds_alone_mean": float(np.mean(alone)) if alone else None,
        "fits_alone_over_3s": sum(t > 3.0 for t in alone), "same_expression": sum(f["same_expression"] for f in fits),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_at_end": os.getloadavg()},
        "code_version": code_version(), "dependency_versions": dependency_versions()}
    write_json_atomic(out, previous)
    print(json.dumps({k: v for k, v in previous["retime"].items() if k != "fits"}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=int, default=SearchSettings().budget, help="Operon evaluations per search")
    parser.add_argument("--laws", default=",".join(LAWS))
    parser.add_argument("--data", default=",".join(DATA))
    parser.add_argument("--noises", default=",".join(NOISES))
    parser.add_argument("--selection", default="se", choices=["se", "best", "score"])
    parser.add_argument("--tolerance", type=float, default=0.0,
                        help="the verdict's precision (discover --tolerance); 0, the default, is the exact test")
    parser.add_argument("--work", default=None, help="where the probe data sets are made (default: a temp dir)")
    parser.add_argument("--out", default="benchmarks/results/discover.json")
    parser.add_argument("--markdown", action="store_true", help="print the matrix of --out as a markdown table")
    parser.add_argument("--summarize-only", action="store_true",
                        help="run no cell: write the summary and figure of the cells --out already holds")
    parser.add_argument("--retime", type=float, default=None, metavar="SECONDS",
                        help="run no cell: re-run alone, one at a time, every recorded fit of --out that took at "
                             "least SECONDS of CPU, and record its CPU time and whether its law is the same")
    parser.add_argument("--cells-code-version", default=None,
                        help="with --summarize-only: the code version that computed the cells, when known")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.out).read_text())["results"]))
        return

    out = Path(args.out)
    settings = {k: getattr(args, k) for k in ("seeds", "points", "restarts", "budget", "selection")}
    if args.tolerance:  # keyed only when set, so that results of the exact test keep their key
        settings["tolerance"] = args.tolerance
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    previous = json.loads(out.read_text()) if out.exists() else {}
    results = previous.get("results", {}) if previous.get("settings_key") == key else {}
    work = Path(args.work or tempfile.mkdtemp(prefix="orbitlaw-discover-bench-"))
    features = {}
    for name in args.data.split(","):
        seed = 100 + DATA.index(name)  # a data set does not depend on which others are benchmarked with it
        features[name] = (probe_rows(name.removeprefix("probe_"), work, seed) if name.startswith("probe_")
                          else synthetic(name, seed))
    if args.retime is not None:
        if previous.get("settings_key") != key:
            raise SystemExit(f"--retime: {out} holds no matrix run with these settings (--seeds, --points, "
                             "--restarts, --budget, --selection, --tolerance)")
        retime(out, previous, features, args)
        return
    start = time.perf_counter()
    for law_name in ([] if args.summarize_only else args.laws.split(",")):
        for data_name in args.data.split(","):
            for noise_name in args.noises.split(","):
                cell = f"{law_name}/{data_name}/{noise_name}"
                if cell in results:
                    continue
                law = discover_law(table_of(cell, features), rule_of(args, seeds=args.seeds, workers=args.workers))
                row = summarise(law_name, law, NOISES[noise_name][0])
                row.update(law=law_name, data=data_name, noise=noise_name,
                           misses=check(row, need=math.ceil(0.95 * args.seeds)))
                results[cell] = row
                print(f"{cell:70s} cell={row['cell_verdict']:27s} seeds={row['seed_verdicts']} "
                      f"cpu mean {np.mean(row['cpu_seconds_per_fit']):.2f} max {max(row['cpu_seconds_per_fit']):.2f}"
                      f" {'MISS ' + '; '.join(row['misses']) if row['misses'] else 'ok'}", flush=True)
                write_json_atomic(out, {"benchmark": "discover", "settings_key": key, "results": results})
    cpu = [c for row in results.values() for c in row["cpu_seconds_per_fit"]]
    summary = {
        "cells": len(results), "cells_meeting_targets": sum(not r["misses"] for r in results.values()),
        "misses": {c: r["misses"] for c, r in results.items() if r["misses"]},
        "non_newtonian_called_newtonian_seeds": sum(r["newtonian_seeds"] for r in results.values()
                                                    if r["expected"] != "newtonian"),
        "non_newtonian_called_newtonian_cells": sum(r["cell_verdict"] == "newtonian" for r in results.values()
                                                    if r["expected"] != "newtonian"),
        "cpu_seconds_per_fit_mean": float(np.mean(cpu)), "cpu_seconds_per_fit_max": float(np.max(cpu)),
        "fits": len(cpu), "wall_seconds_this_run": time.perf_counter() - start,
        "cells_planned": len(LAWS) * len(DATA) * len(NOISES)}
    figure = out.with_suffix(".png")
    plot(results, figure)
    write_json_atomic(out, {
        "benchmark": "discover", "backend": "operon", "settings_key": key,
        "settings": {**settings, "workers": args.workers, **SearchSettings(budget=args.budget).to_dict()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code_version": code_version(), "dependency_versions": dependency_versions(),
        "cells_code_version": (args.cells_code_version or previous.get("cells_code_version", "unknown"))
        if args.summarize_only else code_version(),
        "summary": summary, "figure": figure.name, "results": results})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
