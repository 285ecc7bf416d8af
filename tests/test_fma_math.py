"""exp2, log2, 1/d and softplus on fused multiply-adds (kernels/fma_math.py, kernels/lssa/fma.py) against float64.

Each function is measured over its whole input range in float32 (max relative error and ulp), and each Triton
device function is run under the interpreter against its plain PyTorch reference. The kernels at every poly
share are compared with the float64 attention reference in tests/test_kernels.py.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from orbitlaw.kernels import fma_math as fm
from orbitlaw.kernels.backend import interpreter_enabled, triton_available

needs_interpreter = pytest.mark.skipif(not (triton_available() and interpreter_enabled()),
                                       reason="needs triton under TRITON_INTERPRET=1")


def test_the_degrees_are_the_lowest_meeting_the_target():
    assert fm.lowest_degree("exp2") == fm.EXP2_DEGREE == len(fm.EXP2_COEF) - 1
    assert fm.lowest_degree("log2") == fm.LOG2_DEGREE == len(fm.LOG2_COEF) - 1
    # one degree less would not do: the choice is the lowest, not a comfortable one
    grid = torch.linspace(0.0, 1.0, 100_001)
    low = fm.exp2_fma(grid, fm._exp2_coefficients(fm.EXP2_DEGREE - 1))
    assert fm.relative_error(low, torch.exp2(grid.double())).max() > fm.TARGET_REL_ERR


def test_exp2_over_its_whole_range():
    x = torch.linspace(fm.EXP2_LO, fm.EXP2_HI, 2_000_001)
    exact = torch.exp2(x.double())
    assert fm.relative_error(fm.exp2_fma(x), exact).max() <= fm.TARGET_REL_ERR
    assert fm.ulp_error(fm.exp2_fma(x), exact).max() <= 4
    assert fm.exp2_fma(torch.tensor([-1000.0])).item() == pytest.approx(2.0**-125.5, rel=1e-6)  # clamped, normal
    assert fm.exp2_fma(torch.tensor([1000.0])).item() == pytest.approx(2.0**127, rel=1e-6)


def test_log2_over_its_whole_range():
    y = torch.cat([torch.logspace(-37.9, 38.5, 2_000_001), torch.linspace(0.5, 2.0, 200_001)])
    exact = torch.log2(y.double())
    got = fm.log2_fma(y)
    far = exact.abs() > 1e-3
    assert fm.relative_error(got[far], exact[far]).max() <= fm.TARGET_REL_ERR
    assert (got[~far].double() - exact[~far]).abs().max() <= 1e-9  # near y = 1: t P(t), no cancellation
    assert fm.log2_fma(torch.tensor([0.0, 1e-45])).tolist() == [-126.0, -126.0]  # clamped at 2^-126


def test_reciprocal_on_one_to_two():
    d = torch.linspace(1.0, 2.0, 1_000_001)
    assert fm.ulp_error(fm.rcp_fma(d), 1.0 / d.double()).max() <= 2


def test_softplus_and_sigmoid_match_float64_of_the_same_argument():
    """The polynomial alone: against float64 of the float32 argument 2^(-|s| log2 e) as the kernels round it
    (the MUFU path rounds it the same way), and end to end against float64 softplus for |s| <= 20."""
    s = torch.linspace(-60.0, 60.0, 1_200_001)
    x = (-s.abs() * fm.LOG2E).double()  # the kernels' float32 argument of exp2
    t = torch.exp2(x)
    assert fm.relative_error(fm.softplus_fma(s), s.double().clamp_min(0) + torch.log1p(t)).max() <= 1e-6
    sig = torch.where(s.double() >= 0, 1 / (1 + t), t / (1 + t))
    assert fm.relative_error(fm.sigmoid_fma(s), sig).max() <= 1e-6
    near = s.abs() <= 20
    assert fm.relative_error(fm.softplus_fma(s[near]), F.softplus(s[near].double())).max() <= 2e-6


def test_fit_equioscillates():
    """Lawson's iteration converges to the minimax fit, whose relative error alternates in sign with equal
    magnitude at degree + 2 points (Chebyshev's theorem); it is no worse than the first, unweighted fit."""
    import numpy as np

    x = np.linspace(0.0, 1.0, 200_001)
    degree = 4
    err = lambda c: np.polyval(c[::-1], x) / np.exp2(x) - 1  # noqa: E731
    lawson = err(fm.fit_relative(np.exp2, 0.0, 1.0, degree))
    assert np.abs(lawson).max() <= np.abs(err(fm.fit_relative(np.exp2, 0.0, 1.0, degree, iterations=1))).max()
    inner = (np.abs(lawson[1:-1]) >= np.abs(lawson[:-2])) & (np.abs(lawson[1:-1]) >= np.abs(lawson[2:]))
    extrema = np.concatenate([lawson[:1], lawson[1:-1][inner], lawson[-1:]])
    assert len(extrema) == degree + 2 and np.all(np.sign(extrema[1:]) != np.sign(extrema[:-1]))
    assert np.abs(extrema).min() >= 0.95 * np.abs(extrema).max()


def _apply(fn_name: str, x: torch.Tensor) -> torch.Tensor:
    """Run device function fn_name of kernels/lssa/fma.py elementwise on a (16, 64) float32 tile."""
    import triton
    import triton.language as tl

    from orbitlaw.kernels.lssa import fma

    fn = getattr(fma, fn_name)

    @triton.jit
    def kernel(X, Y, FN: tl.constexpr, N: tl.constexpr):
        offs = tl.arange(0, 16)[:, None] * N + tl.arange(0, N)[None, :]
        tl.store(Y + offs, FN(tl.load(X + offs)))

    y = torch.empty_like(x)
    kernel[(1,)](x, y, fn, x.shape[1])
    return y


@needs_interpreter
@pytest.mark.parametrize("name,ref,lo,hi", [("exp2_fma", fm.exp2_fma, -130.0, 127.0),
                                              ("log2_fma", fm.log2_fma, 1e-40, 3e38),
                                              ("rcp_fma", fm.rcp_fma, 1.0, 2.0)])
def test_triton_device_functions_equal_their_reference(name, ref, lo, hi):
    g = torch.Generator().manual_seed(0)
    if name == "log2_fma":
        x = torch.exp(torch.empty(16, 64).uniform_(math.log(lo), math.log(hi), generator=g))
    else:
        x = torch.empty(16, 64).uniform_(lo, hi, generator=g)
    got, want = _apply(name, x), ref(x)
    assert fm.ulp_error(got, want.double()).max() <= 1  # the same operations; FMA contraction may differ by 1 ulp


@needs_interpreter
@pytest.mark.parametrize("quarters", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("rows,cols", [(16, 32), (8, 64)])
def test_mixed_gives_the_fma_path_to_quarters_of_the_columns(quarters, rows, cols):
    """Element (i, j) of a tile comes back in place, through the FMA function when j % 4 < QUARTERS and the
    MUFU one otherwise (distinct values in, so a reordering would show)."""
    import triton
    import triton.language as tl

    from orbitlaw.kernels.lssa.fma import mixed

    @triton.jit
    def plus(x, arg):
        return x + arg

    @triton.jit
    def minus(x, arg):
        return -x

    @triton.jit
    def kernel(X, Y, MIX: tl.constexpr, A: tl.constexpr, B: tl.constexpr, Q: tl.constexpr, R: tl.constexpr,
               C: tl.constexpr):
        offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
        tl.store(Y + offs, MIX(tl.load(X + offs), 1000.0, A, B, Q))

    x = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols)
    y = torch.empty_like(x)
    kernel[(1,)](x, y, mixed, plus, minus, quarters, rows, cols)
    assert torch.equal(y, torch.where(torch.arange(cols) % 4 < quarters, x + 1000.0, -x))
