"""Triton device functions for exp2, log2 and a reciprocal on the FMA and integer pipes, and the split of a
tile between them and the special-function unit (MUFU).

The algorithms and constants are those of ``orbitlaw.kernels.fma_math`` (the plain PyTorch reference,
fitted and measured there): exp2 by rounding with 1.5 2^23, a degree-5 polynomial and the exponent added to
the bits; log2 from the bits and a degree-7 polynomial; 1 / d on [1, 2] by a linear guess and three Newton
steps. None converts between integers and floats (F2I and I2F run at the special-function unit's rate).

``mixed(x, arg, fma_fn, mufu_fn, QUARTERS)`` applies ``fma_fn(x, arg)`` to QUARTERS / 4 of a tile's elements
and ``mufu_fn(x, arg)`` to the rest (QUARTERS a compile-time 0..4; ``arg`` a scalar or a tile broadcasting
with x's parts, unused by some functions): the tile's last dim is split four ways by ``tl.reshape`` and
``tl.split`` (columns j with j % 4 in the chosen set), each part is computed by its
function, and the parts are joined back. Within a thread the two kinds of instructions then interleave, so
both pipes work at once. QUARTERS 0 is the MUFU function alone, the same code as before the split existed.
The tile's last dim must be a multiple of 4 (the kernels' blocks are at least 16).
"""

from __future__ import annotations

import triton
import triton.language as tl

from orbitlaw.kernels import fma_math as _m

_E = [tl.constexpr(c) for c in _m.EXP2_COEF]
assert len(_E) == 6, "exp2_fma is written for a degree-5 polynomial"
E0, E1, E2, E3, E4, E5 = _E
_L = [tl.constexpr(c) for c in _m.LOG2_COEF]
assert len(_L) == 8, "log2_fma is written for a degree-7 polynomial"
L0, L1, L2, L3, L4, L5, L6, L7 = _L
EXP2_LO = tl.constexpr(_m.EXP2_LO)
EXP2_HI = tl.constexpr(_m.EXP2_HI)
LOG2_MIN = tl.constexpr(_m.LOG2_MIN)
SQRT2 = tl.constexpr(_m.SQRT2)
ROUNDER = tl.constexpr(_m.ROUNDER)
ROUNDER_BITS = tl.constexpr(_m.ROUNDER_BITS)
LOG2E = tl.constexpr(_m.LOG2E)
RCP_SLOPE = tl.constexpr(_m.RCP_SLOPE)
RCP_INTERCEPT = tl.constexpr(_m.RCP_INTERCEPT)


@triton.jit
def exp2_fma(x):
    """2^x (float32) with no MUFU instruction: x clamped to [-125.5, 127], n = round(x) by adding 1.5 2^23,
    2^(x - n) by a polynomial, n added to the exponent bits."""
    x = tl.clamp(x, EXP2_LO, EXP2_HI, propagate_nan=tl.PropagateNan.ALL)  # NaN stays NaN, as on the MUFU path
    j = x + ROUNDER  # its low mantissa bits are n = round(x)
    f = x - (j - ROUNDER)
    poly = f * E5 + E4
    poly = poly * f + E3
    poly = poly * f + E2
    poly = poly * f + E1
    poly = poly * f + E0
    bits = poly.to(tl.int32, bitcast=True) + (j.to(tl.int32, bitcast=True) << 23)  # ROUNDER_BITS << 23 is 0
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def log2_fma(y):
    """log2(y) (float32) of y > 0 (clamped at 2^-126) with no MUFU instruction: exponent and mantissa from
    the bits, the mantissa centred on 1, log2(1 + t) = t P(t)."""
    bits = tl.maximum(y, LOG2_MIN, propagate_nan=tl.PropagateNan.ALL).to(tl.int32, bitcast=True)
    e = ((bits >> 23) & 0xFF) - 127
    m = ((bits & 0x7FFFFF) | 0x3F800000).to(tl.float32, bitcast=True)
    big = m > SQRT2
    m = tl.where(big, m * 0.5, m)
    e = e + big.to(tl.int32)
    t = m - 1.0
    e_float = (e + ROUNDER_BITS).to(tl.float32, bitcast=True) - ROUNDER  # e as a float, with no conversion
    poly = t * L7 + L6
    poly = poly * t + L5
    poly = poly * t + L4
    poly = poly * t + L3
    poly = poly * t + L2
    poly = poly * t + L1
    poly = poly * t + L0
    return e_float + t * poly


@triton.jit
def rcp_fma(d):
    """1 / d (float32) for d in [1, 2] with no MUFU instruction: a linear guess and three Newton steps."""
    r = d * RCP_SLOPE + RCP_INTERCEPT
    r = r + r * (1.0 - d * r)
    r = r + r * (1.0 - d * r)
    r = r + r * (1.0 - d * r)
    return r


@triton.jit
def exp_neg_fma(a, unused):
    """exp(-a) for a >= 0 (float32) on the FMA path, as tl.exp computes it: 2^(-a log2 e)."""
    return exp2_fma(-a * LOG2E)


@triton.jit
def exp_neg_mufu(a, unused):
    """exp(-a) on the special-function unit (tl.exp: ex2 of -a log2 e), the kernels' path before the split."""
    return tl.exp(-a)


@triton.jit
def rcp_fma_2(d, unused):
    """1 / d for d in [1, 2] on the FMA path (:func:`rcp_fma`)."""
    return rcp_fma(d)


@triton.jit
def rcp_mufu(d, unused):
    """1 / d by division (the compiler's approximate reciprocal on the special-function unit)."""
    return 1.0 / d


@triton.jit
def power_fma(y, exponent):
    """y**exponent for y > 0 (clamped at 2^-126) by 2^(exponent log2 y) on the FMA path."""
    return exp2_fma(exponent * log2_fma(y))


@triton.jit
def power_mufu(y, exponent):
    """y**exponent for y > 0 by the special-function unit's exp2 and log2, the kernels' path before the split
    (y clamped at 1e-38)."""
    return tl.exp2(exponent * tl.log2(tl.maximum(y, 1e-38)))


@triton.jit
def mixed(x, arg, fma_fn: tl.constexpr, mufu_fn: tl.constexpr, QUARTERS: tl.constexpr):
    """fma_fn(., arg) on QUARTERS / 4 of the elements of the 2-d tile x, mufu_fn(., arg) on the others
    (module doc)."""
    if QUARTERS == 0:
        return mufu_fn(x, arg)
    elif QUARTERS == 4:
        return fma_fn(x, arg)
    else:
        ROWS: tl.constexpr = x.shape[0]
        COLS: tl.constexpr = x.shape[1]
        half0, half1 = tl.split(tl.reshape(x, (ROWS, COLS // 4, 2, 2)))  # j % 2 == 0, 1
        x0, x1 = tl.split(half0)  # columns j % 4 == 0, 2
        x2, x3 = tl.split(half1)  # columns j % 4 == 1, 3
        y0 = fma_fn(x0, arg)
        y3 = mufu_fn(x3, arg)
        if QUARTERS >= 2:
            y2 = fma_fn(x2, arg)
        else:
            y2 = mufu_fn(x2, arg)
        if QUARTERS >= 3:
            y1 = fma_fn(x1, arg)
        else:
            y1 = mufu_fn(x1, arg)
        return tl.reshape(tl.join(tl.join(y0, y1), tl.join(y2, y3)), (ROWS, COLS))
