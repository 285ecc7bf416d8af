"""Is it the size or the structure of a probe's errors that keeps its law from coming out Newtonian?

On the near-train rows of a probe's ``predictions.csv`` (default: the k-NN state oracle of a controls
study, ``orbitlaw run --preset controls``), ``orbitlaw discover`` (5 SR seeds) on:

- the true force times log-normal noise of sigma 0.02, 0.05, 0.10, 0.15 (errors without structure);
- the true force times the probe's own errors, shuffled across rows (the same error sizes, no structure);
- the probe's predictions themselves (its errors, with their structure).

Writes ``benchmarks/results/verdict_structure.json`` (R^2 of ln|F|, verdict, Newtonian seeds, constant).

    python benchmarks/verdict_structure.py --predictions STUDY/controls/oracles/knn-state/predictions.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from orbitlaw.discovery.symbolic import discover_law
from orbitlaw.orbits.provenance import code_version, dependency_versions, write_json_atomic


def summary(table: pd.DataFrame, column: str, seeds: int) -> dict:
    law = discover_law(table, column, seeds=seeds)
    truth = np.log(table["F_true"])
    r2 = 1 - np.mean((np.log(table[column]) - truth) ** 2) / np.var(truth)
    power = law["power_law"] or {}
    return {"r2_log": round(float(r2), 4), "verdict": law["verdict"], "newtonian_seeds": law["newtonian_seeds"],
            "seeds": law["seeds"], "expression": law["expression"], "constant": power.get("constant")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictions", required=True, help="a probe's predictions.csv (F_true, F_pred, near_train)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/verdict_structure.json")
    args = ap.parse_args()
    table = pd.read_csv(args.predictions)
    table = table[table["near_train"]].copy()
    rng = np.random.default_rng(0)
    rows = {}
    for sigma in (0.02, 0.05, 0.10, 0.15):
        table["F_noisy"] = table["F_true"] * np.exp(sigma * rng.standard_normal(len(table)))
        rows[f"iid_lognormal_{sigma:.2f}"] = summary(table, "F_noisy", args.seeds)
    errors = np.log(table["F_pred"].to_numpy()) - np.log(table["F_true"].to_numpy())
    table["F_shuffled"] = table["F_true"] * np.exp(rng.permutation(errors))
    rows["probe_errors_shuffled"] = summary(table, "F_shuffled", args.seeds)
    rows["probe_predictions"] = summary(table, "F_pred", args.seeds)
    for name, row in rows.items():
        print(f"{name:28s} R2(ln F) {row['r2_log']:.4f}  {row['verdict']:16s} {row['newtonian_seeds']}/{row['seeds']}")
    write_json_atomic(Path(args.out), {"benchmark": "verdict_structure", "predictions": str(args.predictions),
                                       "rows": int(len(table)), "results": rows, "code_version": code_version(),
                                       "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
