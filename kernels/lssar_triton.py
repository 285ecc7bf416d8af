"""Fused causal LSSAR (LSSA with re-weighting, power p) in Triton: forward and backward.

The forward makes two streaming passes over the key blocks of each query block (memory O(T)):
  1. row statistics: L_i = sum_j softplus(S_ij) and the row's max and min of softplus(S_ij);
  2. re-weighting: x_ij = n_i A_ij - O_i, y_ij = relu(x_ij) / M_i with M_i = max_j x_ij (so y in [0, 1]
     and p = 15 cannot overflow; integer p by repeated squaring, no pow), R_ij = y_ij^p, accumulating
     sum_j R_ij and R @ v. Rows whose softplus values all tie (all R_ij = 0) keep their LSSA weights,
     1 / n_i: their row parameters are set so that pass 2 gives every key R = 1.
When gradients are needed, pass 2 also accumulates U_i = sum_j A_ij g_ij (v_j - out_i) with
g = y^(p-1) [x > 0], which the backward needs for the row-sum term (see triton_common). Reference:
reference.lssar_reference; the test comparing them: tests/test_kernels.py.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from orbitlaw.kernels.backend import integer_power
from orbitlaw.kernels.triton_common import (
    FORWARD_CANDIDATES,
    N_STATS,
    STAT_INV_NORM,
    STAT_INV_SCALE,
    STAT_NL,
    STAT_OFFSET,
    STAT_SUM,
    STAT_TIE,
    KernelBlocks,
    attention_backward,
    autotuned,
    dot_precision,
    head_strides,
    inverse_norms,
    launch,
    load_rows,
    power_minus_one,
    rows_last_contiguous,
    softplus,
)


@triton.jit
def _scores_block(
    q,
    row_scale,
    start_n,
    K,
    RK,
    sk_t,
    pid_bh,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """softplus(S) for one key block: (BLOCK_M, BLOCK_N) float32, and the block's key offsets."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k = load_rows(K, offs_n, sk_t, offs_d, T)
    rk = tl.load(RK + pid_bh * T + offs_n, mask=offs_n < T, other=0.0)
    return softplus(tl.dot(q, tl.trans(k), input_precision=PRECISION) * row_scale[:, None] * rk[None, :]), offs_n


