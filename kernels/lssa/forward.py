"""Forward kernel of fused causal LSSA and LSSAR: one kernel, REWEIGHT selecting LSSAR (memory O(T)).

Per query block of BLOCK_M rows, streaming over key blocks of BLOCK_N keys (notation of ``backward.py``):
  LSSA (REWEIGHT False): one pass accumulating L_i = sum_j softplus(S_ij) and softplus(S) @ v; the scores
     are bounded, |S| <= log(d) log(T), so no running max is needed.
  LSSAR (REWEIGHT True): two passes,
     1. row statistics: L_i and the row's max and min of softplus(S_ij);
     2. re-weighting: x_ij = n_i A_ij - O_i, y_ij = relu(x_ij) / M_i with M_i = max_j x_ij (so y in [0, 1]
        and p = 15 cannot overflow; integer p by repeated squaring, no pow), R_ij = y_ij^p, accumulating
        Z_i = sum_j R_ij and R @ v. Rows whose softplus values all tie (all R_ij = 0) keep their LSSA
        weights, 1 / n_i: their row parameters are set so that pass 2 gives every key R = 1.
     With NEED_GRAD, pass 2 also accumulates U_i = sum_j A_ij g_ij (v_j - out_i) with g = y^(p-1) [x > 0],
     which the backward needs for the row-sum term.
Each pass runs twice, as in Triton's fused-attention tutorial: MASK False over the key blocks wholly
before the diagonal, MASK True over the blocks on it (causal mask).
"""

from __future__ import annotations

import triton
import triton.language as tl

from orbitlaw.kernels.lssa import tiles
from orbitlaw.kernels.lssa.tiles import batch_head, key_blocks, load_rows, reweighted, softplus


@triton.jit
def _softplus_scores(q, row_scale, K, RK, stride_kt, start_n, T, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                     PRECISION: tl.constexpr, POLY: tl.constexpr):
    """(softplus(S) (BLOCK_M, BLOCK_N) float32, key offsets (BLOCK_N,)) of the key block at start_n, for a
    query tile q (BLOCK_M, HEAD_DIM) with row_scale c_i rq_i (BLOCK_M,); K (T, HEAD_DIM) and RK (T,) point at
    this batch and head."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = load_rows(K, offs_n, stride_kt, tl.arange(0, HEAD_DIM), T)  # (BLOCK_N, HEAD_DIM)
    rk = tl.load(RK + offs_n, mask=offs_n < T, other=0.0)
    return softplus(tl.dot(q, tl.trans(k), input_precision=PRECISION) * row_scale[:, None] * rk[None, :], POLY), offs_n


@triton.jit
def _fwd_row_stats(row_sum, e_max, e_min, q, row_scale, start_m, K, RK, stride_kt, T,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
                   PRECISION: tl.constexpr, POLY: tl.constexpr):
    """LSSAR pass 1 over the key blocks of one stage: each row's sum, max and min of softplus(S) (BLOCK_M,)."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    lo, hi = key_blocks(start_m, T, BLOCK_M, BLOCK_N, MASK)
    for start_n in range(lo, hi, BLOCK_N):
        e, offs_n = _softplus_scores(q, row_scale, K, RK, stride_kt, start_n, T, HEAD_DIM, BLOCK_N, PRECISION, POLY)
        if MASK:
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
def _fwd_weighted(accumulators, q, row_scale, row_params, start_m, K, V, RK, stride_kt, stride_vt, T, p,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
                  REWEIGHT: tl.constexpr, NEED_GRAD: tl.constexpr, MASK: tl.constexpr, PRECISION: tl.constexpr,
                  POLY: tl.constexpr):
    """The weighted pass over the key blocks of one stage, with w = softplus(S) (LSSA) or R (LSSAR):
    acc += w @ v (BLOCK_M, HEAD_DIM), norm += sum_j w (BLOCK_M,); with NEED_GRAD also acc_u += (E g) @ v
    and gsum += sum_j E g. accumulators: (acc, norm, acc_u, gsum); row_params: (nl, offset, inv_scale)."""
    acc, norm, acc_u, gsum = accumulators
    nl, offset, inv_scale = row_params
    offs_m = start_m + tl.arange(0, BLOCK_M)
    lo, hi = key_blocks(start_m, T, BLOCK_M, BLOCK_N, MASK)
    for start_n in range(lo, hi, BLOCK_N):
        e, offs_n = _softplus_scores(q, row_scale, K, RK, stride_kt, start_n, T, HEAD_DIM, BLOCK_N, PRECISION, POLY)
        if REWEIGHT:
            w, g = reweighted(e, nl[:, None], offset[:, None], inv_scale[:, None], p, P_INT, POLY)
        else:
            w = e
        if MASK:
            keep = offs_n[None, :] <= offs_m[:, None]
            w = tl.where(keep, w, 0.0)
        v = load_rows(V, offs_n, stride_vt, tl.arange(0, HEAD_DIM), T)  # (BLOCK_N, HEAD_DIM)
        acc = tl.dot(w.to(v.dtype), v, acc, input_precision=PRECISION)
        norm += tl.sum(w, 1)
        if NEED_GRAD:
            eg = e * g
            if MASK:
                eg = tl.where(keep, eg, 0.0)
            acc_u = tl.dot(eg.to(v.dtype), v, acc_u, input_precision=PRECISION)
            gsum += tl.sum(eg, 1)
    return acc, norm, acc_u, gsum


