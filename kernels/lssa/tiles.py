"""Triton device helpers shared by the fused LSSA / LSSAR forward (``forward.py``) and backward
(``backward.py``): the layout of the saved row statistics, element-wise maths on score tiles, tile loads,
which key blocks a query block visits, and the backward through the unit-norm rows.

Tiles: a query block is BLOCK_M rows, a key block BLOCK_N keys; q, k, v, dO tiles are (rows, HEAD_DIM),
score tiles (BLOCK_M, BLOCK_N) (query-major) or (BLOCK_N, BLOCK_M) (key-major, in the dk / dv kernel).
Notation as in ``backward.py``: s the scores S_ij, e = softplus(s), x = n_i A_ij - O_i, y = relu(x) / M_i.
POLY (a compile-time 0..4) is the share, in quarters of a tile, of the exp, reciprocal and real power computed
on the FMA pipes instead of the special-function unit (``fma.py``); 0 is the kernels as they were before it.
"""

from __future__ import annotations

import triton
import triton.language as tl

from orbitlaw.kernels.lssa.fma import exp_neg_fma, exp_neg_mufu, mixed, power_fma, power_mufu, rcp_fma_2, rcp_mufu
from orbitlaw.kernels.reference import NORM_EPS

# Row statistics: one float32 tensor of shape (N_STATS, B, H, T); indices as compile-time constants.
STAT_SUM = tl.constexpr(0)  # L_i, the LSSA row sum of softplus(S)
STAT_INV_SCALE = tl.constexpr(1)  # 1 / M_i (LSSAR; 1 on tie rows)
STAT_INV_NORM = tl.constexpr(2)  # 1 / weight normaliser: 1 / Z_i (LSSAR; 1 / n_i on tie rows), 1 / L_i (LSSA)
STAT_TIE = tl.constexpr(3)  # 1.0 on LSSAR rows that keep their LSSA weights, else 0.0
STAT_COEF_A = tl.constexpr(4)  # backward coefficients a_i, b_i, c_i (written by the backward's pre-pass)
STAT_COEF_B = tl.constexpr(5)
STAT_COEF_C = tl.constexpr(6)
STAT_NL = tl.constexpr(7)  # n_i / L_i (LSSAR; 0 on tie rows)
STAT_OFFSET = tl.constexpr(8)  # O_i (LSSAR; -1 on tie rows)
N_STATS = 9
NORM_EPS_C = tl.constexpr(NORM_EPS)  # the reference's norm clamp, as a kernel constant
NORM_EPS_SQ = tl.constexpr(NORM_EPS * NORM_EPS)  # |x|^2 below this: the norm was clamped


@triton.jit
def _log1p(t):
    """log(1 + t) for t in [0, 1] as t times a degree-9 polynomial (least-squares fit of log(1 + t) / t).

    Relative error below 2e-7 in float32 (also as t -> 0), and only fused multiply-adds: cheaper on a GPU
    than log (a polynomial with range reduction there) and exact enough without log1p.
    """
    poly = t * -0.003214032094 + 0.019649142
    poly = poly * t - 0.05643496862
    poly = poly * t + 0.1053322051
    poly = poly * t - 0.1525144539
    poly = poly * t + 0.1965148909
    poly = poly * t - 0.2494780806
    poly = poly * t + 0.3332909895
    poly = poly * t - 0.499998508
    poly = poly * t + 0.999999987
    return poly * t


@triton.jit
def softplus(s, POLY: tl.constexpr):
    """softplus(s) = max(s, 0) + log(1 + exp(-|s|)), stable for any s; POLY quarters of the exp on FMAs."""
    return tl.maximum(s, 0.0) + _log1p(mixed(tl.abs(s), 0.0, exp_neg_fma, exp_neg_mufu, POLY))


