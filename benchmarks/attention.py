"""Benchmark the fused Triton LSSA / LSSAR kernels against PyTorch SDPA (flash) softmax attention and the
eager PyTorch references.

--device cuda: the full sweep, bf16, T = 1k..16k, head dims 64 and 128, with B * T = 16k tokens and
  H * D = 2048: forward, backward and forward+backward TFLOP/s (triton.testing.do_bench) and peak memory
  (torch.cuda.max_memory_allocated) of SDPA softmax, LASER (on SDPA), LSSA and LSSAR (p = 15) Triton, and
  the eager references where their T x T intermediates fit; the LSSAR / SDPA ratios against the targets
  (forward+backward >= 0.6x SDPA for T >= 4k, peak memory <= 1.2x SDPA); an inf/NaN check of LSSAR p = 15
  in bf16 at T = 16k; and a correctness section (Triton vs reference).
--device cpu: the correctness section with the Triton interpreter (float32, small shapes) and a small
  CPU timing of the eager references against SDPA; GPU throughput is not measured.

FLOP convention: every method is credited with causal softmax attention's matmul FLOPs, forward
2 * B * H * T^2 * D (two matmuls, half of them masked), backward 2.5x that, forward+backward 3.5x; so
TFLOP/s compare wall-clock time at equal shapes.

Usage: python benchmarks/attention.py --device cpu --out /tmp/att.json [--plot /tmp/att.png]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEQ_LENS = (1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
TOKENS = 16384  # batch * T
MODEL_DIM = 2048  # heads * D
P = 15.0
TARGET_SPEED = 0.6  # LSSAR fwd+bwd throughput / SDPA's, for T >= TARGET_FROM_T
TARGET_MEMORY = 1.2  # LSSAR fwd+bwd peak memory / SDPA's
TARGET_FROM_T = 4096


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="cuda: full GPU sweep; cpu: correctness (Triton interpreter) + small CPU timing",
    )
    ap.add_argument("--out", default=None, help="JSON output (default benchmarks/results/attention_<device>.json)")
    ap.add_argument("--plot", default=None, help="optional PNG plot")
    ap.add_argument("--seq-lens", type=int, nargs="+", default=list(SEQ_LENS), help="CUDA sweep sequence lengths")
    ap.add_argument("--head-dims", type=int, nargs="+", default=list(HEAD_DIMS), help="CUDA sweep head dims")
    ap.add_argument("--no-correctness", action="store_true",
                    help="skip the correctness section (tests/test_kernels.py covers it; saves the autotuning)")
    ap.add_argument("--methods", nargs="+", default=None, help="CUDA sweep: only these methods (default all)")
    ap.add_argument("--rep-ms", type=int, default=200, help="do_bench repetition time per measurement (ms)")
    ap.add_argument("--poly-shares", nargs="+", default=[], metavar="SHARE",
                    help="CUDA sweep: also the Triton kernels at these poly shares (0.25, 0.5, 0.75, 1 or auto:\n"
                         "the share of each tile's exp and reciprocal on the FMA pipes), as lssa_triton_poly<SHARE>")
    args = ap.parse_args(argv)
    from orbitlaw.kernels.checks import poly_quarters

    for share in args.poly_shares:
        try:
            poly_quarters(share if share == "auto" else float(share))
        except ValueError as err:
            ap.error(str(err))
    return args


# ----------------------------------------------------------------------------------------------------------
# shared helpers
# ----------------------------------------------------------------------------------------------------------
def methods(torch, F, kernels, poly_shares=()):
    """name -> f(q, k, v) for every benchmarked attention (all causal, (B, H, T, D) -> (B, H, T, D)); the
    Triton kernels also at each of ``poly_shares`` (strings, as given to --poly-shares)."""
    from orbitlaw.kernels import laser_attention, lssa_reference, lssar_reference

    def at(share):
        value = share if share == "auto" else float(share)
        return {f"lssa_triton_poly{share}": lambda q, k, v: kernels.lssa_attention(q, k, v, backend="triton",
                                                                                  poly_share=value),
                f"lssar_triton_poly{share}": lambda q, k, v: kernels.lssar_attention(q, k, v, p=P, backend="triton",
                                                                                    poly_share=value)}

    extra = {name: fn for share in poly_shares for name, fn in at(share).items()}
    base = {
        "sdpa_softmax": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "laser_sdpa": laser_attention,
        "lssa_triton": lambda q, k, v: kernels.lssa_attention(q, k, v, backend="triton"),
        "lssar_triton": lambda q, k, v: kernels.lssar_attention(q, k, v, p=P, backend="triton"),
        "lssa_eager": lssa_reference,
        "lssar_eager": lambda q, k, v: lssar_reference(q, k, v, p=P),
    }
    return {**base, **extra}


def causal_flops(B: int, H: int, T: int, D: int, mode: str) -> float:
    """Softmax-attention matmul FLOPs of one causal call (see the module docstring)."""
    fwd = 2.0 * B * H * T * T * D
    return {"fwd": fwd, "bwd": 2.5 * fwd, "fwd+bwd": 3.5 * fwd}[mode]


def rel_err(torch, x, ref) -> float:
    """max |x - ref| / max |ref|, in float64."""
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


def correctness(torch, kernels, device: str, cases) -> list[dict]:
    """Triton (forward and q, k, v gradients) against the reference computed in float64 (float32 for bf16).

    cases: (kind, p, (B, H, T, D), dtype name); errors are max |diff| / max |reference| per tensor.
    """
    from orbitlaw.kernels import lssa_reference, lssar_reference

    rows = []
    for kind, p, shape, dtype_name in cases:
        dtype = getattr(torch, dtype_name)
        gen = torch.Generator(device="cpu").manual_seed(0)
        q, k, v, dout = (torch.randn(*shape, generator=gen).to(device=device, dtype=dtype) for _ in range(4))
        q, k, v = (x.requires_grad_() for x in (q, k, v))
        t0 = time.perf_counter()
        if kind == "lssa":
            out = kernels.lssa_attention(q, k, v, backend="triton")
        else:
            out = kernels.lssar_attention(q, k, v, p=p, backend="triton")
        grads = torch.autograd.grad(out, (q, k, v), dout)
        seconds = time.perf_counter() - t0
        ref_dtype = torch.float64 if dtype == torch.float32 else torch.float32
        qr, kr, vr = (x.detach().to(ref_dtype).requires_grad_() for x in (q, k, v))
        ref = lssa_reference(qr, kr, vr) if kind == "lssa" else lssar_reference(qr, kr, vr, p)
        ref_grads = torch.autograd.grad(ref, (qr, kr, vr), dout.to(ref_dtype))
        errors = {"out": rel_err(torch, out, ref)}
        errors.update({f"d{n}": rel_err(torch, g, r) for n, g, r in zip("qkv", grads, ref_grads, strict=True)})
        tol = 1e-5 if dtype == torch.float32 else 5e-2
        rows.append(
            {
                "kind": kind,
                "p": p if kind == "lssar" else None,
                "shape_BHTD": list(shape),
                "dtype": dtype_name,
                "reference_dtype": str(ref_dtype).replace("torch.", ""),
                "max_rel_err": errors,
                "tolerance": tol,
                "ok": all(e <= tol for e in errors.values()),
                "seconds": round(seconds, 3),
            }
        )
        print(
            f"  correctness {kind:5s} p={p:<4} {tuple(shape)} {dtype_name}: "
            + " ".join(f"{n}={e:.1e}" for n, e in errors.items())
            + f" ({seconds:.1f}s)",
            flush=True,
        )
    return rows


# ----------------------------------------------------------------------------------------------------------
# CPU
# ----------------------------------------------------------------------------------------------------------
def cpu_timing(torch, F, kernels, seq_lens=(256, 512, 1024), B=1, H=4, D=64, reps=3) -> list[dict]:
    """Median wall-clock ms of forward and forward+backward of the eager references and SDPA on the CPU."""
    fns = methods(torch, F, kernels)
    names = ("sdpa_softmax", "laser_sdpa", "lssa_eager", "lssar_eager")
    rows = []
    for T in seq_lens:
        gen = torch.Generator().manual_seed(0)
        q, k, v, dout = (torch.randn(B, H, T, D, generator=gen) for _ in range(4))
        q, k, v = (x.requires_grad_() for x in (q, k, v))
        for name in names:
            f = fns[name]
            res = {"method": name, "B": B, "H": H, "T": T, "D": D, "dtype": "float32"}
            for mode in ("fwd", "fwd+bwd"):
                times = []
                for _ in range(reps + 1):
                    t0 = time.perf_counter()
                    if mode == "fwd":
                        with torch.no_grad():
                            f(q, k, v)
                    else:
                        torch.autograd.grad(f(q, k, v), (q, k, v), dout)
                    times.append(time.perf_counter() - t0)
                res[f"{mode}_ms"] = round(1e3 * statistics.median(times[1:]), 3)
                res[f"{mode}_gflops"] = round(causal_flops(B, H, T, D, mode) / statistics.median(times[1:]) / 1e9, 3)
            rows.append(res)
            print(
                f"  cpu {name:13s} T={T:5d}: fwd {res['fwd_ms']:8.2f} ms, fwd+bwd {res['fwd+bwd_ms']:8.2f} ms",
                flush=True,
            )
    return rows


def run_cpu(args, torch, F, kernels) -> dict:
    result = {
        "device": "cpu",
        "note": "GPU throughput and peak memory were not measured (no CUDA device); correctness runs the "
        "Triton "
        "kernels under the interpreter (TRITON_INTERPRET=1), timing covers the eager references and SDPA "
        "on the CPU only.",
    }
    if kernels.triton_available():
        print("correctness (Triton interpreter, float32, vs float64 reference):", flush=True)
        cases = [
            ("lssa", 1.0, (1, 2, 40, 32), "float32"),
            ("lssar", 3.0, (1, 2, 40, 32), "float32"),
            ("lssar", 15.0, (1, 2, 40, 32), "float32"),
            ("lssar", 15.0, (1, 1, 33, 64), "float32"),
        ]
        result["correctness"] = correctness(torch, kernels, "cpu", cases)
    else:
        result["correctness"] = "skipped: triton is not importable"
    print("CPU timing (eager references vs SDPA, float32):", flush=True)
    result["cpu_timing"] = cpu_timing(torch, F, kernels)
    return result


# ----------------------------------------------------------------------------------------------------------
# CUDA
# ----------------------------------------------------------------------------------------------------------
def eager_fits(torch, B: int, H: int, T: int) -> bool:
    """Whether the eager references' float32 T x T intermediates (about a dozen kept for backward) fit."""
    free, _ = torch.cuda.mem_get_info()
    return 12 * 4 * B * H * T * T < 0.8 * free


