"""Triton pieces shared by the LSSA and LSSAR kernels: math helpers, row statistics, launch settings, and
the flash-attention style backward (recompute the scores from q, k and the saved row statistics instead
of storing a T x T matrix).

Notation (per batch and head, 0-based row r, 1-based position i = r + 1, key count n_i = i):
  S_ij = c_i (q_i . k_j) rq_i rk_j,  c_i = log(d) log(i),  rq_i = 1 / max(|q_i|, eps)  (rk likewise)
  E_ij = softplus(S_ij),  L_i = sum_j E_ij,  A_ij = E_ij / L_i                                   (LSSA)
  x_ij = n_i A_ij - O_i,  M_i = max_j x_ij,  y_ij = relu(x_ij) / M_i in [0, 1],  R_ij = y_ij^p  (LSSAR)
  W_ij = R_ij / Z_i with Z_i = sum_j R_ij, out_i = sum_j W_ij v_j
  Rows whose E all tie keep W = A = 1 / n_i: the kernels give them the row parameters n_i / L_i -> 0 and
  O_i -> -1 (so x = 1, y = 1, R = 1 and W = 1 / n_i) instead of branching per element.

Backward, with dW_ij = dO_i . v_j and Delta_i = dO_i . out_i (as FlashAttention's D_i):
  LSSA:  dS_ij = sigmoid(S_ij) (dW_ij - Delta_i) / L_i
  LSSAR: g_ij = y_ij^(p-1) [x_ij > 0],  alpha_i = n_i p / (M_i Z_i),
         Gamma_i = sum_j A_ij (grad of A_ij) = alpha_i dO_i . U_i with U_i = sum_j A_ij g_ij (v_j - out_i),
         which the forward pass accumulates (as sum_j A g v - (sum_j A g) out_i, in float32, before
         rounding U to the input dtype: at p = 15 the two terms nearly cancel), and
         dS_ij = sigmoid(S_ij) (alpha_i g_ij (dW_ij - Delta_i) - Gamma_i) / L_i.
  Both are dS = sigmoid(S) (a_i g_ij (dW_ij - b_i) - c_i) with per-row coefficients that a small
  pre-pass computes: LSSAR a = alpha / L, b = Delta, c = Gamma / L; LSSA and tie rows g = 1, a = 1 / L,
  b = 0, c = Delta / L. Then
  d(q^_i) = c_i sum_j dS_ij k^_j, d(k^_j) = sum_i c_i dS_ij q^_i, dv_j = sum_i W_ij dO_i, and the
  normalisation's backward dq = rq (dq^ - q^ (q^ . dq^)) (no projection where the norm was clamped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from orbitlaw.kernels.backend import integer_power, interpreter_enabled
from orbitlaw.kernels.reference import NORM_EPS

# Row statistics: one float32 tensor of shape (N_STATS, B, H, T); indices as compile-time constants.
STAT_SUM = tl.constexpr(0)  # L_i, the LSSA row sum of softplus(S)
STAT_INV_SCALE = tl.constexpr(1)  # 1 / M_i (LSSAR; 1 on tie rows)
STAT_INV_NORM = tl.constexpr(2)  # 1 / weight normaliser: 1 / Z_i (LSSAR; 1 / n_i on tie rows), 1 / L_i (LSSA)
STAT_TIE = tl.constexpr(3)  # 1.0 on LSSAR rows that keep their LSSA weights, else 0.0
STAT_COEF_A = tl.constexpr(4)  # backward coefficients a_i, b_i, c_i
STAT_COEF_B = tl.constexpr(5)
STAT_COEF_C = tl.constexpr(6)
STAT_NL = tl.constexpr(7)  # n_i / L_i (LSSAR; 0 on tie rows)
STAT_OFFSET = tl.constexpr(8)  # O_i (LSSAR; -1 on tie rows)
N_STATS = 9
NORM_EPS_C = tl.constexpr(NORM_EPS)  # the reference's norm clamp, as a kernel constant
NORM_EPS_SQ = tl.constexpr(NORM_EPS * NORM_EPS)  # |x|^2 below this: the norm was clamped



# ----------------------------------------------------------------------------------------------------------
# element-wise helpers
# ----------------------------------------------------------------------------------------------------------
@triton.jit
def _log1p(t):
    """log(1 + t) for t in [0, 1] as t times a degree-9 polynomial (least-squares fit of log(1 + t) / t).

    Relative error below 2e-7 in float32 (also as t -> 0), and only fused multiply-adds: cheaper on a GPU
    than log (a polynomial with range reduction there) and exact enough without log1p.
    """
    q = t * -0.003214032094 + 0.019649142
    q = q * t - 0.05643496862
    q = q * t + 0.1053322051
    q = q * t - 0.1525144539
    q = q * t + 0.1965148909
    q = q * t - 0.2494780806
    q = q * t + 0.3332909895
    q = q * t - 0.499998508
    q = q * t + 0.999999987
    return q * t


@triton.jit
def softplus(s):
    """softplus(s) = max(s, 0) + log(1 + exp(-|s|)), stable for any s."""
    return tl.maximum(s, 0.0) + _log1p(tl.exp(-tl.abs(s)))


@triton.jit
def softplus_and_sigmoid(s):
    """(softplus(s), sigmoid(s)); sigmoid is softplus' derivative, both stable for any s."""
    t = tl.exp(-tl.abs(s))
    r = 1.0 / (1.0 + t)
    return tl.maximum(s, 0.0) + _log1p(t), tl.where(s >= 0, r, t * r)


