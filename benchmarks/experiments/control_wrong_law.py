"""The wrong-law control: the positive control's W = 3 model trained in a world whose gravity is not Newton's.

A verdict that says "Newtonian" whenever a readout is good would also say it here. The world is the controls'
own (``binary`` orbits on a = 2-3 AU, the same model, probe, symbolic regression and verdict rule), with the
data sets' ``force_law`` override (:mod:`orbitlaw.orbits.forcelaw`):

- ``power``: F = G m1 m2 / r0^2 (r / r0)^-2.5 with r0 = 2.5 AU (Newton's at 2.5 AU, so the orbits keep their
  periods); the planet's acceleration is G r0^0.5 m2 r^-2.5;
- ``yukawa``: F = G m1 m2 / r^2 (1 + r / L) exp(-r / L) with L = 4 AU (at 3 AU a test body with Newtonian
  elements escapes).

Each world runs the rows of ``--rows`` (default: one W = 3 model and the k-NN oracle on the true state)
through ``orbitlaw.study.controls.run_controls``, cached and resumable in ``--out``.

Pass rule (``PASS_RULE``, written before the first run): in every world no row is ``newtonian``; in the
power-law world the W = 3 model's free power-law fit has an r exponent that reaches -2.5 within its stated
resolution (``LAW.json["resolution"]["exponents"]["r"]``), i.e. the verdict reads the world's own law.

    python benchmarks/experiments/control_wrong_law.py --out DIR [--seed 20] [--worlds power,yukawa]

Writes ``benchmarks/results/control_wrong_law.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import run_controls
from orbitlaw.study.presets import study_config

WORLDS = {"power": {"kind": "power", "exponent": -2.5, "r0": 2.5}, "yukawa": {"kind": "yukawa", "length": 4.0}}

PASS_RULE = ("no row of any wrong-law world is `newtonian`; in the power-law world (F ∝ r^-2.5) the W = 3 model's "
             "free power-law fit reaches the r exponent -2.5 within its stated resolution")


def world_spec(seed: int, law: dict) -> dict:
    """The controls' spec at ``seed`` with both data sets in the world of ``law``."""
    spec = copy.deepcopy(study_config("controls", seed=seed)["controls"])
    for name in ("pretrain", "probe"):
        spec["data"][name]["overrides"] = {**spec["data"][name].get("overrides", {}), "force_law": law}
    return spec


def judge(world: str, rows: list[dict]) -> dict:
    """The pass rule on one world's rows."""
    reasons = [f"{r['name']} is newtonian" for r in rows if r["newtonian"]]
    if world == "power":
        for r in rows:
            if r["kind"] != "model":
                continue
            law = r["law"]
            lo, hi = law["fitted_exponents_ci95"]["r"]
            slack = law["resolution"]["exponents"]["r"] - max(law["fitted_exponents"]["r"] - lo,
                                                              hi - law["fitted_exponents"]["r"])
            if not lo - slack <= -2.5 <= hi + slack:
                reasons.append(f"{r['name']}: r exponent {law['fitted_exponents']['r']:+.3f} [{lo:+.3f}, {hi:+.3f}] "
                               f"does not reach -2.5 within {slack:.3f}")
    return {"passed": not reasons, "reasons": reasons}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory of the worlds' studies (resumable)")
    ap.add_argument("--seed", type=int, default=20, help="seed offset, as orbitlaw run --seed (default 20: no seed "
                    "the controls' design or its replications used)")
    ap.add_argument("--worlds", default=",".join(WORLDS))
    ap.add_argument("--rows", default=None, help="rows to run (default: W3-s<seed> and knn-state)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--result", default="benchmarks/results/control_wrong_law.json")
    args = ap.parse_args()
    worlds = {}
    for world in args.worlds.split(","):
        spec = world_spec(args.seed, WORLDS[world])
        only = set(args.rows.split(",")) if args.rows else {f"W{spec['window']}-s{spec['seeds'][0]}", "knn-state"}
        study = stages.Study(Path(args.out) / world, progress=False)
        rows = run_controls(study, spec, workers=args.workers, progress=False, only=only)
        keep = ("name", "kind", "window", "target", "probe_r2", "probe_r2_log", "linear_probe_r2_log_accel",
                "val_loss", "newtonian", "verdict", "newtonian_seeds")
        laws = stages.LAW_ROW_KEYS
        rows = [{**{k: r.get(k) for k in keep}, "law": {k: r["law"].get(k) for k in laws},
                 **({"law_frozen": {k: r["law_frozen"].get(k) for k in laws}} if r.get("law_frozen") else {})}
                for r in rows]
        worlds[world] = {"force_law": WORLDS[world], "rows": rows, "passes": judge(world, rows)}
        print(json.dumps({world: worlds[world]["passes"]}), flush=True)
    doc = {"benchmark": "control_wrong_law", "seed": args.seed, "pass_rule": PASS_RULE, "worlds": worlds,
           "passed": all(w["passes"]["passed"] for w in worlds.values()),
           "code_version": code_version(), "dependency_versions": dependency_versions()}
    write_json_atomic(Path(args.result), doc)


if __name__ == "__main__":
    main()
