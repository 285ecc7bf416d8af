"""Fused causal LSSA and LSSAR in Triton, forward and backward in O(T) memory: the launchers, the autograd
Function, and the entry points :func:`lssa_triton` and :func:`lssar_triton`.

LSSA is LSSAR without the re-weighting, so both run the same kernels with REWEIGHT False / True: the
forward of ``forward.py``, the backward of ``backward.py`` (device helpers in ``tiles.py``, tile sizes and
the launcher in ``launch.py``). Their plain PyTorch references are in ``naive.py``; tests/test_kernels.py
compares the two (forward and q, k, v gradients). Inputs are assumed validated (see
``orbitlaw.kernels.attention``, which decides when these run).
"""

from __future__ import annotations

import math

import torch
import triton

from orbitlaw.kernels.backend import integer_power, interpreter_enabled
from orbitlaw.kernels.checks import poly_quarters
from orbitlaw.kernels.lssa.backward import _bwd_dkdv_kernel, _bwd_dq_kernel, _bwd_preprocess
from orbitlaw.kernels.lssa.forward import _fwd_kernel
from orbitlaw.kernels.lssa.launch import (
    DKDV_CANDIDATES,
    DQ_CANDIDATES,
    FORWARD_CANDIDATES,
    TUNED_POLY_QUARTERS,
    KernelBlocks,
    autotuned,
    dot_precision,
    head_strides,
    inverse_norms,
    launch,
    rows_last_contiguous,
)
from orbitlaw.kernels.lssa.tiles import N_STATS

# per kernel: (tuned over the tiles at a given poly share, tuned over the tiles and the shares)
_fwd_tuned = (autotuned(_fwd_kernel, FORWARD_CANDIDATES),
              autotuned(_fwd_kernel, FORWARD_CANDIDATES, TUNED_POLY_QUARTERS))
_bwd_dkdv_tuned = (autotuned(_bwd_dkdv_kernel, DKDV_CANDIDATES),
                   autotuned(_bwd_dkdv_kernel, DKDV_CANDIDATES, TUNED_POLY_QUARTERS))
_bwd_dq_tuned = (autotuned(_bwd_dq_kernel, DQ_CANDIDATES),
                 autotuned(_bwd_dq_kernel, DQ_CANDIDATES, TUNED_POLY_QUARTERS))

PREPROCESS_BLOCK = 64  # rows per program of the backward's coefficient pre-pass (16 under the interpreter)


def _p_int(p: float, reweight: bool) -> int:
    """The compile-time power: the whole number p in 1..64, 0 for a real p, 1 for LSSA (unused there)."""
    return integer_power(p) if reweight else 1


def fused_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float, reweight: bool, need_grad: bool,
                  blocks: KernelBlocks | None = None, poly: int | None = 0):
    """Run the forward kernel on (B, H, T, D) q, k, v with a contiguous last dim; ``poly`` the share of the
    special functions on the FMA pipes, in quarters (None: tuned with the tiles on CUDA).

    Returns (out (B, H, T, D), U (B, H, T, D) or None (LSSAR with need_grad only), rq, rk (B, H, T) float32,
    stats (N_STATS, B, H, T) float32 row statistics).
    """
    B, H, T, D = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    u = torch.empty(q.shape, dtype=q.dtype, device=q.device) if need_grad else None
    rq, rk = inverse_norms(q), inverse_norms(k)
    stats = torch.zeros((N_STATS, B, H, T), dtype=torch.float32, device=q.device)
    u_or_out = u if u is not None else out  # an unused stand-in when U is not written
    args = (q, k, v, out, u_or_out, rq, rk, stats, *head_strides(q), *head_strides(k), *head_strides(v),
            *head_strides(out), *head_strides(u_or_out), stats.stride(0), H, T, math.log(D), float(p))
    launch(_fwd_kernel, _fwd_tuned, (blocks or KernelBlocks()).forward, T, B * H, args, poly=poly, HEAD_DIM=D,
           P_INT=_p_int(p, reweight), REWEIGHT=reweight, NEED_GRAD=need_grad, PRECISION=dot_precision(q.dtype))
    return out, u, rq, rk, stats