def backward_of(out, dout):
    """A callable running out's backward again and again (the graph is retained)."""
    return lambda: out.backward(dout, retain_graph=True)


def bench_cuda(torch, fn, q, k, v, dout, rep_ms: int) -> dict:
    """ms of forward, backward, forward+backward (do_bench medians) and fwd+bwd peak memory (bytes)."""
    from triton.testing import do_bench

    grads = [q, k, v]
    fn(q, k, v).backward(dout)  # compile / autotune outside the timings
    res = {}
    res["fwd_ms"] = do_bench(lambda: fn(q, k, v), rep=rep_ms, grad_to_none=grads, return_mode="median")
    res["bwd_ms"] = do_bench(backward_of(fn(q, k, v), dout), rep=rep_ms, grad_to_none=grads, return_mode="median")
    res["fwd+bwd_ms"] = do_bench(
        lambda: fn(q, k, v).backward(dout), rep=rep_ms, grad_to_none=grads, return_mode="median"
    )
    for x in grads:
        x.grad = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn(q, k, v).backward(dout)
    torch.cuda.synchronize()
    res["peak_mem_bytes"] = torch.cuda.max_memory_allocated() - base  # beyond the inputs and dout
    for x in grads:
        x.grad = None
    return res


def run_cuda(args, torch, F, kernels) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.backends.cuda.matmul.allow_tf32 = False
    result = {
        "device": "cuda",
        "gpu": torch.cuda.get_device_name(0),
        "p": P,
        "dtype": "bfloat16",
        "tokens_per_batch": TOKENS,
        "model_dim": MODEL_DIM,
    }
    cases = [
        (kind, p, shape, dt)
        for kind, p in (("lssa", 1.0), ("lssar", 3.0), ("lssar", 15.0))
        for shape, dt in (
            ((2, 4, 1000, 64), "float32"),
            ((1, 2, 777, 128), "float32"),
            ((1, 4, 2048, 64), "bfloat16"),
        )
    ]
    if args.no_correctness:
        result["correctness"] = "skipped (--no-correctness)"
    else:
        print("correctness (Triton on CUDA vs reference):", flush=True)
        result["correctness"] = correctness(torch, kernels, "cuda", cases)

    fns = {name: fn for name, fn in methods(torch, F, kernels, args.poly_shares).items()
           if not args.methods or name in args.methods or "_poly" in name}
    rows = []
    for D in args.head_dims:
        for T in args.seq_lens:
            B, H = max(1, TOKENS // T), max(1, MODEL_DIM // D)
            gen = torch.Generator(device="cuda").manual_seed(0)
            q, k, v, dout = (
                torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4)
            )
            q, k, v = (x.requires_grad_() for x in (q, k, v))
            for name, fn in fns.items():
                row = {"method": name, "B": B, "H": H, "T": T, "D": D}
                if name.endswith("_eager") and not eager_fits(torch, B, H, T):
                    row["skipped"] = "T x T intermediates would not fit in memory"
                    rows.append(row)
                    continue
                try:
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        row.update(bench_cuda(torch, fn, q, k, v, dout, args.rep_ms))
                except torch.cuda.OutOfMemoryError:
                    row["skipped"] = "out of memory"
                    torch.cuda.empty_cache()
                    rows.append(row)
                    continue
                for mode in ("fwd", "bwd", "fwd+bwd"):
                    row[f"{mode}_tflops"] = causal_flops(B, H, T, D, mode) / (row[f"{mode}_ms"] * 1e-3) / 1e12
                rows.append(row)
                print(
                    f"  D={D:3d} T={T:5d} {name:13s} fwd {row['fwd_tflops']:6.1f} "
                    f"bwd {row['bwd_tflops']:6.1f} fwd+bwd {row['fwd+bwd_tflops']:6.1f} TFLOP/s, "
                    f"peak {row['peak_mem_bytes'] / 2**30:6.2f} GiB",
                    flush=True,
                )
            del q, k, v, dout
            torch.cuda.empty_cache()
    result["sweep"] = rows
    result["targets"] = targets(rows)
    result["finite_p15_bf16_16k"] = finite_check(torch, kernels)
    return result


