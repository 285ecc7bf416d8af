"""Benchmark: the force probe under ``--protocol orbitlaw`` and ``--protocol reference`` on the same data and
the same pretrained model.

Per dataset preset (``two-body`` and the reference's probe set ``two-body-exoplanet``): simulate
``train=N,val=64`` short sequences, pretrain ``tiny`` for a few hundred steps (one seed, shared by every
probe of that preset), then fine-tune the force-magnitude probe at each probe seed under:

- ``orbitlaw``: ln|F| standardised, masked MSE over all labels of the batch, PCG64 label layout;
- ``reference``: raw |F|, masked MSE per sequence then over the batch, RandomState(seed) label layout;
- ``orbitlaw-raw`` (ablation, ``--protocol orbitlaw --scaling raw``): raw |F| with the orbitlaw loss and
  layout, which separates the target scaling from the loss weighting and label draw.

Every probe uses the default split (first 90% of the sequences fully labelled, the rest held out with 2
labels each), the same steps, batch and lr. Recorded per run: the held-out unlabelled R^2 of |F|, R^2 of
ln|F| (on the rows whose predicted |F| is > 0), MAE (M_sun AU/yr^2) and the count of predictions <= 0;
per preset: the spread of the labelled |F| and mean, sd and win counts over the seeds. Then, as a check
that the short budget does not decide the comparison, ``orbitlaw`` and ``reference`` once more at
``--long-steps`` (``long``). About 11 minutes on one CPU core (643 s measured).

    python benchmarks/experiments/probe_protocol.py --out benchmarks/results/probe_protocol.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.discovery.probes.probe import ProbeConfig, finetune
from orbitlaw.models.evaluate import evaluate
from orbitlaw.models.train import TrainConfig, train
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

VARIANTS = {"orbitlaw": {"protocol": "orbitlaw", "scaling": None},
            "reference": {"protocol": "reference", "scaling": None},
            "orbitlaw-raw": {"protocol": "orbitlaw", "scaling": "raw"}}
METRICS = ("r2", "r2_log", "mae", "nonpositive_pred")


def pretrain(data: Path, run: Path, args) -> dict:
    """Pretrain ``tiny`` on ``data`` for ``args.pretrain_steps`` steps; its validation loss and seconds."""
    cfg = TrainConfig(data=str(data), out=str(run), preset="tiny", max_steps=args.pretrain_steps,
                      batch_size=args.pretrain_batch, lr=1e-3, schedule="cosine", warmup_steps=20,
                      eval_every=args.pretrain_steps, checkpoint_every=args.pretrain_steps,
                      log_every=max(args.pretrain_steps // 10, 1), eval_sequences=64, seed=0)
    t0 = time.perf_counter()
    train(cfg, progress=False)
    seconds = time.perf_counter() - t0
    ev = evaluate(run, data, n_seq=64)
    return {"steps": args.pretrain_steps, "batch": args.pretrain_batch, "seconds": round(seconds, 1),
            "val_loss": ev["loss"], "position_error_au": ev["position_error_au"],
            "repeat_last_error_au": ev["baselines"]["repeat_last"]["position_error_au"]}


def probe(data: Path, run: Path, out: Path, variant: str, seed: int, steps: int, args) -> dict:
    """One force-magnitude probe of ``steps`` steps; its held-out unlabelled metrics and seconds."""
    cfg = ProbeConfig(run=str(run), data=str(data), out=str(out), steps=steps, batch=args.probe_batch,
                      seed=seed, checkpoint_every=steps, eval_train_sequences=64, near_train=500,
                      device="cpu", **VARIANTS[variant])
    t0 = time.perf_counter()
    res = finetune(cfg, progress=False)
    m = res["metrics"]["heldout_unlabelled"]
    return {"variant": variant, "seed": seed, **{k: m[k] for k in METRICS}, "n": m["n"],
            "train_r2_log": res["metrics"]["train_labelled"]["r2_log"], "final_loss": res["final_loss"],
            "seconds": round(time.perf_counter() - t0, 1)}


def force_range(data: Path) -> dict:
    """Quantiles of the planets' |F| (M_sun AU/yr^2) over the training split."""
    split = orbits.load_dataset(data)["train"]
    f = np.hypot(*np.moveaxis(np.asarray(split.forces)[:, :, 0], -1, 0)).ravel()
    f = f[np.isfinite(f)]
    q = np.quantile(f, [0.0, 0.01, 0.5, 0.99, 1.0])
    return dict(zip(("min", "p01", "median", "p99", "max"), map(float, q), strict=True))


