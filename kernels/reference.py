"""Plain PyTorch references for causal LSSA, LSSAR and LASER attention.

Shapes: q, k, v are (B, H, T, D) (batch, heads, sequence, head dim); every function returns (B, H, T, D)
in the dtype of its inputs. Positions are 1-based: query i = 1..T attends keys j <= i (and, with a
sliding ``window`` w, only the last w of them: i - w < j <= i). With a window, the row's key count
n_i = min(i, w) takes the place of i in the length scale log(i) and in LSSAR's i * A_ij (so a window
longer than the sequence changes nothing).

The references compute in float32 (float64 for float64 inputs). ``chunk_size`` evaluates the queries in
blocks of that many rows, so at most chunk_size x T scores exist at once; under autograd each chunk is
checkpointed (recomputed in backward), which keeps training memory at that size too. Chunking does not
change the result beyond float rounding.

Formulas (science.md section 4), per batch, head and query row i with key count n_i:
  LSSA:  S_ij = log(d) log(n_i) (q_i/|q_i|) . (k_j/|k_j|);  A_ij = softplus(S_ij) / sum_j softplus(S_ij)
  LSSAR: R_ij = relu(n_i A_ij - O_i)^p, O_i = 0 for n_i <= 3 else 1;  W_ij = R_ij / sum_j R_ij; a row
         whose LSSA weights all tie (so all R_ij = 0) keeps its LSSA weights.
  LASER: out = log(softmax(q k^T / sqrt(d)) exp(V - m)) + m, m = per-channel max of V over the sequence
         (no gradient through m).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from orbitlaw.kernels.checks import check_chunk_size, check_p, check_qkv, check_window

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


def _run_chunked(
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


def _unit(x: torch.Tensor) -> torch.Tensor:
    """x / max(|x|, NORM_EPS) along the last dim, in the reference compute dtype."""
    return F.normalize(x.to(compute_dtype(x.dtype)), dim=-1, eps=NORM_EPS)


def _softplus_rows(
    qn: torch.Tensor, kn: torch.Tensor, start: int, stop: int, window: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Masked softplus(S) for query rows start..stop: (E (B, H, rows, keys), mask, n_i (rows,), key start)."""
    d = qn.shape[-1]
    j0 = key_start(start, window)
    n = key_counts(start, stop, window, qn.device, qn.dtype)
    mask = attend_mask(start, stop, j0, window, qn.device)
    scale = (math.log(d) * torch.log(n))[:, None]
    s = scale * (qn[..., start:stop, :] @ kn[..., j0:stop, :].transpose(-1, -2))
    e = F.softplus(s).masked_fill(~mask, 0.0)
    return e, mask, n, j0


def _lssa_chunk(
    qn: torch.Tensor, kn: torch.Tensor, v: torch.Tensor, start: int, stop: int, window: int | None
) -> torch.Tensor:
    e, _, _, j0 = _softplus_rows(qn, kn, start, stop, window)
    a = e / e.sum(dim=-1, keepdim=True)
    return a @ v[..., j0:stop, :]


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


def _lssar_chunk(
    qn: torch.Tensor, kn: torch.Tensor, v: torch.Tensor, start: int, stop: int, window: int | None, p: float
) -> torch.Tensor:
    e, mask, n, j0 = _softplus_rows(qn, kn, start, stop, window)
    return reweight(e, mask, n, p) @ v[..., j0:stop, :]


def lssa_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None = None,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Causal length-scaled softplus attention (LSSA) in plain PyTorch.

    Args:
        q, k, v: (B, H, T, D) queries, keys, values (any float dtype, one device).
        window: optional sliding window (keys per query); None for full causal attention.
        chunk_size: optional number of query rows evaluated at once (memory chunk_size x T).
    Returns:
        (B, H, T, D) attention output in the input dtype.
    """
    _, _, T, _ = check_qkv(q, k, v)
    window, chunk_size = check_window(window), check_chunk_size(chunk_size)
    qn, kn, vc = _unit(q), _unit(k), v.to(compute_dtype(v.dtype))

    def chunk(qn_, kn_, v_, start, stop):
        return _lssa_chunk(qn_, kn_, v_, start, stop, window)

    return _run_chunked(chunk, (qn, kn, vc), T, chunk_size).to(q.dtype)


def lssar_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    p: float = 15.0,
    window: int | None = None,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Causal LSSA with re-weighting (LSSAR) of power p in plain PyTorch.

    The power is taken of relu(n_i A_ij - O_i) divided by its row maximum (values in [0, 1]), so large p
    (the paper's 15) cannot overflow; the factor cancels in the normalisation.

    Args:
        q, k, v: (B, H, T, D) queries, keys, values (any float dtype, one device).
        p: re-weighting power, > 0 (3 and 15 in the paper; p -> infinity tends to argmax).
        window: optional sliding window (keys per query); None for full causal attention.
        chunk_size: optional number of query rows evaluated at once (memory chunk_size x T).
    Returns:
        (B, H, T, D) attention output in the input dtype.
    """
    _, _, T, _ = check_qkv(q, k, v)
    p = check_p(p)
    window, chunk_size = check_window(window), check_chunk_size(chunk_size)
    qn, kn, vc = _unit(q), _unit(k), v.to(compute_dtype(v.dtype))

    def chunk(qn_, kn_, v_, start, stop):
        return _lssar_chunk(qn_, kn_, v_, start, stop, window, p)

    return _run_chunked(chunk, (qn, kn, vc), T, chunk_size).to(q.dtype)


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

        mixed = _run_chunked(chunk, (qw, kw, ev), T, chunk_size)
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
