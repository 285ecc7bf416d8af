"""Is it the size or the structure of a probe's errors that keeps its law from coming out Newtonian?

On the near-train rows of a probe's ``predictions.csv`` (default: the k-NN state oracle of a controls
study, ``orbitlaw run --preset controls``), ``orbitlaw discover`` (5 SR seeds) on:

- the true force times log-normal noise of sigma 0.02, 0.05, 0.10, 0.15 (errors without structure);
- the true force times the probe's own errors, shuffled across rows (the same error sizes, no structure);
- the probe's predictions themselves (its errors, with their structure).

Writes ``benchmarks/results/verdict_structure.json`` (R^2 of ln|F|, verdict, Newtonian seeds, constant). The
probe's target (``metrics.json`` beside the CSV: |F|, or the planet's |a| of the controls' acceleration
probe) decides the columns and the law's quantity (``discover --quantity``); "force" below is that target.

    python benchmarks/experiments/verdict_structure.py --predictions STUDY/controls/oracles/knn-state/predictions.csv
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from orbitlaw.discovery.probes import probe_data
from orbitlaw.discovery.sr.symbolic import discover_law
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic


def summary(table: pd.DataFrame, column: str, seeds: int, quantity: str) -> dict:
    law = discover_law(table, column, seeds=seeds, quantity=quantity, tolerance=0.0)  # the exact test it ran at
    truth = np.log(table["y_true"])
    r2 = 1 - np.mean((np.log(table[column]) - truth) ** 2) / np.var(truth)
    power = law["power_law"] or {}
    return {"r2_log": round(float(r2), 4), "verdict": law["verdict"], "newtonian_seeds": law["newtonian_seeds"],
            "seeds": law["seeds"], "expression": law["expression"], "constant": power.get("constant")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictions", required=True, help="a probe's predictions.csv (with its metrics.json)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/verdict_structure.json")
    args = ap.parse_args()
    target = json.loads((Path(args.predictions).parent / "metrics.json").read_text()).get("target",
                                                                                            "force-magnitude")
    true, pred = probe_data.columns(target)
    quantity = probe_data.QUANTITY[target]
    table = pd.read_csv(args.predictions)
    table = table[table["near_train"]].rename(columns={true: "y_true", pred: "y_pred"})
    table = table[["r", "m1", "m2", "sequence", "y_true", "y_pred"]].copy()
    rng = np.random.default_rng(0)
    rows = {}
    for sigma in (0.02, 0.05, 0.10, 0.15):
        table["y_noisy"] = table["y_true"] * np.exp(sigma * rng.standard_normal(len(table)))
        rows[f"iid_lognormal_{sigma:.2f}"] = summary(table, "y_noisy", args.seeds, quantity)
    errors = np.log(table["y_pred"].to_numpy()) - np.log(table["y_true"].to_numpy())
    table["y_shuffled"] = table["y_true"] * np.exp(rng.permutation(errors))
    rows["probe_errors_shuffled"] = summary(table, "y_shuffled", args.seeds, quantity)
    rows["probe_predictions"] = summary(table, "y_pred", args.seeds, quantity)
    for name, row in rows.items():
        print(f"{name:28s} R2(ln y) {row['r2_log']:.4f}  {row['verdict']:16s} {row['newtonian_seeds']}/{row['seeds']}")
    write_json_atomic(Path(args.out), {"benchmark": "verdict_structure", "predictions": str(args.predictions),
                                       "target": target, "quantity": quantity,
                                       "rows": int(len(table)), "results": rows, "code_version": code_version(),
                                       "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