@triton.jit
def _row_stats_block(
    row_sum,
    e_max,
    e_min,
    q,
    row_scale,
    offs_m,
    start_n,
    K,
    RK,
    sk_t,
    pid_bh,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Pass 1 over one key block: update each row's softplus sum, max and min."""
    e, offs_n = _scores_block(q, row_scale, start_n, K, RK, sk_t, pid_bh, T, HEAD_DIM, BLOCK_N, PRECISION)
    if CAUSAL:
        keep = offs_n[None, :] <= offs_m[:, None]
        row_sum += tl.sum(tl.where(keep, e, 0.0), 1)
        e_max = tl.maximum(e_max, tl.max(tl.where(keep, e, -float("inf")), 1))
        e_min = tl.minimum(e_min, tl.min(tl.where(keep, e, float("inf")), 1))
    else:
        row_sum += tl.sum(e, 1)
        e_max = tl.maximum(e_max, tl.max(e, 1))
        e_min = tl.minimum(e_min, tl.min(e, 1))
    return row_sum, e_max, e_min


@triton.jit
def _reweight_block(
    acc,
    norm,
    acc_u,
    gsum,
    q,
    row_scale,
    nl,
    offset,
    inv_scale,
    offs_m,
    start_n,
    K,
    V,
    RK,
    sk_t,
    sv_t,
    pid_bh,
    T,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    P_INT: tl.constexpr,
    CAUSAL: tl.constexpr,
    NEED_GRAD: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Pass 2 over one key block: acc += w @ v and norm += sum w for w = R (1 on tie rows); with
    NEED_GRAD also acc_u += (E g) @ v and gsum += sum E g."""
    e, offs_n = _scores_block(q, row_scale, start_n, K, RK, sk_t, pid_bh, T, HEAD_DIM, BLOCK_N, PRECISION)
    x = e * nl[:, None] - offset[:, None]
    y = tl.maximum(x, 0.0) * inv_scale[:, None]
    g = power_minus_one(y, p, P_INT)  # y^(p-1); the weight R = y^p = g y
    if P_INT < 2:
        g = tl.where(x > 0, g, 0.0)
    w = g * y
    if CAUSAL:
        keep = offs_n[None, :] <= offs_m[:, None]
        w = tl.where(keep, w, 0.0)
    v = load_rows(V, offs_n, sv_t, tl.arange(0, HEAD_DIM), T)
    acc = tl.dot(w.to(v.dtype), v, acc, input_precision=PRECISION)
    norm += tl.sum(w, 1)
    if NEED_GRAD:
        eg = e * g
        if CAUSAL:
            eg = tl.where(keep, eg, 0.0)
        acc_u = tl.dot(eg.to(v.dtype), v, acc_u, input_precision=PRECISION)
        gsum += tl.sum(eg, 1)
    return acc, norm, acc_u, gsum


@triton.jit
def _lssar_forward_kernel(
    Q,
    K,
    V,
    Out,
    U,
    RQ,
    RK,
    Stats,
    sq_b,
    sq_h,
    sq_t,
    sk_b,
    sk_h,
    sk_t,
    sv_b,
    sv_h,
    sv_t,
    so_b,
    so_h,
    so_t,
    su_b,
    su_h,
    su_t,
    stat_stride,
    H,
    T,
    log_d,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    P_INT: tl.constexpr,
    NEED_GRAD: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Output rows of one block of BLOCK_M queries, their row statistics, and (NEED_GRAD) U."""
    log_d, p = tl.cast(log_d, tl.float32), tl.cast(p, tl.float32)  # torch.compile may pass float64
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    K += b * sk_b + h * sk_h
    V += b * sv_b + h * sv_h
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = load_rows(Q + b * sq_b + h * sq_h, offs_m, sq_t, offs_d, T)
    rq = tl.load(RQ + pid_bh * T + offs_m, mask=offs_m < T, other=0.0)
    pos = (offs_m + 1).to(tl.float32)
    row_scale = log_d * tl.log(pos) * rq
    lo = (pid_m * BLOCK_M // BLOCK_N) * BLOCK_N
    hi = tl.minimum((pid_m + 1) * BLOCK_M, T)

    # pass 1: row sum, max and min of softplus(S)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    e_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    e_min = tl.full([BLOCK_M], float("inf"), tl.float32)
    for start_n in range(0, lo, BLOCK_N):
        row_sum, e_max, e_min = _row_stats_block(
            row_sum,
            e_max,
            e_min,
            q,
            row_scale,
            offs_m,
            start_n,
            K,
            RK,
            sk_t,
            pid_bh,
            T,
            HEAD_DIM,
            BLOCK_N,
            False,
            PRECISION,
        )
    for start_n in range(lo, hi, BLOCK_N):
        row_sum, e_max, e_min = _row_stats_block(
            row_sum,
            e_max,
            e_min,
            q,
            row_scale,
            offs_m,
            start_n,
            K,
            RK,
            sk_t,
            pid_bh,
            T,
            HEAD_DIM,
            BLOCK_N,
            True,
            PRECISION,
        )
    nl = pos / row_sum
    offset = tl.where(pos > 3.0, 1.0, 0.0)
    x_max = e_max * nl - offset  # same operations as x below, so x <= x_max exactly
    tie = (e_max == e_min) | (x_max <= 0.0)
    inv_scale = tl.where(tie, 1.0, 1.0 / tl.where(tie, 1.0, x_max))
    nl = tl.where(tie, 0.0, nl)  # tie rows: x = 1 for every key, so R = 1 and the weights 1 / n_i
    offset = tl.where(tie, -1.0, offset)

    # pass 2: re-weighted output
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    acc_u = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    norm = tl.zeros([BLOCK_M], tl.float32)
    gsum = tl.zeros([BLOCK_M], tl.float32)
    for start_n in range(0, lo, BLOCK_N):
        acc, norm, acc_u, gsum = _reweight_block(
            acc,
            norm,
            acc_u,
            gsum,
            q,
            row_scale,
            nl,
            offset,
            inv_scale,
            offs_m,
            start_n,
            K,
            V,
            RK,
            sk_t,
            sv_t,
            pid_bh,
            T,
            p,
            HEAD_DIM,
            BLOCK_N,
            P_INT,
            False,
            NEED_GRAD,
            PRECISION,
        )
    for start_n in range(lo, hi, BLOCK_N):
        acc, norm, acc_u, gsum = _reweight_block(
            acc,
            norm,
            acc_u,
            gsum,
            q,
            row_scale,
            nl,
            offset,
            inv_scale,
            offs_m,
            start_n,
            K,
            V,
            RK,
            sk_t,
            sv_t,
            pid_bh,
            T,
            p,
            HEAD_DIM,
            BLOCK_N,
            P_INT,
            True,
            NEED_GRAD,
            PRECISION,
        )
    ok = offs_m < T
    inv_norm = 1.0 / norm
    out = acc * inv_norm[:, None]
    tl.store(
        Out + b * so_b + h * so_h + offs_m[:, None] * so_t + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=ok[:, None],
    )
    row = Stats + pid_bh * T + offs_m
    tl.store(row + STAT_SUM * stat_stride, row_sum, mask=ok)
    tl.store(row + STAT_INV_SCALE * stat_stride, inv_scale, mask=ok)
    tl.store(row + STAT_INV_NORM * stat_stride, inv_norm, mask=ok)
    tl.store(row + STAT_TIE * stat_stride, tl.where(tie, 1.0, 0.0), mask=ok)
    tl.store(row + STAT_NL * stat_stride, nl, mask=ok)
    tl.store(row + STAT_OFFSET * stat_stride, offset, mask=ok)
    if NEED_GRAD:  # U = sum_j A g (v_j - out_i): centred here, in float32, as the two terms nearly cancel
        inv_sum = 1.0 / row_sum
        u = (acc_u - gsum[:, None] * out) * inv_sum[:, None]
        tl.store(
            U + b * su_b + h * su_h + offs_m[:, None] * su_t + offs_d[None, :],
            u.to(U.dtype.element_ty),
            mask=ok[:, None],
        )


_lssar_forward_tuned = autotuned(_lssar_forward_kernel, FORWARD_CANDIDATES)


def lssar_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    p: float,
    need_grad: bool,
    blocks: KernelBlocks | None = None,
):
    """Run the LSSAR forward kernel: (out (B, H, T, D), U (B, H, T, D) or None, rq, rk (B, H, T),
    stats (N_STATS, B, H, T) float32)."""
    B, H, T, D = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    u = torch.empty(q.shape, dtype=q.dtype, device=q.device) if need_grad else None
    rq, rk = inverse_norms(q), inverse_norms(k)
    stats = torch.zeros((N_STATS, B, H, T), dtype=torch.float32, device=q.device)
    u_ = u if u is not None else out
    launch(
        _lssar_forward_kernel,
        _lssar_forward_tuned,
        (blocks or KernelBlocks()).forward,
        T,
        B * H,
        (
            q,
            k,
            v,
            out,
            u_,
            rq,
            rk,
            stats,
            *head_strides(q),
            *head_strides(k),
            *head_strides(v),
            *head_strides(out),
            *head_strides(u_),
            stats.stride(0),
            H,
            T,
            math.log(D),
            float(p),
        ),
        HEAD_DIM=D,
        P_INT=integer_power(p),
        NEED_GRAD=need_grad,
        PRECISION=dot_precision(q.dtype),
    )
    return out, u, rq, rk, stats


class LSSARFunction(torch.autograd.Function):
    """Autograd wrapper of the fused LSSAR kernels: apply(q, k, v, p, need_grad, blocks) -> (B, H, T, D).

    need_grad False skips the extra accumulation the backward needs (inference).
    """

    @staticmethod
    def forward(ctx, q, k, v, p, need_grad=True, blocks=None):
        q, k, v = rows_last_contiguous(q), rows_last_contiguous(k), rows_last_contiguous(v)
        out, u, rq, rk, stats = lssar_forward(q, k, v, p, need_grad, blocks)
        ctx.save_for_backward(q, k, v, out, u, rq, rk, stats)
        ctx.p, ctx.blocks = p, blocks
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, u, rq, rk, stats = ctx.saved_tensors
        dq, dk, dv = attention_backward(dout, q, k, v, out, u, rq, rk, stats, ctx.p, True, ctx.blocks)
        return dq, dk, dv, None, None, None


def lssar_triton(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float = 15.0, blocks: KernelBlocks | None = None
) -> torch.Tensor:
    """Causal LSSAR of power p of (B, H, T, D) q, k, v with the fused Triton kernels; returns (B, H, T, D).

    Inputs are assumed validated (see kernels.lssar_attention). blocks overrides the tile sizes (tests).
    """
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return LSSARFunction.apply(q, k, v, p, need_grad, blocks)
