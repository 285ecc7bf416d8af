"""Input validation shared by every attention entry point; each failure is one clear line."""

from __future__ import annotations

import math

import torch

BACKENDS = ("auto", "torch", "triton")


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int]:
    """Check that q, k, v are tensors of one shape (B, H, T, D), dtype and device; return (B, H, T, D)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, H, T, D), got {type(x).__name__}")
        if x.ndim != 4:
            raise ValueError(f"{name} must have shape (B, H, T, D) (4 dims), got {x.ndim} dims {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must have the same shape (B, H, T, D), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k, v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"q, k, v must be on the same device, got {q.device}, {k.device}, {v.device}")
    B, H, T, D = q.shape
    if T < 1 or D < 1:
        raise ValueError(f"sequence length T and head dim D must be >= 1, got T={T}, D={D}")
    return B, H, T, D


def check_p(p: float) -> float:
    """Check the LSSAR power p (> 0, finite); return it as a float."""
    if isinstance(p, torch.Tensor) or not isinstance(p, (int, float)):
        raise TypeError(f"p must be a Python number, got {type(p).__name__}")
    if not math.isfinite(p) or p <= 0:
        raise ValueError(f"p must be a finite number > 0, got {p}")
    return float(p)


def _none_or_at_least_one(name: str, value: int | None) -> int | None:
    """value when it is None or an int >= 1 (not a bool); else a one-line ValueError naming ``name``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
    return value


def check_window(window: int | None) -> int | None:
    """Check a sliding-window length (keys per query, >= 1) or None for full causal attention."""
    return _none_or_at_least_one("window", window)


def check_chunk_size(chunk_size: int | None) -> int | None:
    """Check a query chunk length (>= 1) or None for all queries at once."""
    return _none_or_at_least_one("chunk_size", chunk_size)


def check_backend(backend: str) -> str:
    """Check the backend name: one of 'auto', 'torch', 'triton'."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


POLY_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
"""The shares of each score tile's exp, reciprocal and real power that the fused kernels may compute on the
FMA pipes instead of the special-function unit (``orbitlaw.kernels.lssa.fma``), in quarters of a tile."""


def poly_quarters(share) -> int | None:
    """A poly share (one of POLY_SHARES) as quarters 0..4, or None for "auto"; a one-line ValueError else."""
    if isinstance(share, str) and share == "auto":
        return None
    if isinstance(share, bool) or not isinstance(share, (int, float)) or float(share) not in POLY_SHARES:
        raise ValueError(f"poly_share must be one of {', '.join(map(str, POLY_SHARES))} or 'auto', got {share!r}")
    return round(float(share) * 4)
