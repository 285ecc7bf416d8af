"""Does the weak corner of the prior decide a control's verdict? The same symbolic regression as the controls
study, on a readout's predictions as they are, without the corner's rows, and without as many random rows.

    python benchmarks/experiments/control_corner.py --row W3-s1=PROBE/predictions.csv [--row ...] [--draws 3]

A diagnostic, not a verdict: the controls' verdict reads every ``near_train`` row, and stays so.
``control_residuals.py`` measures that every readout over-predicts the weakest accelerations, most in the
corner m2 < 0.3 M_sun, r > 3 AU (about 1% of the rows symbolic regression reads), and the searches that miss
Newton there add a correction that is large only at low m2. Here each row's predictions are searched three
ways with the ``controls`` preset's discover settings (``stages.law``, tolerance 0.01): ``all`` (the study's
own search), ``no-corner`` (the corner's rows taken out of ``near_train``) and ``random-<k>`` (as many
``near_train`` rows taken out at random, ``--draws`` times: removing any rows changes the points drawn, so
this is the comparison that can fail). Writes ``benchmarks/results/control_corner.json``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from control_residuals import in_corner, parse_row  # a sibling script: benchmarks/experiments/ is on sys.path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.presets import study_config


def search(frame: pd.DataFrame, work: Path, name: str, spec: dict) -> dict:
    """The controls' law stage on ``frame`` (written to ``work/name.csv``): verdict, seeds, expression."""
    path = work / f"{name}.csv"
    frame.to_csv(path, index=False)
    law = stages.law(path, work / name / "LAW.json", spec, 2, False, "acceleration-magnitude")
    return {k: law.get(k) for k in ("verdict", "newtonian_seeds", "expression", "newton_departure")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", action="append", required=True, metavar="NAME=CSV")
    ap.add_argument("--corner-m2", type=float, default=0.3, help="M_sun")
    ap.add_argument("--corner-r", type=float, default=3.0, help="AU")
    ap.add_argument("--draws", type=int, default=3, help="random removals of as many rows as the corner has")
    ap.add_argument("--seed", type=int, default=0, help="of the random removals")
    ap.add_argument("--result", default="benchmarks/results/control_corner.json")
    args = ap.parse_args()
    spec = study_config("controls")["controls"]["discover"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for item in args.row:
            name, path = parse_row(item)
            frame = pd.read_csv(path)
            if not {"a_pred", "near_train", "m2", "r"} <= set(frame.columns):
                raise SystemExit(f"{path}: not an acceleration-magnitude prediction file")
            near = frame["near_train"].astype(bool)
            corner = near & in_corner(frame, args.corner_m2, args.corner_r)
            work = Path(tmp) / name
            work.mkdir()
            runs = {"all": search(frame, work, "all", spec),
                    "no-corner": search(frame.assign(near_train=near & ~corner), work, "no-corner", spec)}
            rng = np.random.default_rng(args.seed)
            for k in range(args.draws):
                drop = np.zeros(len(frame), bool)
                drop[rng.choice(np.flatnonzero(near), int(corner.sum()), replace=False)] = True
                runs[f"random-{k}"] = search(frame.assign(near_train=near & ~drop), work, f"random-{k}", spec)
            rows[name] = {"predictions": path, "near_train": int(near.sum()), "corner_rows": int(corner.sum()),
                          "runs": runs}
            print(name, {run: (r["verdict"], r["newtonian_seeds"]) for run, r in runs.items()}, flush=True)
    write_json_atomic(Path(args.result), {
        "benchmark": "control_corner", "corner": {"m2_below": args.corner_m2, "r_above": args.corner_r},
        "discover": spec, "draws": args.draws, "seed": args.seed, "rows": rows, "code_version": code_version(),
        "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