def targets(rows: list[dict]) -> list[dict]:
    """LSSAR / SDPA fwd+bwd throughput and peak-memory ratios per (D, T), against the targets."""
    by = {(r["method"], r["D"], r["T"]): r for r in rows if "skipped" not in r}
    out = []
    for (name, D, T), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        sdpa = by.get(("sdpa_softmax", D, T))
        if name != "lssar_triton" or sdpa is None:
            continue
        speed = r["fwd+bwd_tflops"] / sdpa["fwd+bwd_tflops"]
        memory = r["peak_mem_bytes"] / sdpa["peak_mem_bytes"]
        out.append(
            {
                "D": D,
                "T": T,
                "lssar_over_sdpa_fwd_bwd_throughput": speed,
                "lssar_over_sdpa_peak_memory": memory,
                "speed_target_met": (speed >= TARGET_SPEED) if T >= TARGET_FROM_T else None,
                "memory_target_met": memory <= TARGET_MEMORY,
            }
        )
    return out


def finite_check(torch, kernels, T: int = 16384) -> list[dict]:
    """LSSAR p = 15 in bf16 at T = 16k: output and gradients free of inf/NaN."""
    res = []
    for D in HEAD_DIMS:
        H = MODEL_DIM // D
        gen = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (
            torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
            for _ in range(3)
        )
        out = kernels.lssar_attention(q, k, v, p=P, backend="triton")
        out.float().square().mean().backward()
        finite = bool(torch.isfinite(out).all()) and all(bool(torch.isfinite(x.grad).all()) for x in (q, k, v))
        res.append({"T": T, "D": D, "H": H, "p": P, "dtype": "bfloat16", "finite": finite})
        print(f"  finite check p=15 bf16 T={T} D={D}: {finite}", flush=True)
    return res


