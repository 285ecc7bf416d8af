"""Tests of kernels/: the PyTorch references against naive per-row loops straight from the formulas
(docs/protocol.md, "Attentions"), and the Triton kernels (forward and q, k, v gradients) against the references.

Triton runs on the CPU under TRITON_INTERPRET=1 (set by conftest.py), in float32 on small shapes, with
16-wide blocks so that T not a multiple of the block is exercised; with ORBITLAW_TEST_CUDA=1 on a GPU
it runs there. Error measure: max |kernel - reference| / max |reference| over the whole tensor, with the
reference computed in float64 from the same float32 inputs; the bound is 1e-5 (float16: 5e-3; the
interpreter cannot run bfloat16). Inputs stay away from rows whose LSSA weights nearly (not exactly)
tie: LSSAR at p = 15 is ill-conditioned there in any float32 implementation. tests/test_kernels_compile.py
checks that the kernels also compile for a GPU.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from orbitlaw import kernels
from orbitlaw.kernels import laser_attention, lssa_reference, lssar_reference
from orbitlaw.kernels.backend import interpreter_enabled, resolve_backend, triton_available

F64 = torch.float64
REL_TOL = 1e-5

ON_CUDA = os.environ.get("ORBITLAW_TEST_CUDA") == "1" and torch.cuda.is_available()
TRITON_DEVICE = "cuda" if ON_CUDA else "cpu"
needs_triton = pytest.mark.skipif(
    not (triton_available() and (ON_CUDA or interpreter_enabled())),
    reason="triton is not importable, or neither CUDA nor TRITON_INTERPRET=1 is available",
)


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max |ref| (float64)."""
    x, ref = x.detach().to(F64).cpu(), ref.detach().to(F64).cpu()
    return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def randn(*shape, seed=0, dtype=F64, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def qkv(B, H, T, D, seed=0, dtype=F64, device="cpu"):
    return tuple(randn(B, H, T, D, seed=seed + i, dtype=dtype, device=device) for i in range(3))


# ----------------------------------------------------------------------------------------------------------
# naive implementations: explicit per-row loops, straight from the formulas, float64
# ----------------------------------------------------------------------------------------------------------
def naive_attention(q, k, v, kind: str, p: float = 1.0, window: int | None = None) -> torch.Tensor:
    """LSSA ('lssa') or LSSAR ('lssar') one query row at a time (differentiable, float64)."""
    B, H, T, D = q.shape
    rows = []
    for b in range(B):
        for h in range(H):
            for i0 in range(T):
                first = 0 if window is None else max(0, i0 - window + 1)
                n = i0 + 1 - first  # keys attended, = i without a window
                q_hat = q[b, h, i0] / q[b, h, i0].norm()
                k_hat = k[b, h, first : i0 + 1] / k[b, h, first : i0 + 1].norm(dim=-1, keepdim=True)
                s = math.log(D) * math.log(n) * (k_hat @ q_hat)
                a = F.softplus(s) / F.softplus(s).sum()
                w = a
                if kind == "lssar":
                    offset = 0.0 if n <= 3 else 1.0
                    r = torch.relu(n * a - offset) ** p
                    ties = (a.max() - a.min()) <= 1e-12 * a.max()
                    if not ties and r.sum() > 0:
                        w = r / r.sum()
                rows.append(w @ v[b, h, first : i0 + 1])
    return torch.stack(rows).reshape(B, H, T, D)


def naive_laser(q, k, v) -> torch.Tensor:
    """log(softmax(q k^T / sqrt(d)) @ exp(V)) without any shift (float64, moderate V only)."""
    T, D = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
    return torch.log(torch.softmax(s, dim=-1) @ torch.exp(v))


def naive_laser_logspace(q, k, v) -> torch.Tensor:
    """The same in log space, row by row: log sum_j a_ij exp(v_j) = logsumexp_j(log a_ij + v_j) (any V)."""
    T, D = q.shape[-2], q.shape[-1]
    rows = []
    for i in range(T):
        log_a = torch.log_softmax(q[..., i:i + 1, :] @ k[..., : i + 1, :].transpose(-1, -2) / math.sqrt(D), -1)
        rows.append(torch.logsumexp(log_a.transpose(-1, -2) + v[..., : i + 1, :], dim=-2))
    return torch.stack(rows, dim=-2)


# ----------------------------------------------------------------------------------------------------------
# references against the naive loops
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 1.0), ("lssar", 3.0), ("lssar", 15.0), ("lssar", 2.5)])
def test_reference_matches_naive(kind, p, window):
    q, k, v = qkv(2, 2, 11, 8, seed=1)
    ref = lssa_reference(q, k, v, window=window) if kind == "lssa" else lssar_reference(q, k, v, p, window=window)
    assert rel_err(ref, naive_attention(q, k, v, kind, p, window)) < 1e-12


