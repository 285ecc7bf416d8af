"""exp2, log2, softplus and a reciprocal from fused multiply-adds and integer operations only, in plain PyTorch.

On a GPU, ``exp2``, ``log2`` and ``1 / x`` run on the special-function unit (MUFU: 16 results per clock per
SM on Hopper, against 128 fused multiply-adds); LSSAR's kernels issue six of them per score in a training step.
These functions compute the same values on the FMA and integer pipes instead, as FlashAttention-4 does for
part of its exp: a range reduction that is exact, a short polynomial, and the exponent written into the
float's bits. ``orbitlaw.kernels.lssa.fma`` holds the same algorithms as
Triton device functions, which the kernels run on a chosen share of their scores; the functions here are
their plain reference (same operations, same constants) and what tests/test_fma_math.py measures against
float64. Whether that pays is counted from the compiled kernels by ``benchmarks/kernel_cost.py``: on sm_80
and sm_90 the kernels are bound by the FMA pipe already, so it does not (docs/benchmarks.md, "Attention").

  exp2_fma(x)    2^x: n = x rounded to a whole number by adding and subtracting 1.5 2^23 (the sum's low
                 bits are n), f = x - n in [-1/2, 1/2], 2^f by a polynomial in f, then n added to the exponent
                 bits. x is clamped to [-125.5, 127]: below, the result is 2^-125.5 (about 1.7e-38) instead of
                 a subnormal or 0, an absolute error under 1.7e-38.
  log2_fma(y)    log2(y) for y >= 2^-126 (smaller y are clamped there): y = 2^e m with m in [sqrt(1/2),
                 sqrt(2)) read from the bits, log2(m) = t P(t) with t = m - 1, and e made a float by the same
                 1.5 2^23 trick.

No step converts between integers and floats or rounds by instruction (F2I, I2F, FRND run at the special
function unit's rate on NVIDIA GPUs): only float adds, multiplies and fused multiply-adds, integer adds,
shifts, masks, comparisons and selects.
  rcp_fma(d)     1 / d for d in [1, 2] (the sigmoid's 1 / (1 + e^-|s|)): a linear first guess (error <= 1/17)
                 and three Newton steps r <- r + r (1 - d r).
  softplus_fma(s)  max(s, 0) + log1p(2^(-|s| log2 e)), the log1p by the kernels' existing polynomial.

The polynomials are fitted here, at import, to the relative error by Lawson's iteration (weighted least
squares converging to the minimax fit) on a dense grid in float64, at the lowest degree whose float32 error
stays below :data:`TARGET_REL_ERR`, a tenth of the kernels' 1e-5 tolerance against the float64 reference.
"""

from __future__ import annotations

import math

import numpy as np
import torch

TARGET_REL_ERR = 1e-6
"""The largest float32 relative error a polynomial path may add: a tenth of the kernels' 1e-5 tolerance."""
LOG2E = 1.0 / math.log(2.0)
SQRT2 = math.sqrt(2.0)
EXP2_LO, EXP2_HI = -125.5, 127.0
ROUNDER = 12582912.0  # 1.5 * 2^23: x + ROUNDER rounds x to a whole number n, held in the sum's low bits
ROUNDER_BITS = 0x4B400000  # its float32 bits: bits(n + ROUNDER) = ROUNDER_BITS + n for |n| < 2^22
LOG2_MIN = 2.0**-126  # the smallest normal float32
LOG2_T = (math.sqrt(0.5) - 1.0, SQRT2 - 1.0)  # t = m - 1 over m in [sqrt(1/2), sqrt(2))
RCP_SLOPE, RCP_INTERCEPT = -8.0 / 17.0, 24.0 / 17.0  # the minimax line for 1 / d on [1, 2]


def fit_relative(f, lo: float, hi: float, degree: int, iterations: int = 60, points: int = 4001) -> np.ndarray:
    """Coefficients c_0..c_degree (lowest first) of the polynomial nearest ``f`` on [lo, hi] in the largest
    relative error: Lawson's iteration, reweighting a least-squares fit by its own errors, in float64.
    ``f`` must not vanish on [lo, hi]."""
    x = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.linspace(0.0, np.pi, points))  # Chebyshev-spaced
    y = f(x)
    A = np.vander(x, degree + 1, increasing=True) / y[:, None]  # relative residuals: (A c - 1)
    w = np.full(points, 1.0 / points)
    coef = np.zeros(degree + 1)
    for _ in range(iterations):
        sw = np.sqrt(w)
        coef = np.linalg.lstsq(A * sw[:, None], sw, rcond=None)[0]
        err = np.abs(A @ coef - 1.0)
        w = w * err
        w = w / w.sum()
    return coef


def _exp2_coefficients(degree: int) -> np.ndarray:
    return fit_relative(np.exp2, -0.5, 0.5, degree)


def _log2_coefficients(degree: int) -> np.ndarray:
    """Of P with log2(1 + t) = t P(t) on t in LOG2_T (P's relative error is the product's)."""
    def ratio(t):
        safe = np.where(t == 0, 1.0, t)
        return np.where(t == 0, LOG2E, np.log2(1.0 + safe) / safe)

    return fit_relative(ratio, *LOG2_T, degree)


def horner(coef, x: torch.Tensor) -> torch.Tensor:
    """sum_k coef[k] x^k by Horner's rule, one multiply-add per degree (as the Triton device functions)."""
    acc = torch.full_like(x, float(coef[-1]))
    for c in coef[-2::-1]:
        acc = acc * x + float(c)
    return acc


