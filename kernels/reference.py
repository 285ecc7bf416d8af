"""Plain PyTorch attention machinery shared by every reference, and LASER on top of PyTorch SDPA.

Shapes: q, k, v are (B, H, T, D) (batch, heads, sequence, head dim); every attention returns (B, H, T, D)
in the dtype of its inputs. Positions are 1-based: query i = 1..T attends keys j <= i (and, with a
sliding ``window`` w, only the last w of them: i - w < j <= i); the helpers here take 0-based rows.

The references compute in float32 (float64 for float64 inputs). ``chunk_size`` evaluates the queries in
blocks of that many rows (:func:`run_chunked`), so at most chunk_size x T scores exist at once; under
autograd each chunk is checkpointed (recomputed in backward), which keeps training memory at that size
too. Chunking does not change the result beyond float rounding. The LSSA and LSSAR references are in
``orbitlaw.kernels.lssa.naive``, the weights of every variant in ``orbitlaw.kernels.weights``.

  LASER: out = log(softmax(q k^T / sqrt(d)) exp(V - m)) + m, m = per-channel max of V over the sequence
         (no gradient through m).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from orbitlaw.kernels.checks import check_chunk_size, check_qkv, check_window

NORM_EPS = 1e-12
"""Norms are clamped below at this value before q and k are divided by them (as F.normalize)."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the references compute in: float64 stays, everything else is computed in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def query_chunks(T: int, chunk_size: int | None) -> Iterator[tuple[int, int]]:
    """Yield (start, stop) 0-based query row ranges covering 0..T in blocks of chunk_size (all if None)."""
    step = T if chunk_size is None else chunk_size
    for start in range(0, T, step):
        yield start, min(start + step, T)


def key_start(start: int, window: int | None) -> int:
    """First key (0-based) any query in rows start.. can attend: 0, or start - window + 1 with a window."""
    return 0 if window is None else max(0, start - window + 1)


def attend_mask(start: int, stop: int, keys_from: int, window: int | None, device) -> torch.Tensor:
    """Boolean (stop - start, stop - keys_from) mask, True where query row i may attend key j (0-based)."""
    i = torch.arange(start, stop, device=device)[:, None]
    j = torch.arange(keys_from, stop, device=device)[None, :]
    mask = j <= i
    if window is not None:
        mask = mask & (j > i - window)
    return mask


def key_counts(start: int, stop: int, window: int | None, device, dtype) -> torch.Tensor:
    """Keys n_i each query row in start..stop attends, shape (stop - start,): i, or min(i, window)."""
    n = torch.arange(start + 1, stop + 1, device=device, dtype=dtype)
    return n if window is None else n.clamp_max(window)


def run_chunked(
    fn: Callable[..., torch.Tensor], tensors: tuple[torch.Tensor, ...], T: int, chunk_size: int | None
) -> torch.Tensor:
    """Concatenate fn(*tensors, start, stop) over query chunks along the sequence dim (checkpointed)."""
    chunks = list(query_chunks(T, chunk_size))
    if len(chunks) == 1:
        return fn(*tensors, 0, T)
    use_ckpt = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    outs = []
    for start, stop in chunks:
        if use_ckpt:
            outs.append(checkpoint(fn, *tensors, start, stop, use_reentrant=False))
        else:
            outs.append(fn(*tensors, start, stop))
    return torch.cat(outs, dim=-2)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """x / max(|x|, NORM_EPS) along the last dim, in the reference compute dtype."""
    return F.normalize(x.to(compute_dtype(x.dtype)), dim=-1, eps=NORM_EPS)


def laser_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None = None,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Causal LASER attention, log(softmax(q k^T / sqrt(d)) exp(V - m)) + m, on top of PyTorch SDPA.

    m is the per-channel max of V over the sequence (per batch and head), detached; it cancels exactly
    in real arithmetic. A row whose causal prefix lies so far below m that exp(V - m) underflows (about
    87 below in float32) would otherwise give log(0), or depend on later positions through m: such
    rows are recomputed without any shift, as logsumexp_j(log softmax_ij + V_j) over their own keys,
    so every output is exact and causal, with exact gradients. float16 inputs are computed in float32.

    Args:
        q, k, v: (B, H, T, D) queries, keys, values (one float dtype, one device).
        window: optional sliding window (keys per query); None for full causal attention.
        chunk_size: optional number of query rows evaluated at once (memory chunk_size x T).
    Returns:
        (B, H, T, D) attention output in the input dtype.
    """
    _, _, T, _ = check_qkv(q, k, v)
    window, chunk_size = check_window(window), check_chunk_size(chunk_size)
    work = torch.float32 if q.dtype == torch.float16 else q.dtype
    qw, kw, vw = q.to(work), k.to(work), v.to(work)
    m = vw.detach().amax(dim=-2, keepdim=True)
    ev = torch.exp(vw - m)

    if window is None and chunk_size is None:
        mixed = F.scaled_dot_product_attention(qw, kw, ev, is_causal=True)
    else:

        def chunk(q_, k_, ev_, start, stop):
            j0 = key_start(start, window)
            mask = attend_mask(start, stop, j0, window, q_.device)
            return F.scaled_dot_product_attention(
                q_[..., start:stop, :], k_[..., j0:stop, :], ev_[..., j0:stop, :], attn_mask=mask
            )

        mixed = run_chunked(chunk, (qw, kw, ev), T, chunk_size)
    tiny = torch.finfo(work).tiny
    out = torch.log(mixed.clamp_min(tiny)) + m
    underflow = (mixed.detach() < tiny).any(dim=-1)  # (B, H, T): rows the shift cannot represent
    if underflow.any():
        rows = underflow.nonzero()
        out = out.index_put(tuple(rows.unbind(1)), _laser_rows_exact(qw, kw, vw, rows, window))
    return out.to(q.dtype)


def _laser_rows_exact(q, k, v, rows: torch.Tensor, window: int | None, block: int = 64) -> torch.Tensor:
    """LASER outputs (n, D) of the (b, h, i) ``rows``: logsumexp over allowed keys j of log a_ij + v_j."""
    T, D = q.shape[-2], q.shape[-1]
    j = torch.arange(T, device=q.device)
    outs = []
    for s in range(0, rows.shape[0], block):
        b, h, i = rows[s:s + block].unbind(1)
        scores = (q[b, h, i, None, :] @ k[b, h].transpose(-1, -2)).squeeze(-2) / math.sqrt(D)  # (n, T)
        allowed = j[None, :] <= i[:, None]
        if window is not None:
            allowed &= j[None, :] > i[:, None] - window
        log_a = torch.log_softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
        outs.append(torch.logsumexp(log_a[..., None] + v[b, h], dim=1))  # (n, T, D) -> (n, D)
    return torch.cat(outs)