# ----------------------------------------------------------------------------------------------------------
# plot and main
# ----------------------------------------------------------------------------------------------------------
def plot(result: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", flush=True)
        return
    if result["device"] == "cuda":
        dims = sorted({r["D"] for r in result["sweep"]})
        fig, axes = plt.subplots(len(dims), 2, figsize=(11, 4 * len(dims)), squeeze=False)
        for row, D in zip(axes, dims, strict=True):
            for name in dict.fromkeys(r["method"] for r in result["sweep"]):
                pts = [r for r in result["sweep"] if r["D"] == D and r["method"] == name and "skipped" not in r]
                if pts:
                    row[0].plot([r["T"] for r in pts], [r["fwd+bwd_tflops"] for r in pts], "o-", label=name)
                    row[1].plot([r["T"] for r in pts], [r["peak_mem_bytes"] / 2**30 for r in pts], "o-", label=name)
            row[0].set(title=f"forward+backward, D={D}, bf16", xlabel="T", ylabel="TFLOP/s (softmax FLOPs)")
            row[1].set(title=f"peak memory, D={D}", xlabel="T", ylabel="GiB", yscale="log")
            for ax in row:
                ax.set_xscale("log", base=2)
                ax.legend(fontsize=8)
    else:
        rows = result["cpu_timing"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
        for ax, mode in zip(axes[0], ("fwd", "fwd+bwd"), strict=True):
            for name in dict.fromkeys(r["method"] for r in rows):
                pts = [r for r in rows if r["method"] == name]
                ax.plot([r["T"] for r in pts], [r[f"{mode}_ms"] for r in pts], "o-", label=name)
            ax.set(
                title=f"CPU {mode}, float32 (no GPU measured)",
                xlabel="T",
                ylabel="ms",
                xscale="log",
                yscale="log",
            )
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}", flush=True)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported (the kernels import it lazily)
    import torch

    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
        if args.device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import torch.nn.functional as F

    from orbitlaw import kernels

    started = time.perf_counter()
    run = run_cuda if args.device == "cuda" else run_cpu
    result = {
        "benchmark": "attention",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    try:
        import triton

        result["triton"] = triton.__version__
    except ImportError:
        result["triton"] = None
    result.update(run(args, torch, F, kernels))
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = args.out or os.path.join(ROOT, "benchmarks", "results", f"attention_{args.device}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"results written to {out} ({result['seconds']} s)", flush=True)
    if args.plot:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main()
