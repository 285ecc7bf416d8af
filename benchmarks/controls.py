"""Positive and negative controls of the force probe (science.md section 8; issue "Controls").

Same data, same probes, same symbolic regression for every configuration:

- ``W3-seed{k}``: the ``control`` regression GPT (2 layers, width 32, one head) trained on chunks of W = 3
  steps of the ``binary`` preset (both masses drawn per system, so the force's variables show only in
  the dynamics), Gaussian input noise sigma (AU); k over training seeds;
- ``W1``: the same with W = 1 (one position of each body: no curvature, so no mass);
- ``W3-untrained``: the W = 3 shape at its random initialisation (one step at lr 0);
- ``full``: the same model trained on whole sequences (199 positions);
- ``knn-state``: the reference oracle, k-NN on the true state.

For each: the fine-tuned force probe (``orbitlaw probe``, held-out systems), per-layer linear probes of the
frozen model (held out by system), and ``orbitlaw discover`` on the fine-tuned probe's held-out predictions
(5 SR seeds). Writes ``benchmarks/results/controls.json`` (every number, settings, code version).

Run from a frozen snapshot of the code when other work goes on: ``python benchmarks/controls.py --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import orbits
from discovery.linear_probe import LinearProbeConfig, linear_probes
from discovery.oracle import OracleConfig, run_oracle
from discovery.probe import ProbeConfig, finetune
from discovery.symbolic import discover_law
from models.checkpoint import latest
from models.train import TrainConfig, train
from orbits.provenance import code_version, write_json_atomic


def configurations(seeds: int, steps: int, noise: float) -> list[dict]:
    common = {"preset": "control", "batch_size": 256, "lr": 1e-3, "max_steps": steps, "input_noise": noise,
              "eval_every": steps, "checkpoint_every": steps}
    out = [{"name": f"W3-seed{k}", "window": 3, "train": {**common, "chunk_steps": 3, "seed": k}}
           for k in range(seeds)]
    out.append({"name": "W1", "window": 1, "train": {**common, "chunk_steps": 1, "seed": 0}})
    out.append({"name": "W3-untrained", "window": 3,
                "train": {**common, "chunk_steps": 3, "seed": 0, "max_steps": 1, "lr": 0.0, "input_noise": 0.0}})
    out.append({"name": "full", "window": None,
                "train": {**common, "chunk_steps": None, "seed": 0, "batch_size": 32}})
    return out


def law_summary(law: dict) -> dict:
    return {"expression": law["expression"], "newtonian": law["newtonian"], "verdict": law["verdict"],
            "newtonian_seeds": law["newtonian_seeds"], "seeds": law["seeds"], "power_law": law.get("power_law"),
            "inconclusive_reasons": law.get("inconclusive_reasons", [])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="work directory (datasets, runs, probes; resumable)")
    ap.add_argument("--seeds", type=int, default=3, help="training seeds of the positive control")
    ap.add_argument("--train-steps", type=int, default=3000)
    ap.add_argument("--noise", type=float, default=0.02, help="input noise sigma (AU)")
    ap.add_argument("--probe-steps", type=int, default=600)
    ap.add_argument("--probe-batch", type=int, default=16)
    ap.add_argument("--sr-seeds", type=int, default=5)
    ap.add_argument("--result", default="benchmarks/results/controls.json")
    args = ap.parse_args()
    work = Path(args.out)
    t0 = time.perf_counter()
    pre, probe_data = work / "data-pretrain", work / "data-probe"
    if not pre.exists():
        orbits.simulate("binary", {"train": 2000, "val": 64}, 0, pre, progress=False)
    if not probe_data.exists():
        orbits.simulate("binary", {"train": 600}, 1, probe_data, progress=False)
    probe_kw = {"train_sequences": 300, "heldout_sequences": 300}
    rows = []
    for conf in configurations(args.seeds, args.train_steps, args.noise):
        name = conf["name"]
        run = work / "runs" / name
        t = time.perf_counter()
        if latest(run) is None:
            train(TrainConfig(data=str(pre), out=str(run), **conf["train"]), progress=False)
        train_s = time.perf_counter() - t
        pdir = work / "probes" / name
        if not (pdir / "metrics.json").exists():
            finetune(ProbeConfig(run=str(run), data=str(probe_data), out=str(pdir), steps=args.probe_steps,
                                 batch=args.probe_batch, lr=1e-3, **probe_kw), progress=False)
        metrics = json.loads((pdir / "metrics.json").read_text())["metrics"]["heldout_unlabelled"]
        ldir = work / "linear" / name
        if not (ldir / "linear_probes.json").exists():
            linear_probes(LinearProbeConfig(run=str(run), data=str(probe_data), out=str(ldir), **probe_kw),
                          progress=False)
        linear = json.loads((ldir / "linear_probes.json").read_text())
        rows.append({"name": name, "window": conf["window"], "train": conf["train"], "probe_r2": metrics["r2"],
                     "probe_r2_log": metrics["r2_log"], "linear_probe_r2": linear["best"]["force_magnitude"]["r2"],
                     "linear_probe_r2_log": linear["best"]["log_force_magnitude"]["r2"],
                     "linear_r2_by_layer": linear["r2"], "predictions": str(pdir / "predictions.csv"),
                     "train_seconds": round(train_s, 1)})
        print(name, {k: rows[-1][k] for k in ("probe_r2", "probe_r2_log", "linear_probe_r2")}, flush=True)
    odir = work / "probes" / "knn-state"
    if not (odir / "metrics.json").exists():
        run_oracle(OracleConfig(oracle="knn", data=str(probe_data), out=str(odir), **probe_kw))
    m = json.loads((odir / "metrics.json").read_text())["metrics"]["heldout_unlabelled"]
    rows.append({"name": "knn-state", "window": None, "probe_r2": m["r2"], "probe_r2_log": m["r2_log"],
                 "linear_probe_r2": None, "predictions": str(odir / "predictions.csv")})
    for row in rows:
        lawfile = Path(row["predictions"]).with_name("LAW.json")
        if not lawfile.exists():
            law = discover_law(row["predictions"], "F_pred", seeds=args.sr_seeds, subset=("near_train",))
            write_json_atomic(lawfile, law)
        row["law"] = law_summary(json.loads(lawfile.read_text()))
        print(row["name"], row["law"]["verdict"], row["law"]["newtonian_seeds"], row["law"]["expression"], flush=True)
    result = {"controls": rows, "settings": vars(args), "data": {"pretrain": "binary seed 0, 2000 + 64 val",
                                                                 "probe": "binary seed 1, 300 labelled + 300 held out"},
              "seconds": round(time.perf_counter() - t0, 1), "code_version": code_version()}
    Path(args.result).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.result), result)
    print(json.dumps({r["name"]: [r["probe_r2_log"], r["law"]["verdict"]] for r in rows}))


if __name__ == "__main__":
    main()
