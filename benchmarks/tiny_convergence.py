"""Benchmark: how far the ``tiny`` GPT gets in a few CPU minutes, with the normal and the Fourier bin
initialisation, in one run.

Simulates a dataset (``two-body`` by default: the study's pretraining distribution), trains ``tiny``
(softmax attention, rotary positions) from the same seed on the same batches once per ``--inits`` entry,
evaluates each on the validation split, and writes JSON with, per init: CPU and wall seconds, the loss
curve, the validation loss, per-coordinate accuracy, mean position error (AU) and R^2 of the argmax
prediction, beside reference points that know nothing of orbits: the uniform loss ln(7000), the unigram
entropy of the training positions, and the repeat-last / constant-velocity baselines of
``orbitlaw.models.evaluate`` (same targets).

    python benchmarks/tiny_convergence.py --steps 100 --out benchmarks/results/tiny_convergence.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.models.evaluate import evaluate
from orbitlaw.models.train import TrainConfig, train
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic


def unigram_entropy(tokens: np.ndarray, num_bins: int) -> float:
    """Mean over x and y of the entropy (nats) of the position-bin frequencies in tokens (n, L, 2)."""
    out = []
    for c in range(2):
        ids = tokens[..., c].ravel()
        counts = np.bincount(ids[ids < num_bins], minlength=num_bins)
        freq = counts[counts > 0] / counts.sum()
        out.append(float(-(freq * np.log(freq)).sum()))
    return float(np.mean(out))


def run_one(data: Path, init: str, args, out: Path) -> dict:
    cfg = TrainConfig(data=str(data), out=str(out), preset="tiny", attention="softmax", pos="rope",
                      max_steps=args.steps, batch_size=args.batch_size, lr=args.lr, schedule="cosine",
                      warmup_steps=args.warmup, eval_every=max(args.steps // 4, 1), checkpoint_every=args.steps,
                      log_every=max(args.steps // 20, 1), eval_sequences=64, seed=args.seed,
                      model_overrides={"embed_init": init})
    cpu0, wall0 = time.process_time(), time.perf_counter()
    train(cfg, progress=False)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    ev = evaluate(out, data, n_seq=args.val_sequences)
    curve = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    result = {"init": init, "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
              "val_loss": ev["loss"], "accuracy": ev["accuracy"], "position_error_au": ev["position_error_au"],
              "r2_positions": ev["r2_positions"], "baselines": ev["baselines"],
              "curve": [{k: row[k] for k in ("step", "train_loss", "val_loss") if k in row} for row in curve]}
    print(f"{init:>8}: val loss {ev['loss']:.3f}, position error {ev['position_error_au']:.3f} AU, "
          f"R^2 x {ev['r2_positions']['x']:.3f} y {ev['r2_positions']['y']:.3f}, "
          f"{wall / 60:.1f} min wall ({cpu / 60:.1f} CPU min)", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="two-body", help="orbits preset of the data")
    parser.add_argument("--train-sequences", type=int, default=4000)
    parser.add_argument("--val-sequences", type=int, default=64)
    parser.add_argument("--inits", default="normal,fourier")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/tiny_convergence.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = orbits.simulate(args.preset, {"train": args.train_sequences, "val": args.val_sequences},
                               args.seed, Path(tmp) / "data", progress=False)
        train_split = orbits.load_dataset(data)["train"]
        spec = train_split.tokenizer
        reference = {"uniform_loss": math.log(spec.num_bins),
                     "unigram_entropy": unigram_entropy(np.asarray(train_split.tokens[:, :257]), spec.num_bins)}
        print(f"uniform loss {reference['uniform_loss']:.3f}, unigram entropy {reference['unigram_entropy']:.3f}",
              flush=True)
        runs = {init: run_one(data, init, args, Path(tmp) / f"run-{init}") for init in args.inits.split(",")}
    report = {"benchmark": "tiny GPT: validation metrics after a fixed CPU training budget, per embedding init",
              "data": {"preset": args.preset, "train": args.train_sequences, "val": args.val_sequences},
              "tokens_trained": args.steps * args.batch_size * 256, "reference": reference, "runs": runs,
              "machine": {"threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                          "torch": torch.__version__},
              "code_version": code_version(), "dependency_versions": dependency_versions(), "args": vars(args)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.out), report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
