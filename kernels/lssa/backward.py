"""Backward kernels of fused causal LSSA and LSSAR, flash-attention style: the scores are recomputed from
q, k and the saved row statistics instead of storing a T x T matrix. One set of kernels serves both;
REWEIGHT (a tl.constexpr) selects LSSAR. Laid out as Triton's fused-attention tutorial: a pre-pass of
per-row coefficients (``_bwd_preprocess``), dk and dv per key block (``_bwd_dkdv_kernel`` looping with
``_bwd_dkdv``), dq per query block (``_bwd_dq_kernel`` looping with ``_bwd_dq``); each inner loop runs
twice, MASK True over the blocks on the diagonal (causal mask) and MASK False over the rest.

Notation (per batch and head, 0-based row r, 1-based position i = r + 1, key count n_i = i):
  S_ij = c_i (q_i . k_j) rq_i rk_j,  c_i = log(d) log(i),  rq_i = 1 / max(|q_i|, eps)  (rk likewise)
  E_ij = softplus(S_ij),  L_i = sum_j E_ij,  A_ij = E_ij / L_i                                   (LSSA)
  x_ij = n_i A_ij - O_i,  M_i = max_j x_ij,  y_ij = relu(x_ij) / M_i in [0, 1],  R_ij = y_ij^p  (LSSAR)
  W_ij = R_ij / Z_i with Z_i = sum_j R_ij, out_i = sum_j W_ij v_j
  Rows whose E all tie keep W = A = 1 / n_i: the forward gives them the row parameters n_i / L_i -> 0 and
  O_i -> -1 (so x = 1, y = 1, R = 1 and W = 1 / n_i) instead of branching per element.

With dW_ij = dO_i . v_j and Delta_i = dO_i . out_i (as FlashAttention's D_i):
  LSSA:  dS_ij = sigmoid(S_ij) (dW_ij - Delta_i) / L_i
  LSSAR: g_ij = y_ij^(p-1) [x_ij > 0],  alpha_i = n_i p / (M_i Z_i),
         Gamma_i = sum_j A_ij (grad of A_ij) = alpha_i dO_i . U_i with U_i = sum_j A_ij g_ij (v_j - out_i),
         which the forward accumulates (as sum_j A g v - (sum_j A g) out_i, in float32, before rounding U
         to the input dtype: at p = 15 the two terms nearly cancel), and
         dS_ij = sigmoid(S_ij) (alpha_i g_ij (dW_ij - Delta_i) - Gamma_i) / L_i.
  Both are dS = sigmoid(S) (a_i g_ij (dW_ij - b_i) - c_i) with per-row coefficients from the pre-pass:
  LSSAR a = alpha / L, b = Delta, c = Gamma / L; LSSA and tie rows g = 1, a = 1 / L, b = 0, c = Delta / L.
  Then d(q^_i) = c_i sum_j dS_ij k^_j, d(k^_j) = sum_i c_i dS_ij q^_i, dv_j = sum_i W_ij dO_i, and the
  normalisation's backward dq = rq (dq^ - q^ (q^ . dq^)) (no projection where the norm was clamped).
"""

from __future__ import annotations

import triton
import triton.language as tl

from orbitlaw.kernels.lssa import tiles
from orbitlaw.kernels.lssa.tiles import (
    batch_head,
    key_blocks,
    load_rows,
    unit_rows_backward,
    weights_and_dscores,
)