@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 3.0), ("lssar", 15.0)])
def test_reference_gradients_match_naive(kind, p):
    q, k, v = (x.requires_grad_() for x in qkv(1, 2, 9, 4, seed=2))
    dout = randn(1, 2, 9, 4, seed=9)
    ref = lssa_reference(q, k, v) if kind == "lssa" else lssar_reference(q, k, v, p)
    naive = naive_attention(q, k, v, kind, p)
    g_ref = torch.autograd.grad(ref, (q, k, v), dout)
    g_naive = torch.autograd.grad(naive, (q, k, v), dout)
    for a, b in zip(g_ref, g_naive, strict=True):
        assert rel_err(a, b) < 1e-10


@pytest.mark.parametrize("name", ["lssa", "lssar3", "lssar15", "laser"])
def test_reference_gradcheck(name):
    q, k, v = (x.requires_grad_() for x in qkv(1, 2, 6, 4, seed=3))
    fn = {
        "lssa": lssa_reference,
        "lssar3": lambda q, k, v: lssar_reference(q, k, v, 3.0),
        "lssar15": lambda q, k, v: lssar_reference(q, k, v, 15.0),
        "laser": laser_attention,
    }[name]
    assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fn", [lssa_reference, lssar_reference, laser_attention])
def test_first_row_puts_all_weight_on_first_key(fn):
    q, k, v = qkv(2, 3, 7, 8, seed=4)
    out = fn(q, k, v)
    assert torch.allclose(out[:, :, 0], v[:, :, 0], rtol=0, atol=1e-12)


def test_lssar_rows_whose_weights_tie_keep_lssa_weights():
    q, k, v = qkv(1, 2, 10, 8, seed=5)
    k = k[:, :, :1].expand_as(k).clone()  # every key equal: every row's LSSA weights tie
    assert torch.equal(lssar_reference(q, k, v, 15.0), lssa_reference(q, k, v))
    assert rel_err(naive_attention(q, k, v, "lssar", 15.0), lssa_reference(q, k, v)) < 1e-14


def test_lssar_large_p_tends_to_argmax():
    T = D = 12
    q, k, _ = qkv(1, 1, T, D, seed=6)
    eye = torch.eye(T, dtype=F64)[None, None]  # v = identity: the output rows are the attention weights
    lssa_w = lssa_reference(q, k, eye)
    w = lssar_reference(q, k, eye, p=2000.0)
    for i in range(T):
        n, offset = i + 1, (0.0 if i < 3 else 1.0)
        y = torch.relu(n * lssa_w[0, 0, i, : i + 1] - offset)
        top2 = torch.topk(y, min(2, i + 1)).values
        if i == 0 or top2[1] < 0.99 * top2[0]:  # a clear maximum: p = 2000 leaves < 1e-8 elsewhere
            onehot = F.one_hot(y.argmax(), T).to(F64)
            assert torch.allclose(w[0, 0, i], onehot, atol=1e-6)
    assert (lssar_reference(q, k, eye, 15.0).amax(-1) >= lssar_reference(q, k, eye, 3.0).amax(-1) - 1e-12).all()


@pytest.mark.parametrize("name", ["lssa", "lssar", "laser"])
def test_references_are_causal(name):
    fn = {"lssa": lssa_reference, "lssar": lssar_reference, "laser": laser_attention}[name]
    q, k, v = qkv(1, 2, 12, 8, seed=7)
    t0 = 6
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    for x in (q2, k2, v2):
        x[:, :, t0 + 1 :] = 3 * randn(1, 2, 12 - t0 - 1, 8, seed=99)
    before, after = fn(q, k, v)[:, :, : t0 + 1], fn(q2, k2, v2)[:, :, : t0 + 1]
    # LASER's shift m is the max over the whole sequence: it cancels exactly only in real arithmetic
    assert torch.equal(before, after) if name != "laser" else rel_err(after, before) < 1e-14


