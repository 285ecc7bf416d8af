"""Instruction counts per score of the LSSA / LSSAR kernels, read from compiled code without a GPU, and the
throughput they predict against SDPA by a stated roofline.

Each kernel (the forward, the backward's dk/dv and dq kernels) is compiled by Triton for sm_90 (H100 / H200)
and sm_80 (A100) at each poly share (quarters of each score tile's exp, reciprocal and real power on the
FMA pipes; ``orbitlaw.kernels.lssa.fma``), and the SASS (``cuobjdump -sass``, shipped with Triton; the PTX
where it is missing) is read: the inner loops are found by their backward branches, the loop over the key
blocks wholly off the diagonal (the one that runs for nearly every score at long T) is taken per pass, and
its instructions are sorted by the pipe they issue to and divided by the scores one iteration computes per
thread (BLOCK_M x BLOCK_N / threads). Tensor-core work is read from the MMA instructions' shapes.

Share 0 is also compiled from the kernels as they were before the poly share existed (``--baseline REV``,
a git revision; its ``kernels/`` is extracted to a temporary package), and its machine code compared with
today's: the SASS instructions with their operands (addresses and encodings left out), or the PTX without its
debug lines (source line numbers) where there is no SASS. Identical code is identical arithmetic, bit for bit.

Prediction (``MODEL`` in the JSON): time per score of a kernel = max over pipes of (instructions per score /
the pipe's results per clock per SM); a training step (forward + backward) sums its kernels; the predicted
ratio to SDPA is SDPA's time by the same rule over its stated counts (FlashAttention-2's algorithm; SDPA is
not Triton and is not compiled here) divided by ours. It assumes each kernel reaches its bound alike, so it is
an upper bound on the ratio; the H200 ratio measured at share 0 (benchmarks/results/attention_h200.log) is
quoted beside it to show how far the bound is from what ran.

    python benchmarks/kernel_cost.py [--out benchmarks/results/kernel_cost.json] [--baseline 9fef92a]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# results per clock per SM, per pipe; sources in the JSON's "model"
PIPES = {
    90: {"mufu": 16, "fma": 128, "alu": 64, "xu": 16, "tensor_bf16_mac": 2048},
    80: {"mufu": 16, "fma": 64, "alu": 64, "xu": 16, "tensor_bf16_mac": 1024},
}
PIPE_SOURCES = (
    "NVIDIA H100 whitepaper (Hopper SM: 128 FP32, 64 INT32, 16 SFU lanes per SM; 989 dense bf16 TFLOPS at "
    "132 SMs and 1.83 GHz = 2048 MAC/clk/SM); A100 whitepaper (64 FP32, 64 INT32, 16 SFU per SM; 312 TFLOPS at "
    "108 SMs and 1.41 GHz = 1024 MAC/clk/SM); CUDA C Programming Guide, arithmetic instruction throughput "
    "(type conversions at 16/clk/SM on 8.x and 9.0)"
)

# SASS opcode (before the first dot) -> pipe
SASS_PIPE = {
    "MUFU": "mufu",
    "FFMA": "fma", "FMUL": "fma", "FADD": "fma", "FFMA2": "fma", "FMUL2": "fma", "FADD2": "fma", "IMAD": "fma",
    "HFMA2": "fma", "HMUL2": "fma", "HADD2": "fma",
    "F2I": "xu", "I2F": "xu", "F2F": "xu", "FRND": "xu", "I2FP": "alu", "F2FP": "alu",
    "HGMMA": "tensor", "HMMA": "tensor", "WARPGROUP": "sync", "BAR": "sync", "WARPSYNC": "sync",
    "LDS": "shared", "STS": "shared", "LDSM": "shared", "LDG": "global", "STG": "global", "LDGSTS": "global",
    "LDC": "other", "S2R": "other", "S2UR": "other", "NOP": "other", "BRA": "other", "DEPBAR": "sync",
}
ALU_OPS = {"FMNMX", "FSEL", "FSETP", "ISETP", "IADD3", "LOP3", "SHF", "SEL", "MOV", "PRMT", "LEA", "IABS",
           "FSWZADD", "SHFL", "PLOP3", "VIMNMX", "IMNMX", "P2R", "R2P", "CS2R", "FCHK"}
PTX_MUFU = ("ex2.approx", "lg2.approx", "rcp.approx", "rsqrt.approx", "sin.approx", "cos.approx", "tanh.approx")

# SDPA's per-score counts by FlashAttention-2's algorithm (stated, not compiled): forward: S = QK^T and
# PV (2 D MACs), one exp, the scale-and-subtract (1 FMA), the row sum (1 add), the running max (1 ALU);
# backward: S, dP = dO V^T, dV, dQ, dK (5 D MACs), one exp, dS = P (dP - Delta) and the scale (3 FMA).
SDPA_COUNTS = {"forward": {"tensor_mac_per_D": 2, "mufu": 1, "fma": 2, "alu": 1},
               "backward": {"tensor_mac_per_D": 5, "mufu": 1, "fma": 3, "alu": 0}}

MEASURED_H200 = {"lssa_over_sdpa": [0.56, 0.60], "lssar_p15_over_sdpa": [0.30, 0.32],
                 "source": "benchmarks/results/attention_h200.log (bf16, D = 64, fwd+bwd, share 0)"}

# which inner loops (in code order) are the off-diagonal ones, per kernel variant
OFF_DIAGONAL_LOOPS = {"lssa_forward": [0], "lssar_forward": [0, 2], "dkdv": [1], "dq": [0]}


def _compile(name: str, dtype: str, constexprs: dict, warps: int, stages: int, arch: int):
    from orbitlaw.kernels.compile_check import _kernels, compile_kernel

    return compile_kernel(_kernels()[name], dtype, constexprs, warps, stages, arch, aligned=True)


def _tool(name: str) -> str | None:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(path) if path.exists() else shutil.which(name)


def sass_of(cubin: bytes) -> str | None:
    """The SASS of a cubin by cuobjdump, or None where cuobjdump is missing or fails."""
    tool = _tool("cuobjdump")
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        res = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    return res.stdout if res.returncode == 0 else None


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Za-z0-9_.]+)?\s*([^;]*);")


def sass_loops(sass: str) -> list[list[tuple[str, str, str]]]:
    """Innermost loops of a SASS listing, in code order: each a list of (opcode, modifiers, operands) from the
    branch target to the backward branch (a BRA to a lower address)."""
    rows = [(int(m.group(1), 16), m.group(3), m.group(4) or "", m.group(5)) for m in _SASS_LINE.finditer(sass)]
    loops = []
    for i, (addr, op, _, args) in enumerate(rows):
        if op == "BRA":
            target = int(args.split()[0].rstrip(";"), 16)
            if target < addr and addr - target > 16:
                body = [(o, mod, a) for (ad, o, mod, a) in rows[:i + 1] if ad >= target]
                loops.append(body)
    return loops


def sass_pipes(body) -> dict:
    """Instruction counts of a loop body by pipe, MUFU by function, and tensor MACs per issue."""
    out: dict = {}
    for op, mod, _args in body:
        pipe = SASS_PIPE.get(op) or ("alu" if op in ALU_OPS else "other")
        out[pipe] = out.get(pipe, 0) + 1
        if op == "MUFU":
            fn = mod.strip(".").split(".")[0]
            out[f"mufu.{fn}"] = out.get(f"mufu.{fn}", 0) + 1
        if op == "HGMMA":  # e.g. HGMMA.64x64x16.F32.BF16
            m, n, k = (int(x) for x in re.match(r"\.(\d+)x(\d+)x(\d+)", mod).groups())
            out["tensor_mac"] = out.get("tensor_mac", 0) + m * n * k
        if op == "HMMA":  # e.g. HMMA.16816.F32.BF16: per warp
            shape = re.match(r"\.(\d+)", mod).group(1)
            m, n, k = (16, 8, 16) if shape == "16816" else (16, 8, 8)
            out["tensor_mac"] = out.get("tensor_mac", 0) + m * n * k
    return out


def ptx_loops(ptx: str) -> list[list[str]]:
    """Innermost loops of PTX by LLVM's "Inner Loop Header" labels: each the instruction lines of one loop."""
    lines = ptx.splitlines()
    loops, start = [], None
    for i, line in enumerate(lines):
        if "Inner Loop Header" in line:
            start, label = i, line.split(":")[0].strip()
        elif start is not None and re.search(rf"bra(\.uni)?\s+{re.escape(label)};", line):
            loops.append([x.strip() for x in lines[start + 1:i + 1] if x.strip() and not x.strip().startswith("//")])
            start = None
    return loops


