"""Launch settings of the fused LSSA / LSSAR kernels: tile sizes, autotuning candidates, the launcher,
tl.dot precision, tensor strides, and the small kernel computing the inverse row norms rq, rk.

Every kernel runs on a grid (row blocks, B * H): program (i, bh) owns block i of the (T, D) slab of
batch b = bh // H and head h = bh % H. Tensors are (B, H, T, D) with a contiguous last dim; the kernels
take the (batch, head, sequence) strides of each tensor, so transposed views need no copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from orbitlaw.kernels.backend import interpreter_enabled
from orbitlaw.kernels.lssa.tiles import NORM_EPS_C, batch_head, load_rows


@dataclass(frozen=True)
class Blocks:
    """Tile sizes of one kernel: block_m query rows x block_n keys (each >= 16, powers of two)."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2


@dataclass(frozen=True)
class KernelBlocks:
    """Tile sizes for every kernel of one attention call; None fields are chosen automatically."""

    forward: Blocks | None = None
    dkdv: Blocks | None = None
    dq: Blocks | None = None


INTERPRETER_BLOCKS = Blocks(16, 16, num_warps=4, num_stages=1)

# Candidates tried by triton.autotune on CUDA (the first call for each (T, D, p, dtypes) pays the tuning).
# Chosen from sm_90 compiles (bf16, D 64 and 128, p = 15) for few or no register spills; not yet timed
# on a GPU.
FORWARD_CANDIDATES = (Blocks(128, 64, 8, 3), Blocks(128, 32, 8, 3), Blocks(64, 64, 4, 3), Blocks(64, 32, 4, 3))
DKDV_CANDIDATES = (Blocks(16, 128, 8, 2), Blocks(16, 64, 4, 3), Blocks(32, 128, 8, 2), Blocks(32, 64, 8, 2),
                   Blocks(32, 64, 4, 3))
DQ_CANDIDATES = (Blocks(128, 32, 8, 2), Blocks(64, 32, 8, 2), Blocks(64, 32, 4, 3), Blocks(128, 64, 8, 2))


TUNED_POLY_QUARTERS = (0, 2, 4)
"""The poly shares ``poly_share="auto"`` tunes over with the tile sizes, in quarters: none, half, all."""


def autotune_configs(candidates: tuple[Blocks, ...], quarters: tuple[int, ...] | None = None) -> list:
    """triton.Config per candidate tile (BLOCK_M, BLOCK_N), and per poly share (POLY, quarters) when given."""
    shares = [{}] if quarters is None else [{"POLY": q} for q in quarters]
    return [
        triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, **share}, num_warps=c.num_warps,
                      num_stages=c.num_stages)
        for c in candidates for share in shares
    ]


def autotuned(kernel, candidates: tuple[Blocks, ...], quarters: tuple[int, ...] | None = None):
    """kernel wrapped in triton.autotune over candidates (BLOCK_M, BLOCK_N) and, with ``quarters``, the poly
    share too, keyed on T, HEAD_DIM, P_INT, REWEIGHT (LSSA and LSSAR tune apart) and, where the share is the
    caller's (``quarters`` None), POLY: each share gets its own tiles."""
    key = ["T", "HEAD_DIM", "P_INT", "REWEIGHT"] + (["POLY"] if quarters is None else [])
    return triton.autotune(configs=autotune_configs(candidates, quarters), key=key)(kernel)


def launch(kernel, tuned, blocks: Blocks | None, T: int, BH: int, args: tuple, key_major: bool = False,
           poly: int | None = 0, **constexprs):
    """Launch kernel over (cdiv(T, BLOCK), B * H) programs with explicit blocks, the interpreter's defaults,
    or (on CUDA, blocks None) the autotuned variant. BLOCK is BLOCK_M, or BLOCK_N for key-major kernels.
    ``tuned``: (kernel tuned over tiles, kernel tuned over tiles and poly shares); ``poly``: the poly share
    in quarters, or None to tune it (on CUDA; the interpreter and explicit blocks take none, 0)."""
    tile = "BLOCK_N" if key_major else "BLOCK_M"
    if blocks is None and not interpreter_enabled():
        if poly is None:
            tuned[1][lambda meta: (triton.cdiv(T, meta[tile]), BH)](*args, **constexprs)
        else:
            tuned[0][lambda meta: (triton.cdiv(T, meta[tile]), BH)](*args, POLY=poly, **constexprs)
        return
    constexprs["POLY"] = poly or 0
    b = blocks or INTERPRETER_BLOCKS
    size = b.block_n if key_major else b.block_m
    kernel[(triton.cdiv(T, size), BH)](*args, BLOCK_M=b.block_m, BLOCK_N=b.block_n, num_warps=b.num_warps,
                                       num_stages=b.num_stages, **constexprs)


def dot_precision(dtype: torch.dtype):
    """tl.dot input precision: 'ieee' for float32 unless torch allows TF32 matmuls, else None (default)."""
    if dtype != torch.float32:
        return None
    if not interpreter_enabled() and torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return "ieee"


def rows_last_contiguous(x: torch.Tensor) -> torch.Tensor:
    """x itself when its last dim has stride 1 (the kernels take the other strides as arguments)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def head_strides(x: torch.Tensor) -> tuple[int, int, int]:
    """(batch, head, sequence) strides of a (B, H, T, D) tensor whose last stride is 1."""
    return x.stride(0), x.stride(1), x.stride(2)


@triton.jit
def _inverse_norms_kernel(X, Out, stride_xb, stride_xh, stride_xt, H, T, HEAD_DIM: tl.constexpr,
                          BLOCK_M: tl.constexpr):
    """Out[bh, t] = 1 / max(|X[b, h, t, :]|, NORM_EPS), accumulated in float32. X: (B, H, T, HEAD_DIM)."""
    pid_m = tl.program_id(0)
    pid_bh, b, h = batch_head(H)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    x = load_rows(X + b * stride_xb + h * stride_xh, offs_m, stride_xt, tl.arange(0, HEAD_DIM), T).to(tl.float32)
    norm = tl.sqrt_rn(tl.sum(x * x, 1))  # (BLOCK_M,)
    tl.store(Out + pid_bh * T + offs_m, tl.math.div_rn(1.0, tl.maximum(norm, NORM_EPS_C)), mask=offs_m < T)


def inverse_norms(x: torch.Tensor) -> torch.Tensor:
    """1 / max(|x|, NORM_EPS) over the last dim of a (B, H, T, D) tensor: float32, contiguous (B, H, T).

    A small kernel, so that no float32 copy of x is made (it would raise the peak memory).
    """
    B, H, T, D = x.shape
    out = torch.empty((B, H, T), dtype=torch.float32, device=x.device)
    block = 16 if interpreter_enabled() else 64
    _inverse_norms_kernel[(triton.cdiv(T, block), B * H)](
        x, out, *head_strides(x), H, T, HEAD_DIM=D, BLOCK_M=block, num_warps=4
    )
    return out