@pytest.mark.parametrize("fn", [lssa_reference, lssar_reference, laser_attention])
@pytest.mark.parametrize("window", [None, 5])
def test_chunked_references_match_unchunked(fn, window):
    q, k, v = (x.requires_grad_() for x in qkv(1, 2, 13, 8, seed=8))
    dout = randn(1, 2, 13, 8, seed=10)
    full = fn(q, k, v, window=window)
    chunked = fn(q, k, v, window=window, chunk_size=4)
    assert rel_err(chunked, full) < 1e-13
    for a, b in zip(
        torch.autograd.grad(chunked, (q, k, v), dout), torch.autograd.grad(full, (q, k, v), dout), strict=True
    ):
        assert rel_err(a, b) < 1e-12


def test_window_longer_than_sequence_changes_nothing():
    q, k, v = qkv(1, 1, 9, 8, seed=11)
    assert torch.equal(lssar_reference(q, k, v, 3.0, window=9), lssar_reference(q, k, v, 3.0))
    assert rel_err(laser_attention(q, k, v, window=50), laser_attention(q, k, v)) < 1e-14


def test_lssar_p15_gradients_finite_at_16x_length():
    base = 8
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (x.requires_grad_() for x in qkv(1, 2, 16 * base, 16, seed=12, dtype=dtype))
        out = lssar_reference(q, k, v, 15.0)
        out.float().square().sum().backward()
        assert out.dtype == dtype and torch.isfinite(out).all()
        assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


def test_laser_matches_log_softmax_exp_in_float64():
    q, k, v = qkv(2, 2, 10, 8, seed=13)
    assert rel_err(laser_attention(q, k, v), naive_laser(q, k, v)) < 1e-13


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_laser_is_exact_when_a_causal_prefix_lies_far_below_the_max(dtype):
    q, k, v = qkv(1, 2, 10, 8, seed=14, dtype=dtype)
    v = v.clone()
    v[:, :, :4] = -2000.0  # rows 1..4 see only values ~2000 below the channel max: exp underflows to 0
    v.requires_grad_()
    out = laser_attention(q, k, v)
    out.float().sum().backward()
    assert out.dtype == dtype and torch.isfinite(out).all() and torch.isfinite(v.grad).all()
    exact = naive_laser_logspace(q.to(F64), k.to(F64), v.detach().to(F64))
    assert rel_err(out, exact) < (1e-6 if dtype in (torch.float64, torch.float32) else 5e-2)
    if dtype in (torch.float64, torch.float32):  # half-precision gradients are only checked to be finite
        v64 = v.detach().to(F64).requires_grad_()
        naive_laser_logspace(q.to(F64), k.to(F64), v64).sum().backward()
        assert rel_err(v.grad.to(F64), v64.grad) < (1e-10 if dtype == torch.float64 else 1e-4)


def test_laser_is_causal_even_when_a_later_value_is_huge():
    q, k, v = qkv(1, 1, 12, 8, seed=15, dtype=torch.float32)
    before = laser_attention(q, k, v)
    v = v.clone()
    v[..., -1, 0] = 120.0  # exp(v - m) of every earlier row underflows against this new maximum
    after = laser_attention(q, k, v)
    assert rel_err(after[..., :-1, :], before[..., :-1, :]) < 1e-6


# ----------------------------------------------------------------------------------------------------------
# interface: validation, backend choice, import without triton
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda x: kernels.lssa_attention(x[0], x[0], x[0], backend="torch"), ValueError, "4 dims"),
        (lambda x: kernels.lssa_attention(x[1], x[1][..., :4, :], x[1]), ValueError, "same shape"),
        (lambda x: kernels.lssar_attention(x[1], x[1], x[1], p=0.0), ValueError, "p must be"),
        (lambda x: kernels.lssar_attention(x[1], x[1], x[1], p=-2), ValueError, "p must be"),
        (lambda x: kernels.lssa_attention(x[1], x[1], x[1], backend="cuda"), ValueError, "backend must be"),
        (lambda x: kernels.lssa_attention(x[1], x[1], x[1].float()), TypeError, "same dtype"),
        (lambda x: lssa_reference(x[1], x[1], x[1], chunk_size=0), ValueError, "chunk_size"),
        (lambda x: laser_attention(x[1], x[1], x[1], window=0), ValueError, "window"),
    ],
)
def test_invalid_inputs_raise_one_line_errors(call, error, match):
    x = (torch.zeros(2, 3, 8), torch.zeros(1, 2, 8, 16, dtype=F64))
    with pytest.raises(error, match=match) as info:
        call(x)
    assert "\n" not in str(info.value)