def code_digest(ptx: str, sass: str | None) -> str:
    """sha256 of the machine code with what does not change arithmetic left out: the SASS instruction text
    (predicate, opcode, operands) in order, or PTX without .loc / .file lines, labels and debug sections."""
    if sass:
        text = "\n".join(f"{m.group(2) or ''}{m.group(3)}{m.group(4) or ''} {m.group(5)}"
                         for m in _SASS_LINE.finditer(sass))
    else:
        body = ptx.split(".section\t.debug")[0]
        text = "\n".join(line for line in body.splitlines()
                         if not re.match(r"\s*(\.loc|\.file|\$L__tmp\d+:)", line))
    return hashlib.sha256(text.encode()).hexdigest()


def ptx_pipes(body) -> dict:
    out: dict = {}
    for line in body:
        op = line.lstrip("@!%p0123456789 ").split()[0] if line else ""
        if any(op.startswith(m) for m in PTX_MUFU):
            pipe = "mufu"
        elif op.startswith(("fma.", "mul.f32", "add.f32", "sub.f32", "mul.rn.f32", "mad.")):
            pipe = "fma"
        elif op.startswith(("cvt.rn.f32.s32", "cvt.rzi", "cvt.rmi", "cvt.rni", "cvt.f32.s32")):
            pipe = "xu"
        elif op.startswith("wgmma.mma_async"):
            pipe = "tensor"
            m, n, k = (int(x) for x in re.search(r"m(\d+)n(\d+)k(\d+)", op).groups())
            out["tensor_mac"] = out.get("tensor_mac", 0) + m * n * k
        elif op.startswith(("ld.shared", "st.shared")):
            pipe = "shared"
        else:
            pipe = "alu"
        out[pipe] = out.get(pipe, 0) + 1
    return out