@triton.jit
def softplus_and_sigmoid(s, POLY: tl.constexpr):
    """(softplus(s), sigmoid(s)); sigmoid is softplus' derivative, both stable for any s (POLY: as softplus,
    for the exp and the reciprocal of 1 + exp(-|s|) in [1, 2])."""
    t = mixed(tl.abs(s), 0.0, exp_neg_fma, exp_neg_mufu, POLY)
    r = mixed(1.0 + t, 0.0, rcp_fma_2, rcp_mufu, POLY)
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
def _power_minus_one(y, p, P_INT: tl.constexpr, POLY: tl.constexpr):
    """y**(p - 1) for y in [0, 1]; y^p is then this times y.

    P_INT >= 1: the integer p, by repeated squaring (no pow), exact 0 at y = 0 for p >= 2; P_INT == 0:
    real p, by exp2 and log2 (POLY quarters of them on FMAs; the caller masks y = 0 there, and for p = 1).
    """
    if P_INT == 1:
        return tl.full(y.shape, 1.0, tl.float32)
    elif P_INT > 1:
        return _int_power(y, P_INT - 1)
    else:
        return mixed(y, p - 1.0, power_fma, power_mufu, POLY)


@triton.jit
def reweighted(e, nl, offset, inv_scale, p, P_INT: tl.constexpr, POLY: tl.constexpr):
    """LSSAR's unnormalised weights of a softplus tile e: (R = g y, g = y^(p-1) [x > 0]).

    Row parameters nl = n_i / L_i, offset = O_i, inv_scale = 1 / M_i (tie rows encoded in nl and offset,
    see ``forward.py``) come broadcast to the tile's layout: [:, None] query-major, [None, :] key-major.
    """
    x = e * nl - offset
    y = tl.maximum(x, 0.0) * inv_scale
    g = _power_minus_one(y, p, P_INT, POLY)
    if P_INT < 2:
        g = tl.where(x > 0, g, 0.0)
    return g * y, g


@triton.jit
def weights_and_dscores(s, dw, nl, offset, inv_scale, inv_norm, coef_a, coef_b, coef_c, p,
                        P_INT: tl.constexpr, REWEIGHT: tl.constexpr, POLY: tl.constexpr):
    """Normalised weights W and score gradients dS of a score tile s, with dW = dO . v on the same tile.

    Row quantities (as :func:`reweighted`, and the backward coefficients a, b, c) come broadcast to the
    tile's layout. Causal masking is left to the caller.
    """
    e, sig = softplus_and_sigmoid(s, POLY)
    if REWEIGHT:
        r, g = reweighted(e, nl, offset, inv_scale, p, P_INT, POLY)
        w = r * inv_norm
        ds = sig * (coef_a * g * (dw - coef_b) - coef_c)
    else:
        w = e * inv_norm
        ds = sig * (coef_a * dw - coef_c)
    return w, ds


@triton.jit
def batch_head(H):
    """(bh, b, h) of this program, whose grid axis 1 runs over B * H: b = bh // H, h = bh % H (int64, for
    pointer offsets)."""
    pid_bh = tl.program_id(1)
    return pid_bh, (pid_bh // H).to(tl.int64), (pid_bh % H).to(tl.int64)


@triton.jit
def load_rows(base, offs, stride, offs_d, T):
    """Rows offs (zero past T) of a (T, HEAD_DIM) slab with row stride ``stride``: a (len(offs), HEAD_DIM) tile."""
    return tl.load(base + offs[:, None] * stride + offs_d[None, :], mask=(offs < T)[:, None], other=0.0)


@triton.jit
def key_blocks(start_m, T, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    """(lo, hi): the keys that query block start_m .. start_m + BLOCK_M visits in one stage, in steps of
    BLOCK_N: MASK False the key blocks wholly before its diagonal (no causal mask needed), MASK True the
    blocks that overlap the diagonal (masked), up to its last row."""
    diagonal = (start_m // BLOCK_N) * BLOCK_N
    if MASK:
        lo = diagonal
        hi = tl.minimum(start_m + BLOCK_M, T)
    else:
        lo = 0
        hi = diagonal
    return lo, hi


@triton.jit
def unit_rows_backward(x, rx, dxn):
    """Gradient through x^ = x rx (rx = 1 / max(|x|, eps)): rx dx^ - x rx^3 (x . dx^), no projection where
    the norm was clamped. x (rows, HEAD_DIM) in its dtype, rx (rows,), dxn = dL/dx^ (rows, HEAD_DIM) float32."""
    xf = x.to(tl.float32)
    xx = tl.sum(xf * xf, 1)
    proj = tl.where(xx > NORM_EPS_SQ, rx * rx * rx * tl.sum(xf * dxn, 1), 0.0)
    return rx[:, None] * dxn - xf * proj[:, None]
