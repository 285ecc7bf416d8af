"""Benchmark: the inductive-bias probe (``orbitlaw probe --inductive-bias``) on small trained models of each
architecture, beside an untrained GPT (a control: a model that learned nothing about orbits).

For each training seed: simulate ``two-body`` data (once), train ``tiny`` models with ``--arch gpt``,
``lstm`` and ``rnn`` for ``--steps`` steps (Mamba's plain-PyTorch scan is too slow for this CPU budget:
about 10 s a step), and run the probe (CPU sizes: ``--datasets`` datasets of 32 sequences, 100
iterations, 1,000 samples) on each and on an untrained GPT of the same shape. Writes
``benchmarks/results/inductive_bias.json`` (scores per oracle, validation loss, settings, machine, code
version). Run from the repository root: ``python benchmarks/experiments/inductive_bias.py [--seeds 1] [--steps 300]``.

``--study-preset cpu --study DIR`` instead measures the study's own models: it runs, in the study directory
``DIR``, exactly the stages ``orbitlaw run --preset cpu --arch lstm,rnn --out DIR`` runs for them (the
data, ``train:<model>`` and ``inductive_bias:<model>``, with the same cached keys, so the study later
reuses them at the same code version), plus an untrained GPT of the study's shape probed the same way.
Per model: the score per oracle, the score over the mean oracle distance (0: the model's extrapolations
track the oracle's; about 1: they do not), and the slope of the model's binned distances on the oracle's
(1: tracking). Writes ``benchmarks/results/inductive_bias_cpu_study.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from orbitlaw import orbits
from orbitlaw.commands._shared import default_workers
from orbitlaw.discovery.probes.inductive_bias import InductiveBiasConfig, inductive_bias
from orbitlaw.models.architectures import ARCHITECTURES
from orbitlaw.models.metrics import read_metrics
from orbitlaw.models.train import TrainConfig, train
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

ARCHS = tuple(name for name, arch in ARCHITECTURES.items() if not arch.slow_scan)
"""The cores trained here: every one but those too slow for this CPU budget (Mamba's scan)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--work", default="/tmp/orbitlaw-ib-bench")
    parser.add_argument("--out", default=None)
    parser.add_argument("--study-preset", choices=["cpu", "smoke"], default=None,
                        help="measure this study preset's own models (with --arch lstm,rnn) instead")
    parser.add_argument("--study", default="/tmp/orbitlaw-ib-study", help="the study directory (--study-preset)")
    args = parser.parse_args()
    if args.study_preset:
        study_models(args.study_preset, Path(args.study),
                     Path(args.out or "benchmarks/results/inductive_bias_cpu_study.json"))
        return
    args.out = args.out or "benchmarks/results/inductive_bias.json"
    work = Path(args.work)
    data = work / "data"
    if not (data / "manifest.json").exists():
        orbits.simulate("two-body", {"train": 2000, "val": 64}, 0, data, progress=False)
    rows = []
    start = time.perf_counter()
    for seed in range(args.seeds):
        for arch in (*ARCHS, "gpt-untrained"):
            run = work / f"run-{arch}-s{seed}"
            steps = 1 if arch == "gpt-untrained" else args.steps
            cfg = TrainConfig(data=str(data), out=str(run), preset="tiny", arch=arch.removesuffix("-untrained"),
                              max_steps=steps, batch_size=16, lr=1e-3 if steps > 1 else 1e-12, seed=seed,
                              eval_every=steps, checkpoint_every=steps, eval_sequences=64, device="cpu")
            t0 = time.perf_counter()
            if not (run / "config.json").exists():
                train(cfg, progress=False)
            trained = time.perf_counter() - t0
            t0 = time.perf_counter()
            doc = inductive_bias(InductiveBiasConfig(run=str(run), data=str(data), out=str(work / f"ib-{arch}-s{seed}"),
                                                     datasets=args.datasets, seed=seed, device="cpu"), progress=False)
            val = [r["val_loss"] for r in read_metrics(run) if r.get("val_loss") is not None]
            rows.append({"arch": arch, "seed": seed, "steps": steps, "val_loss": val[-1] if val else None,
                         "scores": doc["scores"], "train_seconds": trained, "probe_seconds": time.perf_counter() - t0,
                         "revealed_mse_mean": sum(d["revealed_mse"] for d in doc["datasets"]) / len(doc["datasets"])})
            print(json.dumps(rows[-1]), flush=True)
    write_json_atomic(Path(args.out), {
        "benchmark": "inductive_bias", "settings": {**vars(args), "preset": "tiny", "batch_size": 16,
                                                    "data": "two-body train 2000, seed 0", "probe_sequences": 32,
                                                    "probe_iterations": 100, "probe_samples": 1000},
        "rows": rows, "wall_seconds": time.perf_counter() - start,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code_version": code_version(), "dependency_versions": dependency_versions()})


def tracking(doc: dict) -> dict:
    """Per oracle: the score, the score over the mean oracle distance of the non-empty bins, and the
    least-squares slope of the model's binned distance on the oracle's (1 when the model tracks it)."""
    out = {}
    for oracle, curves in doc["curves"].items():
        pairs = [(x, y) for x, y in zip(curves["model"]["oracle_distance"], curves["model"]["distance"], strict=True)
                 if x is not None]
        xs, ys = np.array(pairs).T
        slope = float(np.polyfit(xs, ys, 1)[0]) if len(xs) > 1 else None
        score = curves["model"]["score"]
        out[oracle] = {"score": score, "relative_score": score / float(xs.mean()), "slope": slope}
    return out


def study_models(preset: str, out_dir: Path, out: Path) -> None:
    """The inductive-bias probe of ``preset``'s models, through the study's own stages (module docstring)."""
    from orbitlaw.study import pipeline, stages
    from orbitlaw.study.presets import study_config

    start = time.perf_counter()
    config = study_config(preset, archs=["lstm", "rnn"])
    study = stages.Study(out_dir, progress=False)
    data = pipeline.simulate_data(study, config, ("pretrain", "probe"), default_workers(), False)
    untrained = copy.deepcopy(config)
    untrained["attentions"], untrained["archs"] = ["softmax"], []
    untrained["train"].update(max_steps=1, lr=0.0, warmup_steps=0, eval_every=1, checkpoint_every=1, log_every=1)
    control = stages.Study(out_dir / "control-untrained", progress=False)
    rows = []
    for name, where, cfg in [*[(n, study, config) for n in pipeline.model_names(config)],
                             ("softmax-untrained", control, untrained)]:
        model = name.removesuffix("-untrained")
        t0 = time.perf_counter()
        run, train_spec, trained = pipeline.train_model(where, cfg, model, data, progress=False)
        t1 = time.perf_counter()
        pipeline.inductive_bias(where, cfg, model, run, train_spec, data, progress=False)
        doc = json.loads(where.path("inductive_bias", model, "inductive_bias.json").read_text())
        rows.append({"model": name, "arch": name if name in config["archs"] else "gpt",
                     "steps": trained["steps"], "val_loss": trained["val_loss"], "train_loss": trained["train_loss"],
                     "scores": doc["scores"], "target_scores": doc["target_scores"], "tracking": tracking(doc),
                     "revealed_mse_mean": float(np.mean([d["revealed_mse"] for d in doc["datasets"]])),
                     "train_seconds_this_invocation": t1 - t0,
                     "probe_seconds_this_invocation": time.perf_counter() - t1})
        print(json.dumps({k: rows[-1][k] for k in ("model", "val_loss", "scores")}), flush=True)
    trained_rows = [r for r in rows if not r["model"].endswith("-untrained")]
    write_json_atomic(out, {
        "benchmark": "inductive_bias_study", "study_preset": preset, "study": str(out_dir),
        "settings": {"train": config["train"], "pretrain_data": config["pretrain_data"],
                     "probe_data": config["probe_data"], "inductive_bias": config["inductive_bias"],
                     "models": [r["model"] for r in rows]},
        "rows": rows,
        "reference_finding_holds": {  # Vafa et al.: the extrapolations do not track the state oracle
            o: all(r["tracking"][o]["relative_score"] > 0.25 for r in trained_rows) for o in rows[0]["scores"]},
        "wall_seconds_this_invocation": time.perf_counter() - start,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code_version": code_version(), "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