def fused_backward(do: torch.Tensor, q, k, v, out, u, rq, rk, stats, p: float, reweight: bool,
                   blocks: KernelBlocks | None, poly: int | None = 0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv (each (B, H, T, D)) from dO and the saved forward state of :func:`fused_forward` (the
    pre-pass writes its coefficient rows into stats)."""
    B, H, T, D = q.shape
    do = rows_last_contiguous(do)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    u_or_out = u if u is not None else out
    block = 16 if interpreter_enabled() else PREPROCESS_BLOCK
    _bwd_preprocess[(triton.cdiv(T, block), B * H)](
        out, do, u_or_out, stats, *head_strides(out), *head_strides(do), *head_strides(u_or_out), stats.stride(0),
        H, T, p, HEAD_DIM=D, BLOCK_M=block, REWEIGHT=reweight, num_warps=4 if D <= 64 else 8,
    )
    blocks = blocks or KernelBlocks()
    inputs = (q, k, v, do)
    input_strides = (*head_strides(q), *head_strides(k), *head_strides(v), *head_strides(do))
    scalars = (stats.stride(0), H, T, math.log(D), p)
    constexprs = dict(HEAD_DIM=D, P_INT=_p_int(p, reweight), REWEIGHT=reweight, PRECISION=dot_precision(q.dtype))
    launch(_bwd_dkdv_kernel, _bwd_dkdv_tuned, blocks.dkdv, T, B * H,
           (*inputs, dk, dv, rq, rk, stats, *input_strides, *head_strides(dk), *head_strides(dv), *scalars),
           key_major=True, poly=poly, **constexprs)
    launch(_bwd_dq_kernel, _bwd_dq_tuned, blocks.dq, T, B * H,
           (*inputs, dq, rq, rk, stats, *input_strides, *head_strides(dq), *scalars), poly=poly, **constexprs)
    return dq, dk, dv


class FusedSoftplusAttention(torch.autograd.Function):
    """apply(q, k, v, p, reweight, need_grad, blocks, poly) -> (B, H, T, D): LSSA (reweight False) or LSSAR of
    power p. need_grad False skips the accumulation of U that only the LSSAR backward needs (inference);
    poly: quarters of the special functions on the FMA pipes (None: tuned)."""

    @staticmethod
    def forward(ctx, q, k, v, p, reweight, need_grad, blocks, poly):
        q, k, v = rows_last_contiguous(q), rows_last_contiguous(k), rows_last_contiguous(v)
        out, u, rq, rk, stats = fused_forward(q, k, v, p, reweight, need_grad, blocks, poly)
        ctx.save_for_backward(q, k, v, out, u, rq, rk, stats)
        ctx.p, ctx.reweight, ctx.blocks, ctx.poly = p, reweight, blocks, poly
        return out

    @staticmethod
    def backward(ctx, dout):
        dq, dk, dv = fused_backward(dout, *ctx.saved_tensors, ctx.p, ctx.reweight, ctx.blocks, ctx.poly)
        return dq, dk, dv, None, None, None, None, None


def lssa_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: KernelBlocks | None = None,
                poly_share: float | str = 0.0) -> torch.Tensor:
    """Causal LSSA of (B, H, T, D) q, k, v with the fused kernels; returns (B, H, T, D). blocks overrides the
    tile sizes (tests); poly_share (0, 0.25, 0.5, 0.75, 1 or "auto") the share of each tile's exp and
    reciprocal computed on the FMA pipes instead of the special-function unit (0: as before the option)."""
    return FusedSoftplusAttention.apply(q, k, v, 1.0, False, False, blocks, poly_quarters(poly_share))


def lssar_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float = 15.0,
                 blocks: KernelBlocks | None = None, poly_share: float | str = 0.0) -> torch.Tensor:
    """Causal LSSAR of power p of (B, H, T, D) q, k, v with the fused kernels; returns (B, H, T, D). blocks
    overrides the tile sizes (tests); poly_share as :func:`lssa_triton` (also the real power's exp2 and log2)."""
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return FusedSoftplusAttention.apply(q, k, v, p, True, need_grad, blocks, poly_quarters(poly_share))
