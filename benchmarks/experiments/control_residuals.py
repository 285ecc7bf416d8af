"""Where a control's readout errs: the bias of ln(predicted / true) on the rows symbolic regression reads.

    python benchmarks/experiments/control_residuals.py --row W3-s0=PROBE/predictions.csv
        --row mlp-W3=ORACLE/predictions.csv ... [--update]

For each row (a probe's or an oracle's ``predictions.csv`` with the acceleration target: ``a_true``, ``a_pred``
in AU/yr^2), on its ``near_train`` rows (the ones ``orbitlaw discover`` fits): the mean and RMS of
ln(a_pred / a_true), its mean by quartile of |a|, r (AU) and m2 (M_sun) and by decile of m2, and on the corner
of the prior where the acceleration is weakest (m2 below ``--corner-m2``, r above ``--corner-r``). A readout
that shrinks toward the mean over-predicts the weakest accelerations; a law fitted to it then carries a
correction there. Writes ``benchmarks/results/control_residuals.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from orbitlaw.provenance import code_version, write_json_atomic


def bias_by(frame: pd.DataFrame, res: pd.Series, column: str, bins: int) -> list[float]:
    """Mean ln error (%) in each of ``bins`` equal-count bins of ``column``, lowest first."""
    q = pd.qcut(frame[column], bins, labels=False)
    return [round(100 * float(res[q == k].mean()), 2) for k in range(bins)]


def parse_row(item: str) -> tuple[str, str]:
    """``NAME=PREDICTIONS.csv`` (a ``--row``) as (name, path)."""
    name, _, path = item.partition("=")
    if not path:
        raise SystemExit(f"--row {item!r}: expected NAME=PREDICTIONS.csv")
    return name, path


def in_corner(frame: pd.DataFrame, corner_m2: float, corner_r: float) -> pd.Series:
    """The rows in the weak corner of the prior: star mass below ``corner_m2`` (M_sun), r above ``corner_r`` (AU)."""
    return (frame["m2"] < corner_m2) & (frame["r"] > corner_r)


def residuals(path: str, corner_m2: float, corner_r: float) -> dict:
    d = pd.read_csv(path)
    if not {"a_true", "a_pred", "near_train"} <= set(d.columns):
        raise SystemExit(f"{path}: not an acceleration-magnitude prediction file (no a_true/a_pred/near_train)")
    d = d[d["near_train"].astype(bool)]
    res = np.log(d["a_pred"] / d["a_true"])
    corner = in_corner(d, corner_m2, corner_r)
    return {"predictions": path, "n": int(len(d)), "mean_pct": round(100 * float(res.mean()), 2),
            "rms_pct": round(100 * float(np.sqrt((res ** 2).mean())), 2),
            "by_accel_quartile_pct": bias_by(d, res, "a_true", 4), "by_r_quartile_pct": bias_by(d, res, "r", 4),
            "by_m2_quartile_pct": bias_by(d, res, "m2", 4), "by_m2_decile_pct": bias_by(d, res, "m2", 10),
            "corner": {"m2_below": corner_m2, "r_above": corner_r, "n": int(corner.sum()),
                       "mean_pct": round(100 * float(res[corner].mean()), 2) if corner.any() else None}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", action="append", required=True, metavar="NAME=CSV")
    ap.add_argument("--corner-m2", type=float, default=0.3, help="M_sun")
    ap.add_argument("--corner-r", type=float, default=3.0, help="AU")
    ap.add_argument("--result", default="benchmarks/results/control_residuals.json")
    ap.add_argument("--update", action="store_true",
                    help="keep the rows of the existing --result file that are not named here (each row names the "
                    "predictions it read)")
    args = ap.parse_args()
    result = Path(args.result)
    rows = json.loads(result.read_text())["rows"] if args.update and result.exists() else {}
    new = []
    for item in args.row:
        name, path = parse_row(item)
        rows[name] = residuals(path, args.corner_m2, args.corner_r)
        new.append(name)
    doc = {"benchmark": "control_residuals", "rows": rows, "code_version": code_version()}
    write_json_atomic(args.result, doc)
    for name in new:
        r = rows[name]
        print(f"{name:14s} mean {r['mean_pct']:+.2f}% rms {r['rms_pct']:.2f}%  |a| quartiles "
              f"{r['by_accel_quartile_pct']}  corner {r['corner']['mean_pct']}% (n={r['corner']['n']})")


if __name__ == "__main__":
    main()