def summarise(runs: list[dict]) -> dict:
    """Per variant: mean, sd and values of each metric over the seeds; per metric, in how many seeds
    orbitlaw beats reference (higher R^2, lower MAE)."""
    out = {}
    for variant in VARIANTS:
        rows = [r for r in runs if r["variant"] == variant]
        out[variant] = {}
        for k in METRICS:
            vals = [r[k] for r in rows if r[k] is not None]
            out[variant][k] = {"mean": statistics.fmean(vals) if vals else None,
                               "sd": statistics.stdev(vals) if len(vals) > 1 else None, "values": vals}
    pairs = [(a, b) for a in runs if a["variant"] == "orbitlaw" for b in runs
             if b["variant"] == "reference" and b["seed"] == a["seed"]]
    better = {"r2": lambda a, b: a > b, "r2_log": lambda a, b: a > b, "mae": lambda a, b: a < b}
    out["orbitlaw_beats_reference"] = {
        k: f"{sum(a[k] is not None and (b[k] is None or f(a[k], b[k])) for a, b in pairs)}/{len(pairs)}"
        for k, f in better.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="two-body,two-body-exoplanet")
    ap.add_argument("--sequences", type=int, default=2000, help="training-split sequences per preset")
    ap.add_argument("--seq-len", type=int, default=65, help="tokens per sequence (context = seq_len - 1)")
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--pretrain-batch", type=int, default=16)
    ap.add_argument("--probe-steps", type=int, default=300)
    ap.add_argument("--probe-batch", type=int, default=16)
    ap.add_argument("--seeds", default="0,1,2", help="probe seeds")
    ap.add_argument("--long-steps", type=int, default=1500, help="the longer check's probe steps (0: none)")
    ap.add_argument("--long-seeds", default="0", help="the longer check's probe seeds")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--workdir", default=None, help="keep the data, runs and probes here (default: a temp dir)")
    ap.add_argument("--out", default="benchmarks/results/probe_protocol.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        result = {"benchmark": "force probe: --protocol orbitlaw vs reference, same data and pretrained model",
                  "setup": {**{k: v for k, v in vars(args).items() if k not in ("out", "workdir")},
                            "probe_lr": 6e-4, "split": "first 90% fully labelled, rest held out with 2 labels",
                            "variants": VARIANTS},
                  "machine": {"platform": platform.platform(), "torch": torch.__version__, "threads": args.threads},
                  "code_version": code_version(), "dependency_versions": dependency_versions(), "presets": {}}
        for preset in args.presets.split(","):
            data = orbits.simulate(preset, {"train": args.sequences, "val": 64}, 0, work / preset / "data",
                                   overrides={"seq_len": args.seq_len}, progress=False)
            run = work / preset / "run"
            entry = {"force_range": force_range(data), "pretrain": pretrain(data, run, args), "runs": []}
            print(preset, "pretrain:", entry["pretrain"], "|F|:", entry["force_range"], flush=True)
            for seed in seeds:
                for variant in VARIANTS:
                    r = probe(data, run, work / preset / f"probe-{variant}-{seed}", variant, seed, args.probe_steps,
                              args)
                    entry["runs"].append(r)
                    print(preset, json.dumps(r), flush=True)
            entry["summary"] = summarise(entry["runs"])
            if args.long_steps:
                entry["long"] = {"steps": args.long_steps, "runs": []}
                for seed in (int(s) for s in args.long_seeds.split(",")):
                    for variant in ("orbitlaw", "reference"):
                        r = probe(data, run, work / preset / f"long-{variant}-{seed}", variant, seed, args.long_steps,
                                  args)
                        entry["long"]["runs"].append(r)
                        print(preset, "long", json.dumps(r), flush=True)
            result["presets"][preset] = entry
        result["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.out), result)
    print(json.dumps({p: e["summary"] for p, e in result["presets"].items()}, indent=1))


if __name__ == "__main__":
    main()
