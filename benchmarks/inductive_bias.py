"""Benchmark: the inductive-bias probe (``orbitlaw probe --inductive-bias``) on small trained models of each
architecture, beside an untrained GPT (a control: a model that learned nothing about orbits).

For each training seed: simulate ``two-body`` data (once), train ``tiny`` models with ``--arch gpt``,
``lstm`` and ``rnn`` for ``--steps`` steps (Mamba's plain-PyTorch scan is too slow for this CPU budget:
about 10 s a step), and run the probe (CPU sizes: ``--datasets`` datasets of 32 sequences, 100
iterations, 1,000 samples) on each and on an untrained GPT of the same shape. Writes
``benchmarks/results/inductive_bias.json`` (scores per oracle, validation loss, settings, machine, code
version). Run from the repository root: ``python benchmarks/inductive_bias.py [--seeds 1] [--steps 300]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from orbitlaw import orbits
from orbitlaw.discovery.inductive_bias import InductiveBiasConfig, inductive_bias
from orbitlaw.models.train import TrainConfig, read_metrics, train
from orbitlaw.orbits.provenance import code_version, dependency_versions, write_json_atomic

ARCHS = ("gpt", "lstm", "rnn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--work", default="/tmp/orbitlaw-ib-bench")
    parser.add_argument("--out", default="benchmarks/results/inductive_bias.json")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