@triton.jit
def _int_power(y, N: tl.constexpr):
    """y**N (float32) for a compile-time integer 1 <= N < 128 by exponentiation by squaring (no pow)."""
    result = tl.full(y.shape, 1.0, tl.float32)
    base = y
    for bit in tl.static_range(7):
        if (N >> bit) & 1:
            result = result * base
        if (N >> (bit + 1)) > 0:
            base = base * base
    return result


@triton.jit
def power_minus_one(y, p, P_INT: tl.constexpr):
    """y**(p - 1) for y in [0, 1]; y^p is then this times y.

    P_INT >= 1: the integer p, by repeated squaring (no pow), exact 0 at y = 0 for p >= 2; P_INT == 0:
    real p, by exp2 and log2 (callers mask y = 0 there, and for p = 1).
    """
    if P_INT == 1:
        return tl.full(y.shape, 1.0, tl.float32)
    elif P_INT > 1:
        return _int_power(y, P_INT - 1)
    else:
        return tl.exp2((p - 1.0) * tl.log2(tl.maximum(y, 1e-38)))


@triton.jit
def load_rows(base, offs, stride, offs_d, T):
    """Load rows offs (clipped at T, zero-filled) of a (T, HEAD_DIM) slab: a (len(offs), HEAD_DIM) tile."""
    return tl.load(base + offs[:, None] * stride + offs_d[None, :], mask=(offs < T)[:, None], other=0.0)


@triton.jit
def weights_and_dscores(
    s,
    dw,
    nl,
    offset,
    inv_scale,
    inv_norm,
    coef_a,
    coef_b,
    coef_c,
    p,
    P_INT: tl.constexpr,
    REWEIGHT: tl.constexpr,
):
    """Normalised attention weights W and score gradients dS from a tile of scores s and dW = dO . v.

    Row quantities (nl = n_i / L_i, offset = O_i, inv_scale = 1 / M_i, inv_norm, coef_a/b/c; tie rows
    encoded in nl, offset) come already broadcast to the tile's layout ([:, None] for query-major
    tiles, [None, :] for key-major). Causal masking is left to the caller.
    """
    e, sig = softplus_and_sigmoid(s)
    if REWEIGHT:
        x = e * nl - offset
        y = tl.maximum(x, 0.0) * inv_scale
        g = power_minus_one(y, p, P_INT)  # y^(p-1); y^p = g y
        if P_INT < 2:
            g = tl.where(x > 0, g, 0.0)
        w = g * y * inv_norm
        ds = sig * (coef_a * g * (dw - coef_b) - coef_c)
    else:
        w = e * inv_norm
        ds = sig * (coef_a * dw - coef_c)
    return w, ds