@triton.jit
def _bwd_preprocess(Out, DO, U, Stats,
                    stride_ob, stride_oh, stride_ot,
                    stride_dob, stride_doh, stride_dot,
                    stride_ub, stride_uh, stride_ut,
                    stride_stat, H, T, p,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, REWEIGHT: tl.constexpr):
    """Per-row coefficients a, b, c (module doc) of one block of BLOCK_M rows, from out, dO, U (B, H, T,
    HEAD_DIM) and the forward's row statistics; written into Stats (N_STATS, B, H, T)."""
    p = tl.cast(p, tl.float32)  # torch.compile may pass float64
    pid_m = tl.program_id(0)
    pid_bh, b, h = batch_head(H)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    ok = offs_m < T
    o = load_rows(Out + b * stride_ob + h * stride_oh, offs_m, stride_ot, offs_d, T).to(tl.float32)
    do = load_rows(DO + b * stride_dob + h * stride_doh, offs_m, stride_dot, offs_d, T).to(tl.float32)
    delta = tl.sum(o * do, 1)  # (BLOCK_M,)
    row = Stats + pid_bh * T + offs_m
    row_sum = tl.load(row + tiles.STAT_SUM * stride_stat, mask=ok, other=1.0)
    if REWEIGHT:
        u = load_rows(U + b * stride_ub + h * stride_uh, offs_m, stride_ut, offs_d, T).to(tl.float32)
        du = tl.sum(u * do, 1)
        inv_scale = tl.load(row + tiles.STAT_INV_SCALE * stride_stat, mask=ok, other=1.0)
        inv_norm = tl.load(row + tiles.STAT_INV_NORM * stride_stat, mask=ok, other=0.0)
        tie = tl.load(row + tiles.STAT_TIE * stride_stat, mask=ok, other=0.0) > 0.5
        n = (offs_m + 1).to(tl.float32)
        alpha = n * p * inv_scale * inv_norm
        coef_a = tl.where(tie, 1.0, alpha) / row_sum
        coef_b = tl.where(tie, 0.0, delta)
        coef_c = tl.where(tie, delta, alpha * du) / row_sum
    else:
        coef_a = 1.0 / row_sum
        coef_b = tl.zeros([BLOCK_M], tl.float32)
        coef_c = delta / row_sum
    tl.store(row + tiles.STAT_COEF_A * stride_stat, coef_a, mask=ok)
    tl.store(row + tiles.STAT_COEF_B * stride_stat, coef_b, mask=ok)
    tl.store(row + tiles.STAT_COEF_C * stride_stat, coef_c, mask=ok)


@triton.jit
def _load_row_stats(Stats, offs_m, stride_stat, T, REWEIGHT: tl.constexpr):
    """(nl, offset, inv_scale, inv_norm, a, b, c), each (len(offs_m),), of rows offs_m of this batch and
    head's statistics Stats; rows >= T give zero weights and zero dS (LSSA: nl, offset, inv_scale and b are
    unused, returned as 0 / 1)."""
    ok = offs_m < T
    row = Stats + offs_m
    inv_norm = tl.load(row + tiles.STAT_INV_NORM * stride_stat, mask=ok, other=0.0)
    coef_a = tl.load(row + tiles.STAT_COEF_A * stride_stat, mask=ok, other=0.0)
    coef_c = tl.load(row + tiles.STAT_COEF_C * stride_stat, mask=ok, other=0.0)
    if REWEIGHT:
        nl = tl.load(row + tiles.STAT_NL * stride_stat, mask=ok, other=0.0)
        offset = tl.load(row + tiles.STAT_OFFSET * stride_stat, mask=ok, other=0.0)
        inv_scale = tl.load(row + tiles.STAT_INV_SCALE * stride_stat, mask=ok, other=1.0)
        coef_b = tl.load(row + tiles.STAT_COEF_B * stride_stat, mask=ok, other=0.0)
    else:
        nl = tl.zeros_like(inv_norm)
        offset = tl.zeros_like(inv_norm)
        inv_scale = tl.zeros_like(inv_norm) + 1.0
        coef_b = tl.zeros_like(inv_norm)
    return nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c