@needs_triton
def test_triton_rejects_unsupported_head_dim():
    q = torch.zeros(1, 1, 8, 48, device=TRITON_DEVICE)
    with pytest.raises(ValueError, match="head dims"):
        kernels.lssa_attention(q, q, q, backend="triton")


def test_auto_backend_never_uses_the_interpreter_on_cpu():
    assert resolve_backend("auto", torch.zeros(1, 1, 4, 32)) == "torch"
    q, k, v = qkv(1, 1, 5, 32, dtype=torch.float32)
    assert torch.equal(kernels.lssar_attention(q, k, v), lssar_reference(q, k, v))


def test_cuda_kernels_take_whole_number_powers_only():
    assert all(kernels.cuda_kernel_supports_power(p) for p in (1, 3.0, 15, 64))
    assert not any(kernels.cuda_kernel_supports_power(p) for p in (0.5, 2.5, 65, 15.000001))


def test_import_without_triton_falls_back_to_torch():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, kernels\n"
        "q = torch.randn(1, 1, 6, 32)\n"
        "assert not kernels.triton_available()\n"
        "assert torch.equal(kernels.lssa_attention(q, q, q), kernels.lssa_reference(q, q, q))\n"
        "try:\n"
        "    kernels.lssar_attention(q, q, q, backend='triton')\n"
        "except RuntimeError as e:\n"
        "    assert 'triton' in str(e) and '\\n' not in str(e); print('ok')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert res.stdout.strip() == "ok", res.stderr


# ----------------------------------------------------------------------------------------------------------
# Triton kernels against the references
# ----------------------------------------------------------------------------------------------------------
def triton_blocks(name: str):
    """Tile settings under test: 16 x 16 everywhere, the autotuning candidates' shapes, or unequal tiles (the
    diagonal split differs)."""
    from orbitlaw.kernels.lssa.launch import Blocks, KernelBlocks

    if name == "square":
        return KernelBlocks(Blocks(16, 16), Blocks(16, 16), Blocks(16, 16))
    if name == "candidates":  # shapes of the CUDA autotuning candidates (kernels.lssa.launch)
        return KernelBlocks(forward=Blocks(64, 32), dkdv=Blocks(32, 64), dq=Blocks(64, 32))
    return KernelBlocks(forward=Blocks(32, 16), dkdv=Blocks(16, 32), dq=Blocks(32, 16))


def check_triton(kind: str, p: float, q, k, v, blocks="square", seed=0, poly_share=0.0):
    """Forward and q, k, v gradients of the Triton kernel (float32) vs the float64 reference."""
    from orbitlaw.kernels.lssa.fused import lssa_triton, lssar_triton

    q, k, v = (x.to(device=TRITON_DEVICE, dtype=torch.float32).requires_grad_() for x in (q, k, v))
    dout = randn(*q.shape, seed=seed + 50, dtype=torch.float32, device=TRITON_DEVICE)
    bl = triton_blocks(blocks)
    out = (lssa_triton(q, k, v, bl, poly_share=poly_share) if kind == "lssa"
           else lssar_triton(q, k, v, p, bl, poly_share=poly_share))
    grads = torch.autograd.grad(out, (q, k, v), dout)
    q64, k64, v64 = (x.detach().to(F64).requires_grad_() for x in (q, k, v))
    ref = lssa_reference(q64, k64, v64) if kind == "lssa" else lssar_reference(q64, k64, v64, p)
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), dout.to(F64))
    errors = {"out": rel_err(out, ref)}
    errors.update({f"d{n}": rel_err(g, r) for n, g, r in zip("qkv", grads, ref_grads, strict=True)})
    assert all(e <= REL_TOL for e in errors.values()), errors
    return out


# p = 2.5 takes the kernels' real-power path: checked under the interpreter; on CUDA it failed this check on
# an H200 and is refused there (see kernels.backend.cuda_kernel_supports_power and the gpu tests below)
KINDS = [("lssa", 1.0), ("lssar", 1.0), ("lssar", 3.0), ("lssar", 15.0),
         pytest.param("lssar", 2.5, marks=pytest.mark.skipif(ON_CUDA, reason="real p is refused on CUDA"))]


@needs_triton
@pytest.mark.parametrize("kind,p", KINDS)
@pytest.mark.parametrize("shape", [(1, 2, 37, 32), (2, 1, 1, 32), (1, 1, 16, 64)], ids=["T37", "T1", "T16"])
def test_triton_matches_reference(kind, p, shape):
    check_triton(kind, p, *qkv(*shape, seed=20))


