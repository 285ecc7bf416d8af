"""Benchmark: training tokens/s of each attention at a model preset on this machine, and LSSAR's peak
memory when evaluating at 16x the training context (chunked over queries vs all at once).

Each attention trains the same model (same seed, same batches of real vafa2025 tokens) for a few
AdamW steps after a warm-up; the ratio to softmax (PyTorch SDPA) is reported in the same run.

On CUDA (``--device cuda``) training runs as ``orbitlaw train`` runs it there: bf16 autocast, fused AdamW,
LSSA/LSSAR through the Triton kernels, optionally ``torch.compile`` (``--compile``); the 16x evaluation
memory is the CUDA peak (``torch.cuda.max_memory_allocated``) of LSSAR and, for comparison, softmax.

    python benchmarks/train_throughput.py --preset tiny --steps 8 --out benchmarks/results/train_throughput.json
    python benchmarks/train_throughput.py --device cuda --preset gpt-109m --batch-size 16 --compile softmax,lssar \
        --out benchmarks/results/train_throughput_cuda.json
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from orbitlaw import models, orbits
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tokens_per_second(preset: str, attention: str, batch: torch.Tensor, steps: int, warmup: int,
                      device: torch.device, compile: bool = False) -> float:
    """Training tokens/s of one attention: forward + backward + clip + AdamW on ``batch`` (B, T + 1, 2)."""
    torch.manual_seed(0)
    model = models.build_model(preset, attention=attention).to(device)
    cuda = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=cuda)
    net = torch.compile(model) if compile else model
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    batch = batch.to(device)
    x, y = batch[:, :-1], batch[:, 1:]
    for i in range(warmup + steps):
        if i == warmup:
            _sync(device)
            t0 = time.perf_counter()
        with amp:
            _, loss = net(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    _sync(device)
    if not torch.isfinite(loss):
        raise RuntimeError(f"{attention}: non-finite training loss {float(loss)}")
    return x.shape[0] * x.shape[1] * steps / (time.perf_counter() - t0)


def cuda_eval_memory(preset: str, attention: str, T: int) -> int:
    """Peak CUDA bytes allocated while evaluating ``attention`` (rope, bf16 autocast) on one T-token sequence."""
    model = models.build_model(preset, attention=attention, pos="rope").cuda().eval()
    tokens = torch.randint(0, 7000, (1, T, 2), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        logits, _ = model(tokens)
    torch.cuda.synchronize()
    if not torch.isfinite(logits).all():
        raise RuntimeError(f"{attention}: non-finite logits at {T} tokens")
    return torch.cuda.max_memory_allocated() - base


_MEMORY_PROBE = """
import sys, torch
from orbitlaw import models
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
preset, T, query_chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = models.build_model(preset, attention="lssar", pos="rope",
                           chunk_size=None if query_chunk == "none" else int(query_chunk))
model.eval()
tokens = torch.randint(0, 7000, (1, T, 2))
open("/proc/self/clear_refs", "w").write("5")  # reset the peak-RSS mark (VmHWM) to the current RSS
base = rss("VmRSS:")
with torch.no_grad():
    logits, _ = model(tokens)
assert torch.isfinite(logits).all()
print(rss("VmHWM:") - base)
"""


def peak_eval_memory(preset: str, T: int, query_chunk: int | None) -> int:
    """Bytes the peak RSS grew by while evaluating LSSAR at T tokens (fresh process), ``query_chunk`` queries at a
    time (the memory chunk, ``GPTConfig.chunk_size``; None: all at once)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, preset, str(T), str(query_chunk or "none")],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return int(out.stdout.strip().splitlines()[-1])


PEAK_BF16_FLOPS = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}
"""Dense bf16 tensor-core peak by GPU name (NVIDIA datasheets, SXM), for the model FLOPs utilisation."""


def mfu(preset: str, rates: dict, device) -> dict | None:
    """Model FLOPs utilisation per timed run: 6 N tokens/s (forward and backward of N parameters, attention
    scores left out) over the GPU's dense bf16 peak; None off CUDA or for a GPU not in PEAK_BF16_FLOPS."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    if peak is None:
        return None
    n = sum(p.numel() for p in models.GPT(models.model_config(preset)).parameters())
    return {"parameters": n, "peak_flops": peak, "gpu": name, **{a: 6 * n * r / peak for a, r in rates.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=256, help="query chunk for the long evaluation")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--compile", default="", metavar="A,B",
                        help="also time these attentions torch.compile'd (comma-separated, or 'all')")
    parser.add_argument("--attentions", default="all", metavar="A,B",
                        help="time only these attentions eager (comma-separated; softmax is always timed)")
    parser.add_argument("--out", default="benchmarks/results/train_throughput.json")
    args = parser.parse_args()
    eager = list(models.ATTENTIONS) if args.attentions == "all" else ["softmax"] + [
        a for a in args.attentions.split(",") if a and a != "softmax"]
    for attention in eager:
        if attention not in models.ATTENTIONS:
            sys.exit(f"train_throughput: unknown attention {attention!r} in --attentions")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("train_throughput: --device cuda but CUDA is not available")

    config = models.model_config(args.preset)
    with tempfile.TemporaryDirectory() as tmp:
        data = orbits.simulate("vafa2025", {"train": args.batch_size}, 0, Path(tmp) / "d", progress=False)
        tokens = np.asarray(orbits.load_dataset(data)["train"].tokens[:, : config.block_size + 1], np.int64)
    batch = torch.from_numpy(tokens)

    rates, compiled = {}, {}
    for attention in eager:
        rates[attention] = tokens_per_second(args.preset, attention, batch, args.steps, args.warmup, device)
        print(f"{attention:>8}: {rates[attention]:9.0f} tokens/s  ({rates[attention] / rates['softmax']:.2f}x softmax)",
              flush=True)
    to_compile = list(models.ATTENTIONS) if args.compile == "all" else [a for a in args.compile.split(",") if a]
    for attention in to_compile:
        if attention not in models.ATTENTIONS:
            sys.exit(f"train_throughput: unknown attention {attention!r} in --compile")
    if to_compile:
        for attention in to_compile:
            compiled[attention] = tokens_per_second(args.preset, attention, batch, args.steps, args.warmup + 2,
                                                    device, compile=True)
            print(f"{attention:>8} compiled: {compiled[attention]:9.0f} tokens/s "
                  f"({compiled[attention] / rates[attention]:.2f}x eager)", flush=True)
    long_T = 16 * config.block_size
    if device.type == "cuda":
        memory = {"tokens": long_T, "lssar_bytes": cuda_eval_memory(args.preset, "lssar", long_T),
                  "softmax_bytes": cuda_eval_memory(args.preset, "softmax", long_T)}
        print(f"evaluation at 16x context ({long_T} tokens), CUDA peak: LSSAR +{memory['lssar_bytes'] / 2**20:.0f} "
              f"MiB, softmax +{memory['softmax_bytes'] / 2**20:.0f} MiB")
    else:
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
        "lssar_meets_target": rates["lssar"] / rates["softmax"] >= 0.7 if "lssar" in rates else None,
        "mfu": mfu(args.preset, {**rates, **{f"{a}_compiled": r for a, r in compiled.items()}}, device),
        "compiled_tokens_per_s": compiled,
        "lssar_eval_memory_16x": memory,
        "machine": {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                    "cpus": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                    "torch": torch.__version__},
        "code_version": code_version(), "dependency_versions": dependency_versions(), "args": vars(args),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.out), report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
