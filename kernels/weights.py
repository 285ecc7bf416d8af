"""Attention weights of every variant, in plain PyTorch: the definitions the registry's references use.

Each ``*_weights`` function takes q, k of shape (B, H, T, D) (already in the compute dtype), the 0-based
query rows ``start:stop`` to evaluate, an optional sliding ``window`` and the re-weighting power ``p``,
and returns ``(W, j0)``: W of shape (B, H, stop - start, stop - j0), the weight query i puts on key j0 + c
(0 outside the causal mask and the window), and j0, the first key any of these rows can attend. The
output of a variant is ``W @ v[..., j0:stop, :]`` (LASER: see ``orbitlaw.kernels.reference.laser_attention``).

Notation (docs/protocol.md, "Attentions"), for query row i with n_i keys (i, or min(i, w) with a window), scores
s_ij = q_i . k_j / sqrt(d) and length-scaled cosine scores S_ij = log(d) log(n_i) q^_i . k^_j:

==================  =========================================================================================
``softmax``          softmax_j(s_ij)
``sigmoid``          sigmoid(s_ij - log T) (Ramapuram et al. 2024; not normalised)
``relu``             relu(s_ij) / n_i (Wortsman et al. 2023; not normalised)
``lssa``             softplus(S_ij) / sum_j softplus(S_ij)
``lssar``            re-weighting (below) of the LSSA weights, power p
``softmax-rw``       re-weighting of the softmax weights (the write-up's ablation "re-weighting + softmax")
``sigmoid-l1-rw``    re-weighting of sigmoid(s_ij - log T) / sum_j sigmoid(s_ij - log T)
``relu-l1``          relu(S_ij) / sum_j relu(S_ij): LSSA with ReLU as the non-negative function (the write-up's
                     "ReLU as phi"); a row whose scores are all <= 0 (always the first, where log n_i = 0)
                     has no weight anywhere and outputs 0: the "dead" rows the write-up names
``lssa-noscale``     softplus(c_ij) / sum_j softplus(c_ij), c_ij = q^_i . k^_j: LSSA without log d log n_i
``lssar-adaptive``   LSSAR whose power grows with the row's length: p_i = max(1, p log n_i / log 1024)
==================  =========================================================================================

Re-weighting (``orbitlaw.kernels.lssa.naive.reweight``) of row weights a_ij (summing to 1): R_ij =
relu(n_i a_ij - O_i)^p with O_i = 0 for n_i <= 3 else 1, then W_ij = R_ij / sum_j R_ij; a row whose weights
all tie, or whose largest n_i a_ij - O_i is <= 0 (so that every R_ij = 0), keeps a_ij.

Why ``lssar-adaptive`` grows p with log n_i: after re-weighting, the largest weight dominates a row of n
keys only if (n - 1) y^p << 1 for the runner-up's ratio y < 1 to the largest, i.e. p > log n / log(1/y):
the power a fixed sharpness needs grows as log n, as LSSA's own temperature does. The write-up found
p = 3 best at 1K keys and p = 15 at 8K and beyond and names a length-adaptive p as future work; with
``--p 15`` this variant uses 15 at 1,024 keys, 9 at 64 and 21 at 16K.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from orbitlaw.kernels.lssa.naive import reweight
from orbitlaw.kernels.reference import NORM_EPS, attend_mask, key_counts, key_start

ADAPTIVE_P_KEYS = 1024
"""``lssar-adaptive``: the row length at which its power is ``p`` (the write-up's training context)."""


def _scores(q, k, start, stop, window):
    """s = q.k / sqrt(d) for rows start..stop: (s (B, H, rows, keys), mask (rows, keys), n (rows,), j0)."""
    j0 = key_start(start, window)
    s = q[..., start:stop, :] @ k[..., j0:stop, :].transpose(-1, -2) / math.sqrt(q.shape[-1])
    return s, attend_mask(start, stop, j0, window, q.device), key_counts(start, stop, window, q.device, q.dtype), j0


def _cosine(q, k, start, stop, window, length_scale: bool):
    """S = log(d) log(n_i) q^.k^ (or the plain cosine q^.k^), as :func:`_scores` returns s."""
    j0 = key_start(start, window)
    qn = F.normalize(q[..., start:stop, :], dim=-1, eps=NORM_EPS)
    kn = F.normalize(k[..., j0:stop, :], dim=-1, eps=NORM_EPS)
    n = key_counts(start, stop, window, q.device, q.dtype)
    c = qn @ kn.transpose(-1, -2)
    if length_scale:
        c = (math.log(q.shape[-1]) * torch.log(n))[:, None] * c
    return c, attend_mask(start, stop, j0, window, q.device), n, j0


def _l1(e: torch.Tensor) -> torch.Tensor:
    """Rows of a non-negative e divided by their sums (a row summing to 0 stays 0)."""
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_weights(q, k, start, stop, window, p=None):
    s, mask, _, j0 = _scores(q, k, start, stop, window)
    return torch.softmax(s.masked_fill(~mask, -math.inf), dim=-1), j0


def sigmoid_weights(q, k, start, stop, window, p=None):
    s, mask, _, j0 = _scores(q, k, start, stop, window)
    return torch.sigmoid(s - math.log(q.shape[-2])).masked_fill(~mask, 0.0), j0


def relu_weights(q, k, start, stop, window, p=None):
    s, mask, n, j0 = _scores(q, k, start, stop, window)
    return (torch.relu(s) / n[:, None]).masked_fill(~mask, 0.0), j0


def lssa_weights(q, k, start, stop, window, p=None):
    S, mask, _, j0 = _cosine(q, k, start, stop, window, length_scale=True)
    return _l1(F.softplus(S).masked_fill(~mask, 0.0)), j0


def lssar_weights(q, k, start, stop, window, p=15.0):
    S, mask, n, j0 = _cosine(q, k, start, stop, window, length_scale=True)
    return reweight(F.softplus(S).masked_fill(~mask, 0.0), mask, n, p), j0


def softmax_rw_weights(q, k, start, stop, window, p=15.0):
    s, mask, n, j0 = _scores(q, k, start, stop, window)
    e = torch.exp(s - s.masked_fill(~mask, -math.inf).amax(dim=-1, keepdim=True)).masked_fill(~mask, 0.0)
    return reweight(e, mask, n, p), j0


def sigmoid_l1_rw_weights(q, k, start, stop, window, p=15.0):
    s, mask, n, j0 = _scores(q, k, start, stop, window)
    return reweight(torch.sigmoid(s - math.log(q.shape[-2])).masked_fill(~mask, 0.0), mask, n, p), j0


def relu_l1_weights(q, k, start, stop, window, p=None):
    S, mask, _, j0 = _cosine(q, k, start, stop, window, length_scale=True)
    return _l1(torch.relu(S).masked_fill(~mask, 0.0)), j0


def lssa_noscale_weights(q, k, start, stop, window, p=None):
    c, mask, _, j0 = _cosine(q, k, start, stop, window, length_scale=False)
    return _l1(F.softplus(c).masked_fill(~mask, 0.0)), j0


def adaptive_power(n: torch.Tensor, p: float) -> torch.Tensor:
    """``lssar-adaptive``'s per-row power (rows, 1): max(1, p log n_i / log ADAPTIVE_P_KEYS)."""
    return (p * torch.log(n) / math.log(ADAPTIVE_P_KEYS)).clamp_min(1.0)[:, None]


def lssar_adaptive_weights(q, k, start, stop, window, p=15.0):
    S, mask, n, j0 = _cosine(q, k, start, stop, window, length_scale=True)
    return reweight(F.softplus(S).masked_fill(~mask, 0.0), mask, n, adaptive_power(n, p)), j0
