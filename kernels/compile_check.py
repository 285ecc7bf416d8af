"""Compile the Triton kernels of this package for a CUDA GPU architecture, without a GPU.

The CPU tests run the kernels under the Triton interpreter, which accepts some programs the GPU compiler
rejects and never takes GPU-only branches (float16 tiles, autotuned tile shapes). This compiles the
kernels through Triton's own pipeline down to a cubin (with the ptxas Triton ships) for sm_90
(H100 / H200) by default, so such errors show up on a machine without a GPU. TRITON_INTERPRET must be
unset (the kernels are then compiled, not interpreted).

    python -m orbitlaw.kernels.compile_check [--arch 90] [--all]

The default set covers every kernel and branch once, the poly shares (``lssa/fma.py``) included (about a
minute on one CPU core); --all compiles every autotuning config (tiles x tuned poly shares) for bf16 and
fp16, head dims 64 and 128 (about half an hour).
"""

from __future__ import annotations

import argparse
import time

from orbitlaw.kernels.backend import interpreter_enabled, triton_available

POINTER_ARGS = ("Q", "K", "V", "Out", "U", "DO", "DK", "DV", "DQ", "X")
FLOAT32_POINTER_ARGS = ("RQ", "RK", "Stats")
FLOAT_ARGS = ("log_d", "p")
# kernels compiled a second time with float64 scalars, as torch.compile (Inductor) launches them
FLOAT64_CHECKED = ("lssa_forward", "lssar_forward", "coefficients", "dkdv", "dq")
POLY_KERNELS = ("lssa_forward", "lssar_forward", "dkdv", "dq")  # those taking POLY, the poly share in quarters


def _kernels():
    from orbitlaw.kernels.lssa import backward, forward, launch

    return {
        "lssa_forward": forward._fwd_kernel,  # with REWEIGHT False
        "lssar_forward": forward._fwd_kernel,  # with REWEIGHT True
        "coefficients": backward._bwd_preprocess,
        "dkdv": backward._bwd_dkdv_kernel,
        "dq": backward._bwd_dq_kernel,
        "inverse_norms": launch._inverse_norms_kernel,
    }


def _case(name: str, dtype: str, blocks, **constexprs) -> tuple[str, str, dict, int, int]:
    """One case: the kernel's constexprs with PRECISION None and POLY 0 (unless given) and the tiles of blocks."""
    tiles = {"BLOCK_M": blocks.block_m, "BLOCK_N": blocks.block_n}
    poly = {"POLY": 0} if name in POLY_KERNELS else {}
    return name, dtype, {"PRECISION": None, **poly, **constexprs, **tiles}, blocks.num_warps, blocks.num_stages


