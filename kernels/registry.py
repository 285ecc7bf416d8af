"""Every attention of orbitlaw, by name: the one table that the model, the CLI, the study and the figures read.

Adding an attention is one entry in ``ATTENTIONS``: its weights (the plain PyTorch definition, in
``orbitlaw.kernels.weights``), a one-line summary, whether it takes the power ``p``, and optionally a fast
implementation. :func:`attention` runs the fast implementation when there is one (it picks its own
backend once: PyTorch SDPA for softmax and LASER, the fused Triton kernels for LSSA and LSSAR on CUDA, the
reference elsewhere) and the reference otherwise. :func:`reference` is the plain PyTorch definition every
fast path is tested against (tests/test_attention_registry.py), and :func:`weights` gives the (B, H, T, T)
weights for inspection (attention maps, entropy).

All functions take causal q, k, v of shape (B, H, T, D) and return (B, H, T, D) in the input dtype;
positions are 1-based (query i attends keys j <= i, or the last ``window`` of them). ``chunk_size``
evaluates the queries in blocks so that at most chunk_size x T scores exist at once (how long contexts
are evaluated on the CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from orbitlaw.kernels import weights as w
from orbitlaw.kernels.attention import lssa_attention, lssar_attention
from orbitlaw.kernels.checks import check_chunk_size, check_p, check_qkv, check_window
from orbitlaw.kernels.reference import attend_mask, compute_dtype, laser_attention, query_chunks, run_chunked


def _sdpa_softmax(q, k, v, p, window, chunk_size):
    """softmax through PyTorch SDPA (flash / memory-efficient kernels where they apply)."""
    if window is None and chunk_size is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    outs = []
    for start, stop in query_chunks(q.shape[-2], chunk_size):
        mask = attend_mask(start, stop, 0, window, q.device)
        outs.append(F.scaled_dot_product_attention(q[..., start:stop, :], k[..., :stop, :], v[..., :stop, :],
                                                   attn_mask=mask))
    return torch.cat(outs, dim=-2)


@dataclass(frozen=True)
class Attention:
    """One attention variant.

    weights: ``(q, k, start, stop, window, p) -> (W, j0)`` (``orbitlaw.kernels.weights``); summary: one line;
    uses_p: whether the power ``p`` changes it; fast: ``(q, k, v, p, window, chunk_size) -> out``, the
    implementation that runs when there is one; laser: the output is log(W exp(v - m)) + m instead of W v.
    """

    weights: Callable
    summary: str
    uses_p: bool = False
    fast: Callable | None = None
    laser: bool = False


ATTENTIONS: dict[str, Attention] = {
    "softmax": Attention(w.softmax_weights, "softmax(q.k / sqrt d) through PyTorch SDPA", fast=_sdpa_softmax),
    "lssa": Attention(w.lssa_weights, "length-scaled softplus attention (fused Triton on CUDA)",
                      fast=lambda q, k, v, p, window, chunk: lssa_attention(q, k, v, window=window, chunk_size=chunk)),
    "lssar": Attention(w.lssar_weights, "LSSA with re-weighting of power p (fused Triton on CUDA)", uses_p=True,
                       fast=lambda q, k, v, p, window, chunk: lssar_attention(q, k, v, p=p, window=window,
                                                                              chunk_size=chunk)),
    "laser": Attention(w.softmax_weights, "LASER: log(softmax(q.k / sqrt d) exp(V - m)) + m on SDPA",
                       fast=lambda q, k, v, p, window, chunk: laser_attention(q, k, v, window=window, chunk_size=chunk),
                       laser=True),
    "sigmoid": Attention(w.sigmoid_weights, "sigmoid(q.k / sqrt d - log T), not normalised (Ramapuram et al.)"),
    "relu": Attention(w.relu_weights, "relu(q.k / sqrt d) / n_i, not normalised (Wortsman et al.)"),
    "softmax-rw": Attention(w.softmax_rw_weights, "ablation: re-weighting of power p on top of softmax",
                            uses_p=True),
    "sigmoid-l1-rw": Attention(w.sigmoid_l1_rw_weights, "ablation: sigmoid, L1 normalisation, re-weighting of "
                               "power p", uses_p=True),
    "relu-l1": Attention(w.relu_l1_weights, "ablation: LSSA with ReLU as the non-negative function"),
    "lssa-noscale": Attention(w.lssa_noscale_weights, "ablation: LSSA without the log d log n scale"),
    "lssar-adaptive": Attention(w.lssar_adaptive_weights, "LSSAR with a length-adaptive power, p at 1,024 keys "
                                "and p log n / log 1024 elsewhere", uses_p=True),
}

NAMES = tuple(ATTENTIONS)


def sweep(p: float = 15.0) -> dict[str, tuple[str, float]]:
    """The variants a comparison sweeps (``benchmarks/experiments/extrapolation.py``,
    ``benchmarks/experiments/passkey.py``): label -> (attention, p), every registered attention at ``p`` and LSSAR
    also at p = 3 (the write-up's two powers)."""
    return {**{name: (name, p) for name in NAMES}, "lssar-p3": ("lssar", 3.0)}


def get(name: str) -> Attention:
    """The entry of ``name``; a one-line ValueError naming the choices for an unknown name."""
    if name not in ATTENTIONS:
        raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(NAMES)}")
    return ATTENTIONS[name]