@needs_triton
@pytest.mark.parametrize("kind,p", KINDS)
@pytest.mark.parametrize("poly_share", [0.25, 0.5, 0.75, 1.0])
def test_triton_poly_share_matches_reference(kind, p, poly_share):
    """Every share of the special functions on the FMA pipes (kernels/lssa/fma.py), forward and backward, at
    every kind of power (whole and real), within the same tolerance of the float64 reference."""
    q, k, v = qkv(1, 2, 37, 32, seed=7)
    check_triton(kind, p, q, k, v, seed=7, poly_share=poly_share)


@needs_triton
@pytest.mark.parametrize("poly_share", [0.5, 1.0])
def test_triton_poly_share_at_the_tuned_tile_shapes(poly_share):
    """The poly shares at tile shapes of the autotuning candidates (kernels.lssa.launch), not only 16 x 16:
    the split of a tile between the two paths depends on its width. (That share 0 is the kernels as before is
    checked on their compiled code: benchmarks/kernel_cost.py --baseline.)"""
    q, k, v = qkv(1, 1, 70, 32, seed=11)
    for kind, p in (("lssa", 1.0), ("lssar", 15.0)):
        check_triton(kind, p, q, k, v, blocks="candidates", seed=11, poly_share=poly_share)


@needs_triton
def test_triton_poly_share_keeps_a_nan_key_visible():
    """A NaN score gives a NaN output on the FMA path as on the special-function unit (no silent zero weight)."""
    from orbitlaw.kernels.lssa.fused import lssar_triton

    q, k, v = (x.float() for x in qkv(1, 1, 20, 32, seed=3))
    k[0, 0, 5, 0] = float("nan")
    for share in (0.0, 1.0):
        out = lssar_triton(q, k, v, 15.0, triton_blocks("square"), poly_share=share)
        assert out[0, 0, :5].isfinite().all() and out[0, 0, 5:].isnan().all(), share


@pytest.mark.parametrize("share", [0.3, -1, 2, "half", True, float("nan")])
def test_poly_share_must_be_a_quarter_or_auto(share):
    q, k, v = qkv(1, 1, 4, 32, dtype=torch.float32)
    with pytest.raises(ValueError, match="poly_share must be one of") as err:
        kernels.lssar_attention(q, k, v, poly_share=share)
    assert "\n" not in str(err.value)


@needs_triton
@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 15.0)])
def test_triton_unequal_blocks_and_longer_sequence(kind, p):
    check_triton(kind, p, *qkv(1, 1, 75, 64, seed=21), blocks="unequal")


@needs_triton
@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 3.0), ("lssar", 15.0)])
def test_triton_rows_whose_weights_all_tie(kind, p):
    q, k, v = qkv(1, 2, 40, 32, seed=22)
    k, q = k.clone(), q.clone()
    k[:, :, :20] = k[:, :, :1]  # rows 1..20 see only equal keys: their LSSA weights tie exactly
    # later rows: each query aligned with its own key, a clear maximum (rows that nearly tie are
    # ill-conditioned at p = 15: float32 rounding of n A - 1 ~ 1e-7 is amplified by p / max(n A - 1))
    q[:, :, 20:] = k[:, :, 20:]
    q[:, 1, 30] = 0.0  # a zero query: every score 0, a tie too (and the clamped-norm gradient)
    if p < 15:  # a zero key (clamped norm); at p = 15 its gradient (~1e9, a sum of nearly cancelling
        k[:, 1, 35] = 0.0  # terms) is ill-conditioned: PyTorch's own float32 autograd is off by 3e-4 there
    check_triton(kind, p, q, k, v)


@needs_triton
@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 15.0)])
@pytest.mark.parametrize("case", ["aligned", "large", "tiny"])
def test_triton_extreme_scores(kind, p, case):
    q, k, v = qkv(1, 2, 48, 32, seed=23)
    if case == "aligned":  # q_i = +-k_j: scores at +-log(d) log(i), their extremes
        q = q.clone()
        q[:, :, 8:] = k[:, :, :40] * torch.where(torch.arange(40) % 2 == 0, 1.0, -1.0)[:, None].to(F64)
    scale = {"aligned": 1.0, "large": 1e4, "tiny": 1e-4}[case]
    check_triton(kind, p, q * scale, k * scale, v)