@triton.jit
def _bwd_dkdv(dk, dv, k, v, rk, start_n, Q, DO, RQ, Stats, stride_qt, stride_dot, stride_stat, T, log_d, p,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
              REWEIGHT: tl.constexpr, MASK: tl.constexpr, PRECISION: tl.constexpr, POLY: tl.constexpr):
    """Add the query blocks of one stage to key block start_n's d(k^) and dv (BLOCK_N, HEAD_DIM) float32:
    MASK True the blocks overlapping the diagonal, MASK False those wholly after it. Key-major tiles
    (BLOCK_N, BLOCK_M); k, v (BLOCK_N, HEAD_DIM), rk (BLOCK_N,); Q, DO, RQ, Stats point at this batch and
    head."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    below_diagonal = tl.cdiv(start_n + BLOCK_N, BLOCK_M) * BLOCK_M  # first query block wholly after the keys
    if MASK:
        lo = (start_n // BLOCK_M) * BLOCK_M
        hi = tl.minimum(below_diagonal, T)
    else:
        lo = below_diagonal
        hi = T
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = load_rows(Q, offs_m, stride_qt, offs_d, T)  # (BLOCK_M, HEAD_DIM)
        do = load_rows(DO, offs_m, stride_dot, offs_d, T)
        rq = tl.load(RQ + offs_m, mask=offs_m < T, other=0.0)
        nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c = _load_row_stats(Stats, offs_m, stride_stat, T,
                                                                                   REWEIGHT)
        c = log_d * tl.log((offs_m + 1).to(tl.float32))
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * rk[:, None] * (c * rq)[None, :]
        dw_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        w_t, ds_t = weights_and_dscores(s_t, dw_t, nl[None, :], offset[None, :], inv_scale[None, :],
                                        inv_norm[None, :], coef_a[None, :], coef_b[None, :], coef_c[None, :], p,
                                        P_INT, REWEIGHT, POLY)
        if MASK:
            keep = offs_n[:, None] <= offs_m[None, :]
            w_t = tl.where(keep, w_t, 0.0)
            ds_t = tl.where(keep, ds_t, 0.0)
        dv = tl.dot(w_t.to(do.dtype), do, dv, input_precision=PRECISION)
        if Q.dtype.element_ty == tl.float16:  # scale q to unit rows: rq can exceed float16's range
            qn = (q.to(tl.float32) * rq[:, None]).to(q.dtype)
            dk = tl.dot((ds_t * c[None, :]).to(q.dtype), qn, dk, input_precision=PRECISION)
        else:
            dk = tl.dot((ds_t * (c * rq)[None, :]).to(q.dtype), q, dk, input_precision=PRECISION)
    return dk, dv


@triton.jit
def _bwd_dkdv_kernel(Q, K, V, DO, DK, DV, RQ, RK, Stats,
                     stride_qb, stride_qh, stride_qt, stride_kb, stride_kh, stride_kt,
                     stride_vb, stride_vh, stride_vt, stride_dob, stride_doh, stride_dot,
                     stride_dkb, stride_dkh, stride_dkt, stride_dvb, stride_dvh, stride_dvt,
                     stride_stat, H, T, log_d, p,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
                     REWEIGHT: tl.constexpr, PRECISION: tl.constexpr, POLY: tl.constexpr = 0):
    """dk, dv of one block of BLOCK_N keys, from the query blocks at or after it. Tensors (B, H, T, HEAD_DIM);
    RQ, RK (B, H, T); Stats (N_STATS, B, H, T) with the pre-pass's coefficients."""
    log_d, p = tl.cast(log_d, tl.float32), tl.cast(p, tl.float32)  # torch.compile may pass float64
    start_n = tl.program_id(0) * BLOCK_N
    pid_bh, b, h = batch_head(H)
    Q += b * stride_qb + h * stride_qh  # Q, DO, RQ, Stats: this batch and head's slabs
    DO += b * stride_dob + h * stride_doh
    RQ += pid_bh * T
    Stats += pid_bh * T
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k = load_rows(K + b * stride_kb + h * stride_kh, offs_n, stride_kt, offs_d, T)  # (BLOCK_N, HEAD_DIM)
    v = load_rows(V + b * stride_vb + h * stride_vh, offs_n, stride_vt, offs_d, T)
    rk = tl.load(RK + pid_bh * T + offs_n, mask=offs_n < T, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)  # d(k^) until the normalisation's backward below
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dk, dv = _bwd_dkdv(dk, dv, k, v, rk, start_n, Q, DO, RQ, Stats, stride_qt, stride_dot, stride_stat, T, log_d, p,
                       HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, True, PRECISION, POLY)
    dk, dv = _bwd_dkdv(dk, dv, k, v, rk, start_n, Q, DO, RQ, Stats, stride_qt, stride_dot, stride_stat, T, log_d, p,
                       HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, False, PRECISION, POLY)
    dk = unit_rows_backward(k, rk, dk)
    ok = (offs_n < T)[:, None]
    tl.store(DK + b * stride_dkb + h * stride_dkh + offs_n[:, None] * stride_dkt + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=ok)
    tl.store(DV + b * stride_dvb + h * stride_dvh + offs_n[:, None] * stride_dvt + offs_d[None, :],
             dv.to(DV.dtype.element_ty), mask=ok)


