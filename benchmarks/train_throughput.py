"""Benchmark: training tokens/s of each attention at a model preset on this machine, and LSSAR's peak
memory when evaluating at 16x the training context (chunked over queries vs all at once).

Each attention trains the same model (same seed, same batches of real vafa2025 tokens) for a few
AdamW steps after a warm-up; the ratio to softmax (PyTorch SDPA) is reported in the same run.

    python benchmarks/train_throughput.py --preset tiny --steps 8 --out benchmarks/results/train_throughput.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import models
import orbits
from orbits.provenance import code_version


def tokens_per_second(preset: str, attention: str, batch: torch.Tensor, steps: int, warmup: int) -> float:
    torch.manual_seed(0)
    model = models.build_model(preset, attention=attention)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    x, y = batch[:, :-1], batch[:, 1:]
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return x.shape[0] * x.shape[1] * steps / (time.perf_counter() - t0)


_MEMORY_PROBE = """
import sys, torch, models
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
preset, T, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = models.build_model(preset, attention="lssar", pos="rope", chunk_size=None if chunk == "none" else int(chunk))
model.eval()
tokens = torch.randint(0, 7000, (1, T, 2))
open("/proc/self/clear_refs", "w").write("5")  # reset the peak-RSS mark (VmHWM) to the current RSS
base = rss("VmRSS:")
with torch.no_grad():
    logits, _ = model(tokens)
assert torch.isfinite(logits).all()
print(rss("VmHWM:") - base)
"""


def peak_eval_memory(preset: str, T: int, chunk: int | None) -> int:
    """Bytes the peak RSS grew by while evaluating LSSAR at T tokens (fresh process)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, preset, str(T), str(chunk or "none")],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return int(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=256, help="query chunk for the long evaluation")
    parser.add_argument("--out", default="benchmarks/results/train_throughput.json")
    args = parser.parse_args()

    config = models.model_config(args.preset)
    with tempfile.TemporaryDirectory() as tmp:
        data = orbits.simulate("vafa2025", {"train": args.batch_size}, 0, Path(tmp) / "d", progress=False)
        tokens = np.asarray(orbits.load_dataset(data)["train"].tokens[:, : config.block_size + 1], np.int64)
    batch = torch.from_numpy(tokens)

    rates = {}
    for attention in models.ATTENTIONS:
        rates[attention] = tokens_per_second(args.preset, attention, batch, args.steps, args.warmup)
        print(f"{attention:>8}: {rates[attention]:9.0f} tokens/s  ({rates[attention] / rates['softmax']:.2f}x softmax)",
              flush=True)
    long_T = 16 * config.block_size
    memory = {"tokens": long_T, "chunk_size": args.chunk,
              "chunked_bytes": peak_eval_memory(args.preset, long_T, args.chunk),
              "unchunked_bytes": peak_eval_memory(args.preset, long_T, None)}
    print(f"LSSAR evaluation at 16x context ({long_T} tokens): peak +{memory['chunked_bytes'] / 2**20:.0f} MiB "
          f"chunked by {args.chunk}, +{memory['unchunked_bytes'] / 2**20:.0f} MiB at once")
    report = {
        "benchmark": "training throughput per attention (forward + backward + AdamW)",
        "preset": args.preset, "batch_size": args.batch_size, "context": config.block_size,
        "tokens_per_s": rates,
        "ratio_to_softmax": {a: r / rates["softmax"] for a, r in rates.items()},
        "lssar_target_ratio": 0.7,
        "lssar_meets_target": rates["lssar"] / rates["softmax"] >= 0.7,
        "lssar_eval_memory_16x": memory,
        "machine": {"cpus": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                    "torch": torch.__version__},
        "code_version": code_version(), "args": vars(args),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