# ----------------------------------------------------------------------------------------------------------
# launch settings
# ----------------------------------------------------------------------------------------------------------
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
FORWARD_CANDIDATES = (
    Blocks(128, 64, 8, 3),
    Blocks(128, 32, 8, 3),
    Blocks(64, 64, 4, 3),
    Blocks(64, 32, 4, 3),
)
DKDV_CANDIDATES = (
    Blocks(16, 128, 8, 2),
    Blocks(16, 64, 4, 3),
    Blocks(32, 128, 8, 2),
    Blocks(32, 64, 8, 2),
    Blocks(32, 64, 4, 3),
)
DQ_CANDIDATES = (
    Blocks(128, 32, 8, 2),
    Blocks(64, 32, 8, 2),
    Blocks(64, 32, 4, 3),
    Blocks(128, 64, 8, 2),
)


def autotuned(kernel, candidates: tuple[Blocks, ...]):
    """kernel wrapped in triton.autotune over candidates (BLOCK_M, BLOCK_N), keyed on T and HEAD_DIM."""
    configs = [
        triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.num_warps, num_stages=c.num_stages)
        for c in candidates
    ]
    return triton.autotune(configs=configs, key=["T", "HEAD_DIM", "P_INT"])(kernel)


def launch(kernel, tuned_kernel, blocks: Blocks | None, grid_rows: int, BH: int, args: tuple, **constexprs):
    """Launch kernel over (cdiv(grid_rows, BLOCK), B * H) programs with explicit blocks, the interpreter's
    defaults, or (on CUDA, blocks None) the autotuned variant. BLOCK is BLOCK_M, or BLOCK_N for key-major
    kernels (constexprs contains KEY_MAJOR=True)."""
    key_major = constexprs.pop("KEY_MAJOR", False)
    tile = "BLOCK_N" if key_major else "BLOCK_M"
    if blocks is None and not interpreter_enabled():
        tuned_kernel[lambda meta: (triton.cdiv(grid_rows, meta[tile]), BH)](*args, **constexprs)
        return
    b = blocks or INTERPRETER_BLOCKS
    size = b.block_n if key_major else b.block_m
    kernel[(triton.cdiv(grid_rows, size), BH)](
        *args,
        BLOCK_M=b.block_m,
        BLOCK_N=b.block_n,
        num_warps=b.num_warps,
        num_stages=b.num_stages,
        **constexprs,
    )


def dot_precision(dtype: torch.dtype):
    """tl.dot input precision: 'ieee' for float32 unless torch allows TF32 matmuls, else None (default)."""
    if dtype != torch.float32:
        return None
    if not interpreter_enabled() and torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return "ieee"