@triton.jit
def _fwd_kernel(Q, K, V, Out, U, RQ, RK, Stats,
                stride_qb, stride_qh, stride_qt, stride_kb, stride_kh, stride_kt,
                stride_vb, stride_vh, stride_vt, stride_ob, stride_oh, stride_ot,
                stride_ub, stride_uh, stride_ut,
                stride_stat, H, T, log_d, p,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
                REWEIGHT: tl.constexpr, NEED_GRAD: tl.constexpr, PRECISION: tl.constexpr, POLY: tl.constexpr = 0):
    """Output rows of one block of BLOCK_M queries, their row statistics, and (NEED_GRAD) U.

    Q, K, V, Out, U: (B, H, T, HEAD_DIM); RQ, RK: (B, H, T) inverse norms; Stats: (N_STATS, B, H, T) float32
    with stride_stat between statistics. p, P_INT: the LSSAR power (unused by LSSA). POLY: quarters of each
    tile's exp (and real power) on the FMA pipes (``tiles.py``).
    """
    log_d, p = tl.cast(log_d, tl.float32), tl.cast(p, tl.float32)  # torch.compile may pass float64
    start_m = tl.program_id(0) * BLOCK_M
    pid_bh, b, h = batch_head(H)
    K += b * stride_kb + h * stride_kh  # K, V, RK: this batch and head's (T, HEAD_DIM) and (T,) slabs
    V += b * stride_vb + h * stride_vh
    RK += pid_bh * T
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = load_rows(Q + b * stride_qb + h * stride_qh, offs_m, stride_qt, offs_d, T)  # (BLOCK_M, HEAD_DIM)
    rq = tl.load(RQ + pid_bh * T + offs_m, mask=offs_m < T, other=0.0)
    pos = (offs_m + 1).to(tl.float32)  # 1-based positions i = n_i
    row_scale = log_d * tl.log(pos) * rq  # c_i rq_i

    if REWEIGHT:  # pass 1: row sum, max and min of softplus(S), then the re-weighting's row parameters
        row_sum = tl.zeros([BLOCK_M], tl.float32)
        e_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
        e_min = tl.full([BLOCK_M], float("inf"), tl.float32)
        row_sum, e_max, e_min = _fwd_row_stats(row_sum, e_max, e_min, q, row_scale, start_m, K, RK, stride_kt, T,
                                               HEAD_DIM, BLOCK_M, BLOCK_N, False, PRECISION, POLY)
        row_sum, e_max, e_min = _fwd_row_stats(row_sum, e_max, e_min, q, row_scale, start_m, K, RK, stride_kt, T,
                                               HEAD_DIM, BLOCK_M, BLOCK_N, True, PRECISION, POLY)
        nl = pos / row_sum
        offset = tl.where(pos > 3.0, 1.0, 0.0)
        x_max = e_max * nl - offset  # same operations as x in the pass, so x <= x_max exactly
        tie = (e_max == e_min) | (x_max <= 0.0)
        inv_scale = tl.where(tie, 1.0, 1.0 / tl.where(tie, 1.0, x_max))
        nl = tl.where(tie, 0.0, nl)  # tie rows: x = 1 for every key, so R = 1 and the weights 1 / n_i
        offset = tl.where(tie, -1.0, offset)
    else:
        nl = tl.zeros([BLOCK_M], tl.float32)
        offset = nl
        inv_scale = nl + 1.0
    row_params = (nl, offset, inv_scale)

    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    norm = tl.zeros([BLOCK_M], tl.float32)
    accumulators = (acc, norm, tl.zeros([BLOCK_M, HEAD_DIM], tl.float32), tl.zeros([BLOCK_M], tl.float32))
    accumulators = _fwd_weighted(accumulators, q, row_scale, row_params, start_m, K, V, RK, stride_kt, stride_vt, T,
                                 p, HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, NEED_GRAD, False, PRECISION, POLY)
    acc, norm, acc_u, gsum = _fwd_weighted(accumulators, q, row_scale, row_params, start_m, K, V, RK, stride_kt,
                                           stride_vt, T, p, HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, NEED_GRAD,
                                           True, PRECISION, POLY)

    ok = offs_m < T
    if REWEIGHT:
        inv_norm = 1.0 / norm
        out = acc * inv_norm[:, None]
    else:
        row_sum = norm
        out = acc / row_sum[:, None]
    tl.store(Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_ot + offs_d[None, :],
             out.to(Out.dtype.element_ty), mask=ok[:, None])
    row = Stats + pid_bh * T + offs_m  # this block's rows of the statistics
    tl.store(row + tiles.STAT_SUM * stride_stat, row_sum, mask=ok)
    if REWEIGHT:
        tl.store(row + tiles.STAT_INV_SCALE * stride_stat, inv_scale, mask=ok)
        tl.store(row + tiles.STAT_INV_NORM * stride_stat, inv_norm, mask=ok)
        tl.store(row + tiles.STAT_TIE * stride_stat, tl.where(tie, 1.0, 0.0), mask=ok)
        tl.store(row + tiles.STAT_NL * stride_stat, nl, mask=ok)
        tl.store(row + tiles.STAT_OFFSET * stride_stat, offset, mask=ok)
    else:
        tl.store(row + tiles.STAT_INV_NORM * stride_stat, 1.0 / row_sum, mask=ok)
    if NEED_GRAD:  # U = sum_j A g (v_j - out_i): centred here, in float32, as the two terms nearly cancel
        u = (acc_u - gsum[:, None] * out) * (1.0 / row_sum)[:, None]
        tl.store(U + b * stride_ub + h * stride_uh + offs_m[:, None] * stride_ut + offs_d[None, :],
                 u.to(U.dtype.element_ty), mask=ok[:, None])
