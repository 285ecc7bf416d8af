"""Benchmark: passkey retrieval (``orbitlaw.models.passkey``) for every attention of the registry, with seeds.

Every variant (``orbitlaw.kernels.registry.sweep``: each registered attention at ``--p``, LSSAR also at
p = 3) is trained from ``--seeds`` seeds on sequences of ``--train-length`` tokens (``--steps`` steps of
32) and tested on ``--test-samples`` fresh sequences at 1x, 2x, 4x, 8x and 16x that length. Two runs go at once; each
finished run is kept in ``--work`` (a killed benchmark resumes). Writes ``--out`` (JSON: accuracy per
variant, length and seed, mean and sd; settings, machine, code version) and a figure beside it.

    python benchmarks/experiments/passkey.py --out benchmarks/results/passkey.json
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from sweep import add_sweep_arguments, chosen_variants, plot_curves, run_all, sweep_parser


def one_run(task: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    from orbitlaw.models.passkey import PasskeyConfig, run_passkey

    out = Path(task.pop("out"))
    if out.exists():
        return json.loads(out.read_text())
    label = task.pop("label")
    result = run_passkey(PasskeyConfig(**task), out=None)
    result["label"] = label
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result))
    return result


def main() -> None:
    parser = sweep_parser(__doc__, 400)
    parser.add_argument("--train-length", type=int, default=32)
    parser.add_argument("--test-samples", type=int, default=200, help="test sequences per length")
    add_sweep_arguments(parser, "/tmp/orbitlaw-passkey-bench", "benchmarks/results/passkey.json")
    args = parser.parse_args()

    from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

    labels, chosen = chosen_variants(args.only, args.p)
    work = Path(args.work)
    tasks = [{"label": label, "attention": labels[label][0], "p": labels[label][1], "seed": seed,
              "steps": args.steps, "train_length": args.train_length, "test_samples": args.test_samples,
              "out": str(work / f"{label}-s{seed}-L{args.train_length}-{args.steps}-{args.test_samples}.json")}
             for seed in range(args.seeds) for label in chosen]
    start = time.perf_counter()
    rows = run_all(one_run, tasks, args.workers, lambda row: f"{row['label']:>15s} seed {row['config']['seed']}: "
                   + "  ".join(f"{m}x {a:.2f}" for m, a in row["accuracy"].items()) + f"  ({row['seconds']:.0f} s)")
    multiples = list(rows[0]["accuracy"])
    table = {}
    for label in chosen:
        mine = [r for r in rows if r["label"] == label]
        table[label] = {"attention": labels[label][0], "p": labels[label][1],
                        **{m: {"accuracy": [r["accuracy"][m] for r in mine],
                               "mean": float(np.mean([r["accuracy"][m] for r in mine])),
                               "sd": float(np.std([r["accuracy"][m] for r in mine], ddof=1)) if len(mine) > 1
                               else None} for m in multiples}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure = out.with_suffix(".png")
    xs = [int(m) for m in multiples]
    plot_curves(table, xs, lambda e, x: (e[str(x)]["mean"], e[str(x)]["sd"]), figure,
                f"test length / training length ({args.train_length} tokens)", "passkey accuracy (chance 0.01)",
                "Passkey retrieval (mean ± sd over seeds)")
    write_json_atomic(out, {
        "benchmark": "passkey", "multiples": xs, "table": table, "runs": rows,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "work")},
        "wall_seconds": time.perf_counter() - start, "figure": figure.name,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code_version": code_version(), "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