@needs_triton
def test_triton_noncontiguous_inputs_and_no_grad():
    from orbitlaw.kernels.lssa.fused import lssar_triton

    q, k, v = (x.transpose(1, 2) for x in qkv(1, 19, 2, 32, seed=24, dtype=torch.float32, device=TRITON_DEVICE))
    assert not q.is_contiguous()
    check_triton("lssar", 3.0, q, k, v)
    with torch.no_grad():
        out = lssar_triton(q, k, v, 3.0)
    assert rel_err(out, lssar_reference(q.to(F64), k.to(F64), v.to(F64), 3.0)) <= REL_TOL


@needs_triton
@pytest.mark.parametrize("kind,p", [("lssa", 1.0), ("lssar", 15.0)])
def test_triton_float16(kind, p):
    """float16 tiles (q, k scaled to unit rows before the backward dots); vs the float64 reference."""
    from orbitlaw.kernels.lssa.fused import lssa_triton, lssar_triton

    x = [t.to(device=TRITON_DEVICE, dtype=torch.float16).requires_grad_() for t in qkv(1, 2, 35, 32, seed=28)]
    dout = randn(1, 2, 35, 32, seed=29, dtype=torch.float16, device=TRITON_DEVICE)
    out = lssa_triton(*x) if kind == "lssa" else lssar_triton(*x, p)
    grads = torch.autograd.grad(out, x, dout)
    x64 = [t.detach().to(F64).requires_grad_() for t in x]
    ref = lssa_reference(*x64) if kind == "lssa" else lssar_reference(*x64, p)
    ref_grads = torch.autograd.grad(ref, x64, dout.to(F64))
    assert out.dtype == torch.float16 and rel_err(out, ref) < 2e-3
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == torch.float16 and rel_err(g, r) < 5e-3


@needs_triton
def test_public_api_runs_triton_backend():
    q, k, v = qkv(1, 1, 20, 32, seed=25, dtype=torch.float32, device=TRITON_DEVICE)
    out = kernels.lssar_attention(q, k, v, p=15.0, backend="triton")
    assert rel_err(out, lssar_reference(q.to(F64), k.to(F64), v.to(F64), 15.0)) <= REL_TOL
    out = kernels.lssa_attention(q, k, v, backend="triton")
    assert rel_err(out, lssa_reference(q.to(F64), k.to(F64), v.to(F64))) <= REL_TOL


@needs_triton
def test_triton_is_causal():
    from orbitlaw.kernels.lssa.fused import lssar_triton

    q, k, v = qkv(1, 1, 33, 32, seed=26, dtype=torch.float32, device=TRITON_DEVICE)
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    for x in (q2, k2, v2):
        x[:, :, 17:] = 1e3
    assert torch.equal(lssar_triton(q, k, v, 15.0)[:, :, :17], lssar_triton(q2, k2, v2, 15.0)[:, :, :17])


# ----------------------------------------------------------------------------------------------------------
# GPU only (pytest -m gpu with ORBITLAW_TEST_CUDA=1)
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not ON_CUDA, reason="needs CUDA and ORBITLAW_TEST_CUDA=1")
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_bf16_p15_at_16k_is_finite_and_close(D):
    q, k, v = (x.requires_grad_() for x in qkv(1, 2, 16384, D, seed=27, dtype=torch.bfloat16, device="cuda"))
    out = kernels.lssar_attention(q, k, v, p=15.0)
    out.float().square().sum().backward()
    assert torch.isfinite(out).all() and all(torch.isfinite(x.grad).all() for x in (q, k, v))
    s = slice(0, 1024)
    ref = lssar_reference(q[:, :, s].float(), k[:, :, s].float(), v[:, :, s].float(), 15.0)
    assert rel_err(out[:, :, s], ref) < 5e-2


@pytest.mark.gpu
@pytest.mark.skipif(not ON_CUDA, reason="needs CUDA and ORBITLAW_TEST_CUDA=1")
def test_gpu_real_power_runs_the_reference_under_auto_and_is_refused_by_triton():
    q, k, v = qkv(1, 2, 37, 32, seed=30, dtype=torch.float32, device="cuda")
    assert torch.equal(kernels.lssar_attention(q, k, v, p=2.5), lssar_reference(q, k, v, p=2.5))
    with pytest.raises(ValueError, match="whole-number p"):
        kernels.lssar_attention(q, k, v, p=2.5, backend="triton")