def kernel_cases(poly: int) -> list[tuple]:
    """(variant, kernel, dtype, constexprs, warps, stages, scores per thread per iteration, MMA issuers per
    CTA): bf16, D = 64, the first autotuning candidate, LSSA and LSSAR p = 15, at poly share ``poly``."""
    from orbitlaw.kernels.lssa.launch import DKDV_CANDIDATES, DQ_CANDIDATES, FORWARD_CANDIDATES

    out = []
    for variant, reweight, p_int, need in (("lssa", False, 1, False), ("lssar", True, 15, True)):
        f, kv, q = FORWARD_CANDIDATES[0], DKDV_CANDIDATES[0], DQ_CANDIDATES[0]
        fwd = {"HEAD_DIM": 64, "P_INT": p_int, "REWEIGHT": reweight, "PRECISION": None}
        cases = [(f"{variant}_forward", "lssa_forward" if not reweight else "lssar_forward", f,
                  {**fwd, "NEED_GRAD": need}),
                 (f"{variant}_dkdv", "dkdv", kv, fwd), (f"{variant}_dq", "dq", q, fwd)]
        for name, kernel, b, cx in cases:
            cx = {**cx, "BLOCK_M": b.block_m, "BLOCK_N": b.block_n}
            if poly is not None:
                cx["POLY"] = poly
            out.append((name, kernel, cx, b.num_warps, b.num_stages, b.block_m * b.block_n / (32 * b.num_warps)))
    return out


def count(arch: int, poly: int | None) -> dict:
    """Per kernel variant: instructions per score in its off-diagonal loops, by pipe, and a PTX digest."""
    out = {}
    for name, kernel, cx, warps, stages, per_thread in kernel_cases(poly):
        compiled = _compile(kernel, "bf16", cx, warps, stages, arch)
        ptx = compiled.asm["ptx"]
        sass = sass_of(compiled.asm["cubin"])
        loops = sass_loops(sass) if sass else ptx_loops(ptx)
        pick = OFF_DIAGONAL_LOOPS[kernel]
        if len(loops) < max(pick) + 1:
            raise RuntimeError(f"{name} sm_{arch}: found {len(loops)} inner loops, expected at least {max(pick) + 1}")
        totals: dict = {}
        for i in pick:
            for pipe, n in (sass_pipes(loops[i]) if sass else ptx_pipes(loops[i])).items():
                totals[pipe] = totals.get(pipe, 0) + n
        per_score = {k: v / per_thread for k, v in totals.items() if k != "tensor_mac"}
        # MMA MACs: per issuing unit (a warpgroup for HGMMA / wgmma, a warp for HMMA), over a tile's scores
        issuers = warps / 4 if arch >= 90 else warps
        per_score["tensor_mac"] = totals.get("tensor_mac", 0) * issuers / (cx["BLOCK_M"] * cx["BLOCK_N"])
        out[name] = {"source": "sass" if sass else "ptx", "loops_found": len(loops), "loops_counted": pick,
                     "per_score": {k: round(v, 3) for k, v in sorted(per_score.items())},
                     "code_sha256": code_digest(ptx, sass),
                     "shared_memory_bytes": compiled.metadata.shared}
    return out


def clocks(per_score: dict, arch: int) -> dict:
    """Clocks per score per pipe, and the bound (the largest), by the roofline of PIPES."""
    rate = PIPES[arch]
    t = {pipe: per_score.get(pipe, 0.0) / rate[pipe] for pipe in ("mufu", "fma", "alu", "xu")}
    t["tensor"] = per_score.get("tensor_mac", 0.0) / rate["tensor_bf16_mac"]
    t["bound"] = max(t.values())
    t["limited_by"] = max((k for k in t if k != "bound"), key=lambda k: t[k])
    return t