@triton.jit
def _inverse_norms_kernel(X, Out, sx_b, sx_h, sx_t, H, T, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Out[bh, t] = 1 / max(|X[b, h, t, :]|, NORM_EPS), accumulated in float32."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    x = load_rows(X + b * sx_b + h * sx_h, offs_m, sx_t, tl.arange(0, HEAD_DIM), T).to(tl.float32)
    norm = tl.sqrt_rn(tl.sum(x * x, 1))
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


def rows_last_contiguous(x: torch.Tensor) -> torch.Tensor:
    """x itself when its last dim has stride 1 (the kernels take the other strides as arguments)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def head_strides(x: torch.Tensor) -> tuple[int, int, int]:
    """(batch, head, sequence) strides of a (B, H, T, D) tensor whose last stride is 1."""
    return x.stride(0), x.stride(1), x.stride(2)


# ----------------------------------------------------------------------------------------------------------
# backward kernels
# ----------------------------------------------------------------------------------------------------------
@triton.jit
def _bwd_coefficients_kernel(
    Out,
    DO,
    U,
    Stats,
    so_b,
    so_h,
    so_t,
    sdo_b,
    sdo_h,
    sdo_t,
    su_b,
    su_h,
    su_t,
    stat_stride,
    H,
    T,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    REWEIGHT: tl.constexpr,
):
    """Per-row backward coefficients a, b, c (see the module docstring) from out, dO, U, row stats."""
    p = tl.cast(p, tl.float32)  # torch.compile may pass float64
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    ok = offs_m < T
    o = load_rows(Out + b * so_b + h * so_h, offs_m, so_t, offs_d, T).to(tl.float32)
    do = load_rows(DO + b * sdo_b + h * sdo_h, offs_m, sdo_t, offs_d, T).to(tl.float32)
    delta = tl.sum(o * do, 1)
    row = Stats + pid_bh * T + offs_m
    row_sum = tl.load(row + STAT_SUM * stat_stride, mask=ok, other=1.0)
    if REWEIGHT:
        u = load_rows(U + b * su_b + h * su_h, offs_m, su_t, offs_d, T).to(tl.float32)
        du = tl.sum(u * do, 1)
        inv_scale = tl.load(row + STAT_INV_SCALE * stat_stride, mask=ok, other=1.0)
        inv_norm = tl.load(row + STAT_INV_NORM * stat_stride, mask=ok, other=0.0)
        tie = tl.load(row + STAT_TIE * stat_stride, mask=ok, other=0.0) > 0.5
        n = (offs_m + 1).to(tl.float32)
        alpha = n * p * inv_scale * inv_norm
        coef_a = tl.where(tie, 1.0, alpha) / row_sum
        coef_b = tl.where(tie, 0.0, delta)
        coef_c = tl.where(tie, delta, alpha * du) / row_sum
    else:
        coef_a = 1.0 / row_sum
        coef_b = tl.zeros([BLOCK_M], tl.float32)
        coef_c = delta / row_sum
    tl.store(row + STAT_COEF_A * stat_stride, coef_a, mask=ok)
    tl.store(row + STAT_COEF_B * stat_stride, coef_b, mask=ok)
    tl.store(row + STAT_COEF_C * stat_stride, coef_c, mask=ok)


@triton.jit
def _load_row_stats(Stats, pid_bh, offs_m, stat_stride, T, REWEIGHT: tl.constexpr):
    """(nl, offset, inv_scale, inv_norm, a, b, c) of rows offs_m, filled so that rows >= T give zero
    weights and zero dS (LSSA: nl, offset, inv_scale, b unused, returned as 0 / 1)."""
    ok = offs_m < T
    row = Stats + pid_bh * T + offs_m
    inv_norm = tl.load(row + STAT_INV_NORM * stat_stride, mask=ok, other=0.0)
    coef_a = tl.load(row + STAT_COEF_A * stat_stride, mask=ok, other=0.0)
    coef_c = tl.load(row + STAT_COEF_C * stat_stride, mask=ok, other=0.0)
    if REWEIGHT:
        nl = tl.load(row + STAT_NL * stat_stride, mask=ok, other=0.0)
        offset = tl.load(row + STAT_OFFSET * stat_stride, mask=ok, other=0.0)
        inv_scale = tl.load(row + STAT_INV_SCALE * stat_stride, mask=ok, other=1.0)
        coef_b = tl.load(row + STAT_COEF_B * stat_stride, mask=ok, other=0.0)
    else:
        nl = tl.zeros_like(inv_norm)
        offset = tl.zeros_like(inv_norm)
        inv_scale = tl.zeros_like(inv_norm) + 1.0
        coef_b = tl.zeros_like(inv_norm)
    return nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c


@triton.jit
def _dkdv_block(
    dk_acc,
    dv_acc,
    k,
    v,
    rk,
    offs_n,
    start_m,
    Q,
    DO,
    RQ,
    Stats,
    sq_t,
    sdo_t,
    stat_stride,
    pid_bh,
    T,
    log_d,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    P_INT: tl.constexpr,
    REWEIGHT: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Add one block of query rows' contributions to a key block's d(k^) and dv (key-major tiles)."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = load_rows(Q, offs_m, sq_t, offs_d, T)
    do = load_rows(DO, offs_m, sdo_t, offs_d, T)
    rq = tl.load(RQ + pid_bh * T + offs_m, mask=offs_m < T, other=0.0)
    nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c = _load_row_stats(
        Stats, pid_bh, offs_m, stat_stride, T, REWEIGHT
    )
    c = log_d * tl.log((offs_m + 1).to(tl.float32))
    s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * rk[:, None] * (c * rq)[None, :]
    dw_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
    w_t, ds_t = weights_and_dscores(
        s_t,
        dw_t,
        nl[None, :],
        offset[None, :],
        inv_scale[None, :],
        inv_norm[None, :],
        coef_a[None, :],
        coef_b[None, :],
        coef_c[None, :],
        p,
        P_INT,
        REWEIGHT,
    )
    if CAUSAL:
        keep = offs_n[:, None] <= offs_m[None, :]
        w_t = tl.where(keep, w_t, 0.0)
        ds_t = tl.where(keep, ds_t, 0.0)
    dv_acc = tl.dot(w_t.to(do.dtype), do, dv_acc, input_precision=PRECISION)
    if Q.dtype.element_ty == tl.float16:  # scale q to unit rows: rq can exceed float16's range
        qn = (q.to(tl.float32) * rq[:, None]).to(q.dtype)
        dk_acc = tl.dot((ds_t * c[None, :]).to(q.dtype), qn, dk_acc, input_precision=PRECISION)
    else:
        dk_acc = tl.dot((ds_t * (c * rq)[None, :]).to(q.dtype), q, dk_acc, input_precision=PRECISION)
    return dk_acc, dv_acc


@triton.jit
def _bwd_dkdv_kernel(
    Q,
    K,
    V,
    DO,
    DK,
    DV,
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
    sdo_b,
    sdo_h,
    sdo_t,
    sdk_b,
    sdk_h,
    sdk_t,
    sdv_b,
    sdv_h,
    sdv_t,
    stat_stride,
    H,
    T,
    log_d,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    P_INT: tl.constexpr,
    REWEIGHT: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """dk, dv of one block of BLOCK_N keys, looping over the query blocks at or after it."""
    log_d, p = tl.cast(log_d, tl.float32), tl.cast(p, tl.float32)  # torch.compile may pass float64
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    Q += b * sq_b + h * sq_h
    DO += b * sdo_b + h * sdo_h
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k = load_rows(K + b * sk_b + h * sk_h, offs_n, sk_t, offs_d, T)
    v = load_rows(V + b * sv_b + h * sv_h, offs_n, sv_t, offs_d, T)
    rk = tl.load(RK + pid_bh * T + offs_n, mask=offs_n < T, other=0.0)
    dk_acc = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv_acc = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    # query blocks overlapping this key block need the causal mask; the ones after it do not
    lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    mid = tl.cdiv((pid_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M
    for start_m in range(lo, tl.minimum(mid, T), BLOCK_M):
        dk_acc, dv_acc = _dkdv_block(
            dk_acc,
            dv_acc,
            k,
            v,
            rk,
            offs_n,
            start_m,
            Q,
            DO,
            RQ,
            Stats,
            sq_t,
            sdo_t,
            stat_stride,
            pid_bh,
            T,
            log_d,
            p,
            HEAD_DIM,
            BLOCK_M,
            P_INT,
            REWEIGHT,
            True,
            PRECISION,
        )
    for start_m in range(mid, T, BLOCK_M):
        dk_acc, dv_acc = _dkdv_block(
            dk_acc,
            dv_acc,
            k,
            v,
            rk,
            offs_n,
            start_m,
            Q,
            DO,
            RQ,
            Stats,
            sq_t,
            sdo_t,
            stat_stride,
            pid_bh,
            T,
            log_d,
            p,
            HEAD_DIM,
            BLOCK_M,
            P_INT,
            REWEIGHT,
            False,
            PRECISION,
        )
    # through k^ = k rk: dk = rk dk^ - k rk^3 (k . dk^), without the projection where |k| was clamped
    kf = k.to(tl.float32)
    kk = tl.sum(kf * kf, 1)
    proj = tl.where(kk > NORM_EPS_SQ, rk * rk * rk * tl.sum(kf * dk_acc, 1), 0.0)
    dk = rk[:, None] * dk_acc - kf * proj[:, None]
    ok = (offs_n < T)[:, None]
    tl.store(
        DK + b * sdk_b + h * sdk_h + offs_n[:, None] * sdk_t + offs_d[None, :],
        dk.to(DK.dtype.element_ty),
        mask=ok,
    )
    tl.store(
        DV + b * sdv_b + h * sdv_h + offs_n[:, None] * sdv_t + offs_d[None, :],
        dv_acc.to(DV.dtype.element_ty),
        mask=ok,
    )


@triton.jit
def _dq_block(
    dq_acc,
    q,
    do,
    row_scale,
    row_stats,
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
    REWEIGHT: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Add one block of keys' contribution to a query block's sum_j dS_ij k^_j (query-major tiles)."""
    nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c = row_stats
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k = load_rows(K, offs_n, sk_t, offs_d, T)
    v = load_rows(V, offs_n, sv_t, offs_d, T)
    rk = tl.load(RK + pid_bh * T + offs_n, mask=offs_n < T, other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * row_scale[:, None] * rk[None, :]
    dw = tl.dot(do, tl.trans(v), input_precision=PRECISION)
    _, ds = weights_and_dscores(
        s,
        dw,
        nl[:, None],
        offset[:, None],
        inv_scale[:, None],
        inv_norm[:, None],
        coef_a[:, None],
        coef_b[:, None],
        coef_c[:, None],
        p,
        P_INT,
        REWEIGHT,
    )
    if CAUSAL:
        ds = tl.where(offs_n[None, :] <= offs_m[:, None], ds, 0.0)
    if K.dtype.element_ty == tl.float16:  # scale k to unit rows: rk can exceed float16's range
        kn = (k.to(tl.float32) * rk[:, None]).to(k.dtype)
        return tl.dot(ds.to(k.dtype), kn, dq_acc, input_precision=PRECISION)
    return tl.dot((ds * rk[None, :]).to(k.dtype), k, dq_acc, input_precision=PRECISION)


@triton.jit
def _bwd_dq_kernel(
    Q,
    K,
    V,
    DO,
    DQ,
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
    sdo_b,
    sdo_h,
    sdo_t,
    sdq_b,
    sdq_h,
    sdq_t,
    stat_stride,
    H,
    T,
    log_d,
    p,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    P_INT: tl.constexpr,
    REWEIGHT: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """dq of one block of BLOCK_M query rows, looping over the key blocks up to the diagonal."""
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
    do = load_rows(DO + b * sdo_b + h * sdo_h, offs_m, sdo_t, offs_d, T)
    rq = tl.load(RQ + pid_bh * T + offs_m, mask=offs_m < T, other=0.0)
    row_stats = _load_row_stats(Stats, pid_bh, offs_m, stat_stride, T, REWEIGHT)
    c = log_d * tl.log((offs_m + 1).to(tl.float32))
    row_scale = c * rq
    dq_acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    lo = (pid_m * BLOCK_M // BLOCK_N) * BLOCK_N
    hi = tl.minimum((pid_m + 1) * BLOCK_M, T)
    for start_n in range(0, lo, BLOCK_N):
        dq_acc = _dq_block(
            dq_acc,
            q,
            do,
            row_scale,
            row_stats,
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
            REWEIGHT,
            False,
            PRECISION,
        )
    for start_n in range(lo, hi, BLOCK_N):
        dq_acc = _dq_block(
            dq_acc,
            q,
            do,
            row_scale,
            row_stats,
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
            REWEIGHT,
            True,
            PRECISION,
        )
    # d(q^) = c_i sum_j dS_ij k^_j; through q^ = q rq: dq = rq dq^ - q rq^3 (q . dq^)
    dqn = dq_acc * c[:, None]
    qf = q.to(tl.float32)
    qq = tl.sum(qf * qf, 1)
    proj = tl.where(qq > NORM_EPS_SQ, rq * rq * rq * tl.sum(qf * dqn, 1), 0.0)
    dq = rq[:, None] * dqn - qf * proj[:, None]
    tl.store(
        DQ + b * sdq_b + h * sdq_h + offs_m[:, None] * sdq_t + offs_d[None, :],
        dq.to(DQ.dtype.element_ty),
        mask=(offs_m < T)[:, None],
    )


_bwd_dkdv_tuned = autotuned(_bwd_dkdv_kernel, DKDV_CANDIDATES)
_bwd_dq_tuned = autotuned(_bwd_dq_kernel, DQ_CANDIDATES)

COEF_BLOCK = 64  # rows per program of the coefficient pre-pass (16 under the interpreter)


def attention_backward(
    do: torch.Tensor,
    q,
    k,
    v,
    out,
    u,
    rq,
    rk,
    stats,
    p: float,
    reweight: bool,
    blocks: KernelBlocks | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of LSSA (reweight False) or LSSAR (True) from the saved forward state; all (B, H, T, D).

    stats is the (N_STATS, B, H, T) float32 row-statistics tensor of the forward (the coefficient rows
    are written here); u the LSSAR forward's U (None for LSSA).
    """
    B, H, T, D = q.shape
    BH = B * H
    do = rows_last_contiguous(do)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    stat_stride = stats.stride(0)
    P_INT = integer_power(p) if reweight else 1
    log_d = math.log(D)
    precision = dot_precision(q.dtype)
    u_ = u if u is not None else out
    coef_block = 16 if interpreter_enabled() else COEF_BLOCK
    _bwd_coefficients_kernel[(triton.cdiv(T, coef_block), BH)](
        out,
        do,
        u_,
        stats,
        *head_strides(out),
        *head_strides(do),
        *head_strides(u_),
        stat_stride,
        H,
        T,
        p,
        HEAD_DIM=D,
        BLOCK_M=coef_block,
        REWEIGHT=reweight,
        num_warps=4 if D <= 64 else 8,
    )
    blocks = blocks or KernelBlocks()
    common = dict(HEAD_DIM=D, P_INT=P_INT, REWEIGHT=reweight, PRECISION=precision)
    launch(
        _bwd_dkdv_kernel,
        _bwd_dkdv_tuned,
        blocks.dkdv,
        T,
        BH,
        (
            q,
            k,
            v,
            do,
            dk,
            dv,
            rq,
            rk,
            stats,
            *head_strides(q),
            *head_strides(k),
            *head_strides(v),
            *head_strides(do),
            *head_strides(dk),
            *head_strides(dv),
            stat_stride,
            H,
            T,
            log_d,
            p,
        ),
        KEY_MAJOR=True,
        **common,
    )
    launch(
        _bwd_dq_kernel,
        _bwd_dq_tuned,
        blocks.dq,
        T,
        BH,
        (
            q,
            k,
            v,
            do,
            dq,
            rq,
            rk,
            stats,
            *head_strides(q),
            *head_strides(k),
            *head_strides(v),
            *head_strides(do),
            *head_strides(dq),
            stat_stride,
            H,
            T,
            log_d,
            p,
        ),
        **common,
    )
    return dq, dk, dv