def attention(name: str, q, k, v, p: float = 15.0, window: int | None = None, chunk_size: int | None = None):
    """Attention ``name`` on its fastest implementation for these inputs (module doc)."""
    spec = get(name)
    if spec.fast is not None:
        return spec.fast(q, k, v, p, window, chunk_size)
    return reference(name, q, k, v, p=p, window=window, chunk_size=chunk_size)


def reference(name: str, q, k, v, p: float = 15.0, window: int | None = None, chunk_size: int | None = None):
    """Attention ``name`` from its weights in plain PyTorch: ``W @ v`` over query chunks (checkpointed under
    autograd), computed in float32 (float64 for float64 inputs); LASER as log(W exp(v - m)) + m with m the
    per-channel max of v (without LASER's underflow repair: for moderate values)."""
    spec = get(name)
    _, _, T, _ = check_qkv(q, k, v)
    window, chunk_size = check_window(window), check_chunk_size(chunk_size)
    p = check_p(p)
    dtype = compute_dtype(q.dtype)
    qc, kc, vc = q.to(dtype), k.to(dtype), v.to(dtype)
    if spec.laser:
        m = vc.detach().amax(dim=-2, keepdim=True)
        vc = torch.exp(vc - m)

    def chunk(q_, k_, v_, start, stop):
        weights, j0 = spec.weights(q_, k_, start, stop, window, p)
        return weights @ v_[..., j0:stop, :]

    out = run_chunked(chunk, (qc, kc, vc), T, chunk_size)
    if spec.laser:
        out = torch.log(out.clamp_min(torch.finfo(dtype).tiny)) + m
    return out.to(q.dtype)


def weights(name: str, q, k, p: float = 15.0, window: int | None = None) -> torch.Tensor:
    """(B, H, T, T) weights of attention ``name`` for q, k (B, H, T, D), in float32 (float64 for float64
    inputs): entry [b, h, i, j] is the weight query i puts on key j (0 outside the causal mask and window).
    LASER's are its softmax weights (it mixes exp(v) with them)."""
    spec = get(name)
    T = q.shape[-2]
    dtype = compute_dtype(q.dtype)
    out, _ = spec.weights(q.to(dtype), k.to(dtype), 0, T, check_window(window), check_p(p))
    return out


def describe() -> str:
    """One line per attention, for ``--help``: ``name: summary``."""
    return "; ".join(f"{name}: {spec.summary}" for name, spec in ATTENTIONS.items())