@triton.jit
def _bwd_dq(dq, q, do, row_scale, row_stats, start_m, K, V, RK, stride_kt, stride_vt, T, p,
            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
            REWEIGHT: tl.constexpr, MASK: tl.constexpr, PRECISION: tl.constexpr, POLY: tl.constexpr):
    """Add the key blocks of one stage to query block start_m's sum_j dS_ij k^_j (BLOCK_M, HEAD_DIM) float32:
    MASK False the blocks wholly before the diagonal, MASK True those on it. Query-major tiles; q, do
    (BLOCK_M, HEAD_DIM), row_scale = c_i rq_i, row_stats as ``_load_row_stats``; K, V, RK point at this
    batch and head."""
    nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c = row_stats
    offs_m = start_m + tl.arange(0, BLOCK_M)
    lo, hi = key_blocks(start_m, T, BLOCK_M, BLOCK_N, MASK)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        k = load_rows(K, offs_n, stride_kt, offs_d, T)  # (BLOCK_N, HEAD_DIM)
        v = load_rows(V, offs_n, stride_vt, offs_d, T)
        rk = tl.load(RK + offs_n, mask=offs_n < T, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * row_scale[:, None] * rk[None, :]  # (BLOCK_M, BLOCK_N)
        dw = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        _, ds = weights_and_dscores(s, dw, nl[:, None], offset[:, None], inv_scale[:, None], inv_norm[:, None],
                                    coef_a[:, None], coef_b[:, None], coef_c[:, None], p, P_INT, REWEIGHT, POLY)
        if MASK:
            ds = tl.where(offs_n[None, :] <= offs_m[:, None], ds, 0.0)
        if K.dtype.element_ty == tl.float16:  # scale k to unit rows: rk can exceed float16's range
            kn = (k.to(tl.float32) * rk[:, None]).to(k.dtype)
            dq = tl.dot(ds.to(k.dtype), kn, dq, input_precision=PRECISION)
        else:
            dq = tl.dot((ds * rk[None, :]).to(k.dtype), k, dq, input_precision=PRECISION)
    return dq


@triton.jit
def _bwd_dq_kernel(Q, K, V, DO, DQ, RQ, RK, Stats,
                   stride_qb, stride_qh, stride_qt, stride_kb, stride_kh, stride_kt,
                   stride_vb, stride_vh, stride_vt, stride_dob, stride_doh, stride_dot,
                   stride_dqb, stride_dqh, stride_dqt, stride_stat, H, T, log_d, p,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, P_INT: tl.constexpr,
                   REWEIGHT: tl.constexpr, PRECISION: tl.constexpr, POLY: tl.constexpr = 0):
    """dq of one block of BLOCK_M query rows, from the key blocks up to the diagonal (shapes as
    ``_bwd_dkdv_kernel``)."""
    log_d, p = tl.cast(log_d, tl.float32), tl.cast(p, tl.float32)  # torch.compile may pass float64
    start_m = tl.program_id(0) * BLOCK_M
    pid_bh, b, h = batch_head(H)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = load_rows(Q + b * stride_qb + h * stride_qh, offs_m, stride_qt, offs_d, T)  # (BLOCK_M, HEAD_DIM)
    do = load_rows(DO + b * stride_dob + h * stride_doh, offs_m, stride_dot, offs_d, T)
    rq = tl.load(RQ + pid_bh * T + offs_m, mask=offs_m < T, other=0.0)
    row_stats = _load_row_stats(Stats + pid_bh * T, offs_m, stride_stat, T, REWEIGHT)
    c = log_d * tl.log((offs_m + 1).to(tl.float32))
    row_scale = c * rq
    K += b * stride_kb + h * stride_kh  # K, V, RK: this batch and head's slabs, which _bwd_dq walks
    V += b * stride_vb + h * stride_vh
    RK += pid_bh * T
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    dq = _bwd_dq(dq, q, do, row_scale, row_stats, start_m, K, V, RK, stride_kt, stride_vt, T, p,
                 HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, False, PRECISION, POLY)
    dq = _bwd_dq(dq, q, do, row_scale, row_stats, start_m, K, V, RK, stride_kt, stride_vt, T, p,
                 HEAD_DIM, BLOCK_M, BLOCK_N, P_INT, REWEIGHT, True, PRECISION, POLY)
    dq = unit_rows_backward(q, rq, dq * c[:, None])  # d(q^) = c_i sum_j dS_ij k^_j, then through q^ = q rq
    tl.store(DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqt + offs_d[None, :],
             dq.to(DQ.dtype.element_ty), mask=(offs_m < T)[:, None])
