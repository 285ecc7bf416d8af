"""Benchmark: length extrapolation of every attention of the registry, the LSSAR write-up's table on orbits.

Every variant (``orbitlaw.kernels.registry.NAMES``, re-weighting ones at ``--p``; LSSAR also at p = 3 as
``lssar-p3``) is trained from each of ``--seeds`` seeds on the same ``two-body`` data: a ``tiny`` GPT with
rotary positions, narrowed to ``--width`` and a training context of ``--context`` tokens, ``--steps`` steps
of ``--batch`` sequences (cosine lr 1e-3, fp32, one CPU thread per run). Each run is then evaluated by
``orbitlaw evaluate`` on fresh sequences of 1x, 2x, 4x, 8x and 16x its training context
(``--sequences`` of each). Two runs go at once (``--workers``); finished runs are kept in ``--work``, so a
killed benchmark resumes.

Writes ``--out`` (JSON: per variant and length the loss of each seed, its mean and standard deviation,
and the ratio to the same seed's loss at 1x; settings, machine, code version) and a figure beside it.

    python benchmarks/experiments/extrapolation.py --out benchmarks/results/extrapolation.json
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from sweep import add_sweep_arguments, chosen_variants, plot_curves, run_all, sweep_parser

LENGTHS = (1, 2, 4, 8, 16)


def one_run(task: dict) -> dict:
    """Train and evaluate one (variant, seed); the result is cached as JSON in the run directory."""
    import torch

    torch.set_num_threads(1)
    from orbitlaw.models.evaluate import evaluate
    from orbitlaw.models.train import TrainConfig, read_metrics, train

    run = Path(task["run"])
    done = run / "extrapolation-result.json"
    if done.exists():
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    cfg = TrainConfig(data=task["data"], out=str(run), preset="tiny", attention=task["attention"], p=task["p"],
                      pos="rope", max_steps=task["steps"], batch_size=task["batch"], lr=1e-3, schedule="cosine",
                      warmup_steps=max(1, task["steps"] // 20), seed=task["seed"], eval_every=task["steps"],
                      checkpoint_every=task["steps"], eval_sequences=32, precision="fp32", device="cpu",
                      model_overrides={"block_size": task["context"], "n_embd": task["width"]})
    train(cfg, resume=(run / "config.json").exists(), progress=False)
    trained = time.perf_counter() - t0
    result = evaluate(run, task["data"], lengths=list(LENGTHS), split="val", n_seq=16,
                      extrapolation_sequences=task["sequences"], chunk_size=256)
    val = [r["val_loss"] for r in read_metrics(run) if r.get("val_loss") is not None]
    out = {"label": task["label"], "attention": task["attention"], "p": task["p"], "seed": task["seed"],
           "val_loss": val[-1], "loss": result["extrapolation"]["loss"], "train_seconds": trained,
           "seconds": time.perf_counter() - t0}
    done.write_text(json.dumps(out))
    return out


def summarise(rows: list[dict]) -> dict:
    """Per variant and length: losses per seed, mean, sd (ddof 1) and the mean ratio to 1x."""
    table = {}
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = sorted((r for r in rows if r["label"] == label), key=lambda r: r["seed"])
        entry = {"attention": mine[0]["attention"], "p": mine[0]["p"], "seeds": [r["seed"] for r in mine]}
        for m in LENGTHS:
            loss = np.array([r["loss"][str(m)] for r in mine])
            ratio = loss / np.array([r["loss"]["1"] for r in mine])
            entry[str(m)] = {"loss": loss.tolist(), "mean": float(loss.mean()),
                             "sd": float(loss.std(ddof=1)) if len(loss) > 1 else None,
                             "ratio_mean": float(ratio.mean()),
                             "ratio_sd": float(ratio.std(ddof=1)) if len(ratio) > 1 else None}
        table[label] = entry
    return table


def main() -> None:
    parser = sweep_parser(__doc__, 300)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=64, help="training context (tokens)")
    parser.add_argument("--width", type=int, default=64, help="model width (tiny's is 128)")
    parser.add_argument("--sequences", type=int, default=4, help="evaluation sequences per length")
    parser.add_argument("--train-sequences", type=int, default=2000, help="two-body training sequences")
    add_sweep_arguments(parser, "/tmp/orbitlaw-extrapolation-bench", "benchmarks/results/extrapolation.json")
    args = parser.parse_args()

    from orbitlaw import orbits
    from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

    work = Path(args.work)
    data = work / f"data-{args.train_sequences}"
    if not (data / "manifest.json").exists():
        orbits.simulate("two-body", {"train": args.train_sequences, "val": 64}, 0, data, progress=False)
    labels, chosen = chosen_variants(args.only, args.p)
    tasks = [{"label": label, "attention": labels[label][0], "p": labels[label][1], "seed": seed,
              "run": str(work / f"run-{label}-s{seed}-{args.context}x{args.width}-{args.steps}"), "data": str(data),
              "steps": args.steps, "batch": args.batch, "context": args.context, "width": args.width,
              "sequences": args.sequences}
             for seed in range(args.seeds) for label in chosen]
    start = time.perf_counter()
    rows = run_all(one_run, tasks, args.workers, lambda row: f"{row['label']:>15s} seed {row['seed']}: " + "  ".join(
        f"{m}x {row['loss'][str(m)]:.3f}" for m in LENGTHS) + f"  ({row['seconds']:.0f} s)")
    table = summarise(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure = out.with_suffix(".png")
    plot_curves(table, list(LENGTHS), lambda e, m: (e[str(m)]["mean"], e[str(m)]["sd"]), figure,
                "evaluation context / training context", "validation loss (nats per coordinate)",
                "Length extrapolation on two-body orbits (mean ± sd over seeds)", ylog=True)
    write_json_atomic(out, {
        "benchmark": "extrapolation", "lengths": list(LENGTHS), "table": table, "runs": rows,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "work")},
        "data": {"preset": "two-body", "train": args.train_sequences, "val": 64, "seed": 0},
        "wall_seconds": time.perf_counter() - start, "figure": figure.name,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code_version": code_version(), "dependency_versions": dependency_versions()})


if __name__ == "__main__":
    main()