def exp2_fma(x: torch.Tensor, coef=None) -> torch.Tensor:
    """2^x of a float32 tensor by range reduction and a polynomial (module doc); float32 out."""
    coef = EXP2_COEF if coef is None else coef
    x = x.to(torch.float32).clamp(EXP2_LO, EXP2_HI)
    j = x + ROUNDER  # float32: its low mantissa bits are n = round(x)
    n = j - ROUNDER
    poly = horner(coef, x - n)  # 2^f, f in [-1/2, 1/2]
    bits = poly.view(torch.int32) + (j.view(torch.int32) << 23)  # ROUNDER_BITS << 23 wraps to 0: adds n << 23
    return bits.view(torch.float32)


def log2_fma(y: torch.Tensor, coef=None) -> torch.Tensor:
    """log2(y) of a float32 tensor of positive values (clamped at 2^-126) from its bits and a polynomial."""
    coef = LOG2_COEF if coef is None else coef
    bits = y.to(torch.float32).clamp_min(LOG2_MIN).view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 127
    m = ((bits & 0x7FFFFF) | 0x3F800000).view(torch.float32)  # mantissa in [1, 2)
    big = m > SQRT2
    m = torch.where(big, m * 0.5, m)
    e = e + big.to(torch.int32)
    t = m - 1.0
    e_float = (e + ROUNDER_BITS).view(torch.float32) - ROUNDER  # e as a float, without a conversion
    return e_float + t * horner(coef, t)


def rcp_fma(d: torch.Tensor) -> torch.Tensor:
    """1 / d for float32 d in [1, 2]: first guess 24/17 - 8/17 d (relative error at most 1/17), then three
    Newton steps (errors 1/17^2, 1/17^4, 1/17^8: float32 rounding after the third)."""
    d = d.to(torch.float32)
    r = d * RCP_SLOPE + RCP_INTERCEPT
    for _ in range(3):
        r = r + r * (1.0 - d * r)
    return r


LOG1P_COEF = (0.0, 0.999999987, -0.499998508, 0.3332909895, -0.2494780806, 0.1965148909, -0.1525144539,
              0.1053322051, -0.05643496862, 0.019649142, -0.003214032094)
"""The kernels' log1p(t) on [0, 1] (``orbitlaw.kernels.lssa.tiles._log1p``), lowest power first."""


def softplus_fma(s: torch.Tensor) -> torch.Tensor:
    """softplus(s) = max(s, 0) + log1p(exp(-|s|)) with exp on the FMA path (float32)."""
    s = s.to(torch.float32)
    t = exp2_fma(-s.abs() * LOG2E)
    return s.clamp_min(0.0) + horner(LOG1P_COEF, t)


def sigmoid_fma(s: torch.Tensor) -> torch.Tensor:
    """sigmoid(s) as the backward kernels compute it, 1 / (1 + t) or t / (1 + t), t = exp(-|s|), on FMAs."""
    s = s.to(torch.float32)
    t = exp2_fma(-s.abs() * LOG2E)
    r = rcp_fma(1.0 + t)
    return torch.where(s >= 0, r, t * r)


def relative_error(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """|approx - exact| / |exact| in float64, elementwise."""
    return (approx.to(torch.float64) - exact).abs() / exact.abs()


def ulp_error(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Error in units in the last place of float32 at the exact value (float64 in, float64 out)."""
    ulp = torch.nextafter(exact.to(torch.float32), torch.tensor(math.inf)).to(torch.float64) - exact.to(torch.float32)
    return (approx.to(torch.float64) - exact).abs() / ulp.to(torch.float64).abs()


def _float32_max_rel_err(fn, coef, grid: torch.Tensor, exact: torch.Tensor) -> float:
    return float(relative_error(fn(grid, coef), exact).max())


def lowest_degree(kind: str, degrees=range(2, 12)) -> int:
    """The lowest polynomial degree of ``kind`` ("exp2" or "log2") whose float32 function stays within
    TARGET_REL_ERR of float64 on a dense grid of its input range."""
    if kind == "exp2":
        grid = torch.linspace(-30.0, 30.0, 200_001, dtype=torch.float32)
        exact = torch.exp2(grid.to(torch.float64))
        fit, fn = _exp2_coefficients, exp2_fma
    else:
        grid = torch.logspace(-37.0, 37.0, 200_001, dtype=torch.float32)
        exact = torch.log2(grid.to(torch.float64))
        keep = exact.abs() > 1e-3  # relative error of log2 near y = 1 is the polynomial's own (t P(t))
        grid, exact = grid[keep], exact[keep]
        fit, fn = _log2_coefficients, log2_fma
    for degree in degrees:
        if _float32_max_rel_err(fn, fit(degree), grid, exact) <= TARGET_REL_ERR:
            return degree
    raise RuntimeError(f"no degree in {list(degrees)} meets {TARGET_REL_ERR} for {kind}")


EXP2_DEGREE = 5
"""The lowest degree meeting TARGET_REL_ERR (tests/test_fma_math.py checks it against :func:`lowest_degree`)."""
LOG2_DEGREE = 7
EXP2_COEF = tuple(float(c) for c in _exp2_coefficients(EXP2_DEGREE))
LOG2_COEF = tuple(float(c) for c in _log2_coefficients(LOG2_DEGREE))