def sdpa_clocks(arch: int, D: int = 64) -> float:
    rate = PIPES[arch]
    total = 0.0
    for c in SDPA_COUNTS.values():
        total += max(c["tensor_mac_per_D"] * D / rate["tensor_bf16_mac"], c["mufu"] / rate["mufu"],
                     c["fma"] / rate["fma"], c["alu"] / rate["alu"])
    return total


def predict(counts: dict, arch: int) -> dict:
    """Per attention: clocks per score of a training step (forward + dk/dv + dq) and the ratio to SDPA."""
    out = {}
    for variant in ("lssa", "lssar"):
        parts = {k: clocks(counts[f"{variant}_{k}"]["per_score"], arch) for k in ("forward", "dkdv", "dq")}
        step = sum(p["bound"] for p in parts.values())
        out[variant] = {"clocks_per_score": round(step, 5), "over_sdpa": round(sdpa_clocks(arch) / step, 3),
                        "limited_by": {k: p["limited_by"] for k, p in parts.items()}}
    return out


def baseline_counts(rev: str, arch: int) -> dict:
    """``count(arch, None)`` on the kernels at git revision ``rev`` (no POLY parameter), in a subprocess
    whose ``orbitlaw`` package holds only that revision's ``kernels/``."""
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "orbitlaw"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "kernels"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive.stdout, check=True)
        # today's compiler driver (it only builds signatures and calls triton.compile) on that revision's kernels
        shutil.copy(ROOT / "kernels" / "compile_check.py", pkg / "kernels" / "compile_check.py")
        env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "PYTHONPATH": tmp}
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import kernel_cost as kc; "
                f"print(json.dumps(kc.count({arch}, None)))")
        res = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, capture_output=True, text=True,
                             cwd=tmp, timeout=1200)
        if res.returncode:
            raise RuntimeError(f"baseline {rev}: {res.stderr.strip().splitlines()[-1]}")
        return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results/kernel_cost.json")
    ap.add_argument("--archs", default="90,80")
    ap.add_argument("--shares", default="0,1,2,3,4", help="poly shares, in quarters")
    ap.add_argument("--baseline", default=None, help="a git revision of the kernels before the poly share")
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # multiply-adds fused, as Triton 3.9 and earlier did
    from orbitlaw.provenance import code_version, write_json_atomic

    archs = [int(a) for a in args.archs.split(",")]
    shares = [int(s) for s in args.shares.split(",")]
    result = {"benchmark": "kernel_cost", "code_version": code_version(), "command": " ".join(sys.argv),
              "machine": {"platform": platform.platform(), "python": platform.python_version()},
              "model": {"pipes_per_clock_per_sm": PIPES, "pipe_sources": PIPE_SOURCES, "sdpa_counts": SDPA_COUNTS,
                        "rule": __doc__.split("Prediction (")[1].split("\n\n")[0],
                        "measured_h200_share0": MEASURED_H200, "head_dim": 64, "dtype": "bf16", "p": 15},
              "archs": {}}
    import triton

    result["triton"] = triton.__version__
    for arch in archs:
        entry = {"shares": {}}
        for q in shares:
            counts = count(arch, q)
            entry["shares"][str(q / 4)] = {"counts": counts, "prediction": predict(counts, arch)}
            pred = entry["shares"][str(q / 4)]["prediction"]
            print(f"sm_{arch} share {q / 4:.2f}: " + "; ".join(
                f"{v}: {pred[v]['clocks_per_score']:.4f} clk/score, {pred[v]['over_sdpa']:.2f}x SDPA "
                f"({', '.join(f'{k} {b}' for k, b in pred[v]['limited_by'].items())})" for v in pred), flush=True)
            for name, c in counts.items():
                print(f"    {name}: {c['per_score']}", flush=True)
        best = max(entry["shares"], key=lambda s: entry["shares"][s]["prediction"]["lssar"]["over_sdpa"])
        entry["best_share_lssar"] = float(best)
        if args.baseline:
            base = baseline_counts(args.baseline, arch)
            zero = entry["shares"]["0.0"]["counts"] if "0.0" in entry["shares"] else count(arch, 0)
            entry["baseline"] = {"revision": args.baseline,
                                 "code_identical_at_share_0": {k: base[k]["code_sha256"] == zero[k]["code_sha256"]
                                                               for k in base},
                                 "counts": base, "prediction": predict(base, arch)}
            print(f"sm_{arch} baseline {args.baseline}: code identical at share 0: "
                  f"{entry['baseline']['code_identical_at_share_0']}", flush=True)
        result["archs"][str(arch)] = entry
    write_json_atomic(Path(args.out), result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