def cases(full: bool = False) -> list[tuple[str, str, dict, int, int]]:
    """(kernel name, element dtype, constexprs, num_warps, num_stages) to compile."""
    from orbitlaw.kernels.lssa.launch import (
        DKDV_CANDIDATES,
        DQ_CANDIDATES,
        FORWARD_CANDIDATES,
        TUNED_POLY_QUARTERS,
        Blocks,
    )

    lssa = {"P_INT": 1, "REWEIGHT": False, "NEED_GRAD": False}
    lssar = {"P_INT": 15, "REWEIGHT": True, "NEED_GRAD": True}
    if not full:
        f, kv, q = FORWARD_CANDIDATES[0], DKDV_CANDIDATES[0], DQ_CANDIDATES[0]
        return [
            _case("lssa_forward", "bf16", f, HEAD_DIM=64, **lssa),
            _case("lssar_forward", "bf16", f, HEAD_DIM=64, **lssar),
            _case("lssar_forward", "fp32", Blocks(32, 32, 4, 2), HEAD_DIM=32, P_INT=0, REWEIGHT=True, NEED_GRAD=False,
                  PRECISION="ieee"),
            ("coefficients", "bf16", {"HEAD_DIM": 64, "BLOCK_M": 64, "REWEIGHT": True}, 4, 1),
            _case("dkdv", "bf16", kv, HEAD_DIM=64, P_INT=15, REWEIGHT=True),
            _case("dq", "fp16", q, HEAD_DIM=128, P_INT=3, REWEIGHT=True),
            _case("dq", "bf16", q, HEAD_DIM=64, P_INT=1, REWEIGHT=False),
            ("inverse_norms", "bf16", {"HEAD_DIM": 128, "BLOCK_M": 64}, 4, 1),
            # the poly share (quarters of each tile's special functions on the FMA pipes): split and whole
            _case("lssar_forward", "bf16", f, HEAD_DIM=64, **{**lssar, "POLY": 2}),
            _case("dkdv", "bf16", kv, HEAD_DIM=64, P_INT=15, REWEIGHT=True, POLY=4),
            _case("dq", "fp32", Blocks(32, 32, 4, 2), HEAD_DIM=32, P_INT=0, REWEIGHT=True, PRECISION="ieee", POLY=1),
        ]
    out = []  # every autotuning config: tiles x tuned poly shares
    for dtype in ("bf16", "fp16"):
        for D in (64, 128):
            for poly in TUNED_POLY_QUARTERS:
                for b in FORWARD_CANDIDATES:
                    out += [_case("lssa_forward", dtype, b, HEAD_DIM=D, **lssa, POLY=poly),
                            _case("lssar_forward", dtype, b, HEAD_DIM=D, **lssar, POLY=poly)]
                for name, candidates in (("dkdv", DKDV_CANDIDATES), ("dq", DQ_CANDIDATES)):
                    for b in candidates:
                        for reweight, p_int in ((False, 1), (True, 15)):
                            out.append(_case(name, dtype, b, HEAD_DIM=D, P_INT=p_int, REWEIGHT=reweight, POLY=poly))
    return out


def compile_kernel(fn, dtype: str, constexprs: dict, num_warps: int, num_stages: int, arch: int = 90,
                   float_type: str = "fp32", aligned: bool = False):
    """Compile one JIT kernel for CUDA sm_<arch>; pointer arguments of element type dtype, the scalar float
    arguments (log_d, p) of float_type ("fp64" is how torch.compile's Inductor passes Python floats).
    ``aligned``: the pointers, strides and T marked divisible by 16, as Triton specialises a launch on
    contiguous tensors with T a multiple of 16 (vector loads); else nothing is assumed (the worst case)."""
    import triton
    from triton.backends.compiler import GPUTarget

    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in POINTER_ARGS:
            signature[name] = f"*{dtype}"
        elif name in FLOAT32_POINTER_ARGS:
            signature[name] = "*fp32"
        elif name in FLOAT_ARGS:
            signature[name] = float_type
        else:
            signature[name] = "i32"
    attrs = {}
    if aligned:
        for i, name in enumerate(fn.arg_names):
            integer = signature[name] == "i32" and (name.startswith("stride") or name == "T")
            if signature[name].startswith("*") or integer:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=dict(constexprs), attrs=attrs)
    return triton.compile(
        src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages}
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Compile the Triton kernels for a CUDA architecture (no GPU needed).")
    ap.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100 / H200)")
    ap.add_argument("--all", action="store_true", help="every autotuning candidate, bf16 and fp16, D 64 and 128")
    args = ap.parse_args(argv)
    if not triton_available():
        raise SystemExit("triton is not importable")
    if interpreter_enabled():
        raise SystemExit("unset TRITON_INTERPRET: the interpreter replaces the compiler")
    fns = _kernels()
    todo = [(*case, "fp32") for case in cases(args.all)]
    todo += [(*case, "fp64") for case in cases() if case[0] in FLOAT64_CHECKED]
    for name, dtype, constexprs, warps, stages, float_type in todo:
        t0 = time.perf_counter()
        compiled = compile_kernel(fns[name], dtype, constexprs, warps, stages, args.arch, float_type)
        tiles = {k: v for k, v in constexprs.items() if k != "PRECISION"}
        print(
            f"sm_{args.arch} {name} {dtype} {tiles} warps={warps} stages={stages} floats={float_type}: "
            f"ok, shared memory {compiled.metadata.shared} B ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
