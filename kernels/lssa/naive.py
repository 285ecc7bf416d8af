"""LSSA and LSSAR in plain PyTorch: the references the fused kernels (``fused.py``) are tested against.

Shapes: q, k, v are (B, H, T, D) (batch, heads, sequence, head dim); both functions return (B, H, T, D)
in the dtype of their inputs, computed in float32 (float64 for float64 inputs). Positions are 1-based:
query i = 1..T attends keys j <= i (with a sliding ``window`` w, only i - w < j <= i), and the row's key
count n_i = min(i, w) takes the place of i in the length scale log(i) and in LSSAR's n_i A_ij (so a
window longer than the sequence changes nothing). ``chunk_size`` evaluates the queries in blocks (see
``orbitlaw.kernels.reference.run_chunked``): at most chunk_size x T scores exist at once.

Formulas (docs/protocol.md, "Attentions"), per batch, head and query row i with key count n_i:
  LSSA:  S_ij = log(d) log(n_i) (q_i/|q_i|) . (k_j/|k_j|);  A_ij = softplus(S_ij) / sum_j softplus(S_ij)
  LSSAR: R_ij = relu(n_i A_ij - O_i)^p, O_i = 0 for n_i <= 3 else 1;  W_ij = R_ij / sum_j R_ij; a row
         whose LSSA weights all tie (so all R_ij = 0) keeps its LSSA weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from orbitlaw.kernels.checks import check_chunk_size, check_p, check_qkv, check_window
from orbitlaw.kernels.reference import attend_mask, compute_dtype, key_counts, key_start, run_chunked, unit_rows


def _softplus_rows(qn: torch.Tensor, kn: torch.Tensor, start: int, stop: int, window: int | None):
    """Masked softplus(S) of query rows start..stop from unit rows qn, kn (B, H, T, D).

    Returns (E (B, H, rows, keys), mask (rows, keys), n_i (rows,), j0 the first key of the block).
    """
    d = qn.shape[-1]
    j0 = key_start(start, window)
    n = key_counts(start, stop, window, qn.device, qn.dtype)
    mask = attend_mask(start, stop, j0, window, qn.device)
    scale = (math.log(d) * torch.log(n))[:, None]
    s = scale * (qn[..., start:stop, :] @ kn[..., j0:stop, :].transpose(-1, -2))
    e = F.softplus(s).masked_fill(~mask, 0.0)
    return e, mask, n, j0


def _safe_pow(y: torch.Tensor, p) -> torch.Tensor:
    """y^p for y >= 0, 0 where y == 0, with a finite gradient everywhere (also for p < 1); p a number or a
    tensor that broadcasts against y (per-row powers)."""
    pos = y > 0
    return torch.where(pos, torch.where(pos, y, torch.ones_like(y)) ** p, torch.zeros_like(y))


def reweight(e: torch.Tensor, mask: torch.Tensor, n: torch.Tensor, p) -> torch.Tensor:
    """LSSAR's re-weighting of the row weights ``a = e / sum_j e`` (e >= 0, 0 outside ``mask``).

    R_ij = relu(n_i a_ij - O_i)^p (O_i = 0 for n_i <= 3 else 1), W_ij = R_ij / sum_j R_ij; a row whose
    weights all tie, or whose largest n_i a_ij - O_i is <= 0 (so that every R_ij = 0), keeps a. The power
    is taken of relu(n_i a_ij - O_i) divided by its row maximum (values in [0, 1]), so that p = 15 cannot
    overflow; the factor cancels in the normalisation and carries no gradient.

    Args:
        e: (B, H, rows, keys) non-negative row weights, unnormalised; mask: (rows, keys) allowed keys;
        n: (rows,) key counts; p: the power, a number or a (rows, 1) tensor of per-row powers.
    Returns:
        (B, H, rows, keys) weights, each row summing to 1.
    """
    row_sum = e.sum(dim=-1, keepdim=True)
    a = e / row_sum
    offset = (n > 3).to(e.dtype)[:, None]  # O_i
    n_over_sum = n[:, None] / row_sum
    x = e * n_over_sum - offset  # n_i A_ij - O_i, computed as the Triton kernel does
    e_max = e.masked_fill(~mask, -math.inf).amax(dim=-1, keepdim=True)
    e_min = e.masked_fill(~mask, math.inf).amin(dim=-1, keepdim=True)
    x_max = e_max * n_over_sum - offset  # the row's largest n_i A_ij - O_i
    tie = ((e_max == e_min) | (x_max <= 0)).detach()
    # scale into [0, 1] before the power; the scale cancels in the normalisation, so it carries no gradient
    inv_scale = torch.where(tie, torch.ones_like(x_max), 1.0 / x_max).detach()
    r = _safe_pow(torch.relu(x) * inv_scale, p)
    r_sum = torch.where(tie, torch.ones_like(x_max), r.sum(dim=-1, keepdim=True))
    return torch.where(tie, a, r / r_sum)


def _softplus_attention(q, k, v, p: float | None, window: int | None, chunk_size: int | None) -> torch.Tensor:
    """LSSA (p None) or LSSAR of power p: validated inputs, unit rows, query chunks; (B, H, T, D)."""
    _, _, T, _ = check_qkv(q, k, v)
    p = None if p is None else check_p(p)
    window, chunk_size = check_window(window), check_chunk_size(chunk_size)

    def rows(qn, kn, vc, start, stop):
        e, mask, n, j0 = _softplus_rows(qn, kn, start, stop, window)
        w = e / e.sum(dim=-1, keepdim=True) if p is None else reweight(e, mask, n, p)
        return w @ vc[..., j0:stop, :]

    vc = v.to(compute_dtype(v.dtype))
    return run_chunked(rows, (unit_rows(q), unit_rows(k), vc), T, chunk_size).to(q.dtype)


def lssa_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None,
                   chunk_size: int | None = None) -> torch.Tensor:
    """Causal length-scaled softplus attention (LSSA) of (B, H, T, D) q, k, v; returns (B, H, T, D).

    window: keys per query (None: full causal); chunk_size: query rows evaluated at once (module doc).
    """
    return _softplus_attention(q, k, v, None, window, chunk_size)


def lssar_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float = 15.0, window: int | None = None,
                    chunk_size: int | None = None) -> torch.Tensor:
    """Causal LSSA with re-weighting (LSSAR) of power p > 0 (the paper's 3 and 15; p -> infinity tends to
    argmax) of (B, H, T, D) q, k, v; returns (B, H, T, D). window, chunk_size: as :func:`lssa_reference`.

    The power is taken of relu(n_i A_ij - O_i) divided by its row maximum (values in [0, 1]), so large p
    cannot overflow; the factor cancels in the normalisation.
    """
    return _softplus_attention(q, k, v, p, window, chunk_size)
