"""Attention functions of the GPT, each with an exact PyTorch definition.

Every function takes causal q, k, v of shape (B, H, T, D) and returns (B, H, T, D); positions are
1-based (query i attends keys j <= i, or the last ``window`` of them). Formulas (science.md section 4):

- ``softmax``: softmax(q k^T / sqrt(d)) v, through PyTorch SDPA (flash / memory-efficient kernels).
- ``lssa``, ``lssar``: length-scaled softplus attention, with re-weighting of power ``p``; the fused
  Triton kernels of ``kernels`` on CUDA (full causal attention), the chunked PyTorch reference elsewhere.
- ``laser``: log(softmax(q k^T / sqrt(d)) exp(V - m)) + m on top of SDPA (``orbitlaw.kernels.laser_attention``).
- ``sigmoid`` (Ramapuram et al. 2024): A_ij = sigmoid(q.k / sqrt(d) + b), b = -log(T), no normalisation.
- ``relu`` (Wortsman et al. 2023): A_ij = relu(q.k / sqrt(d)) / n_i, n_i the number of keys of row i.

``chunk_size`` evaluates the queries in blocks so that at most chunk_size x T scores exist at once,
which is how long contexts are evaluated on the CPU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from orbitlaw import kernels
from orbitlaw.kernels.reference import attend_mask, query_chunks

ATTENTIONS = ("softmax", "lssa", "lssar", "laser", "sigmoid", "relu")


def _pointwise_attention(q, k, v, window, chunk_size, weights_fn):
    """sum_j w(s_ij, i) v_j over the allowed keys with s = q.k / sqrt(d), chunked over queries."""
    T, D = q.shape[-2], q.shape[-1]
    outs = []
    for start, stop in query_chunks(T, chunk_size):
        keys = stop
        scores = q[..., start:stop, :] @ k[..., :keys, :].transpose(-1, -2) / math.sqrt(D)
        allowed = attend_mask(start, stop, 0, window, q.device)
        counts = allowed.sum(-1, keepdim=True).to(scores.dtype)
        w = torch.where(allowed, weights_fn(scores, counts), torch.zeros((), dtype=scores.dtype,
                                                                        device=q.device))
        outs.append(w @ v[..., :keys, :])
    return torch.cat(outs, dim=-2)


def softmax_attention(q, k, v, window=None, chunk_size=None):
    if window is None and chunk_size is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    outs = []
    for start, stop in query_chunks(T, chunk_size):
        mask = attend_mask(start, stop, 0, window, q.device)
        outs.append(F.scaled_dot_product_attention(q[..., start:stop, :], k[..., :stop, :], v[..., :stop, :],
                                                   attn_mask=mask))
    return torch.cat(outs, dim=-2)


def sigmoid_attention(q, k, v, window=None, chunk_size=None):
    bias = -math.log(q.shape[-2])
    return _pointwise_attention(q, k, v, window, chunk_size, lambda s, n: torch.sigmoid(s + bias))


def relu_attention(q, k, v, window=None, chunk_size=None):
    return _pointwise_attention(q, k, v, window, chunk_size, lambda s, n: torch.relu(s) / n)


def attend(name: str, q, k, v, p: float = 15.0, window: int | None = None, chunk_size: int | None = None):
    """Dispatch to attention ``name`` (one of ATTENTIONS); see the module docstring."""
    if name == "softmax":
        return softmax_attention(q, k, v, window, chunk_size)
    if name in ("lssa", "lssar"):
        fused = q.is_cuda and window is None and kernels.triton_available() and \
            (name == "lssa" or kernels.cuda_kernel_supports_power(p))
        if name == "lssa":
            return kernels.lssa_attention(q, k, v) if fused else \
                kernels.lssa_reference(q, k, v, window=window, chunk_size=chunk_size)
        return kernels.lssar_attention(q, k, v, p=p) if fused else \
            kernels.lssar_reference(q, k, v, p=p, window=window, chunk_size=chunk_size)
    if name == "laser":
        return kernels.laser_attention(q, k, v, window=window, chunk_size=chunk_size)
    if name == "sigmoid":
        return sigmoid_attention(q, k, v, window, chunk_size)
    if name == "relu":
        return relu_attention(q, k, v, window, chunk_size)
    raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(ATTENTIONS)}")
