"""Public entry points: causal LSSA and LSSAR attention on the best available backend.

backend="triton" runs the fused Triton kernels (CUDA tensors, or CPU tensors under TRITON_INTERPRET=1),
"torch" the plain PyTorch reference, "auto" Triton on CUDA when it is importable and supports the dtype,
head dim and (LSSAR) power, the reference otherwise (never the slow interpreter). This is the one place
that decides: the model and the registry (``orbitlaw.kernels.registry``) call these functions. The fused
kernels run full causal attention in O(T) memory: a sliding ``window`` runs the reference, and
``chunk_size`` (the reference's memory bound) matters only where the reference runs. On CUDA the
LSSAR kernels take whole-number p in 1..64 only (see ``backend.cuda_kernel_supports_power``).
"""

from __future__ import annotations

import torch

from orbitlaw.kernels.backend import check_triton_inputs, cuda_kernel_supports_power, resolve_backend
from orbitlaw.kernels.checks import check_p, check_qkv, poly_quarters
from orbitlaw.kernels.lssa.naive import lssa_reference, lssar_reference


def _fused_only_full(backend: str, window) -> str:
    """'auto' runs the reference for a window; 'triton' refuses one."""
    if backend == "triton" and window is not None:
        raise ValueError("backend='triton' runs full causal attention; a sliding window needs backend 'torch' or "
                         "'auto'")
    return "torch" if backend == "auto" and window is not None else backend


def lssa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, backend: str = "auto",
                   window: int | None = None, chunk_size: int | None = None,
                   poly_share: float | str = 0.0) -> torch.Tensor:
    """Causal length-scaled softplus attention (LSSA).

    Args:
        q, k, v: (B, H, T, D) queries, keys, values (one float dtype and device).
        backend: "auto", "triton" or "torch".
        window, chunk_size: sliding window and query-chunk size of the reference (module doc).
        poly_share: where the Triton kernels run, the share of each score tile's special functions (exp,
            reciprocal, real power) computed on the FMA pipes: 0, 0.25, 0.5, 0.75, 1, or "auto" (tuned with
            the tile sizes on CUDA). 0, the default, is the kernels as before the option.
    Returns:
        (B, H, T, D) output in the input dtype.
    """
    check_qkv(q, k, v)
    poly_quarters(poly_share)
    backend = _fused_only_full(backend, window)
    if resolve_backend(backend, q) == "torch":
        return lssa_reference(q, k, v, window=window, chunk_size=chunk_size)
    check_triton_inputs(q)
    from orbitlaw.kernels.lssa.fused import lssa_triton

    return lssa_triton(q, k, v, poly_share=poly_share)


def lssar_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float = 15.0, backend: str = "auto",
    window: int | None = None, chunk_size: int | None = None, poly_share: float | str = 0.0,
) -> torch.Tensor:
    """Causal LSSA with re-weighting (LSSAR) of power p.

    Args:
        q, k, v: (B, H, T, D) queries, keys, values (one float dtype and device).
        p: re-weighting power, > 0 (the paper uses 3 and 15); integer p up to 64 avoid pow in the kernel.
        backend: "auto", "triton" or "torch".
        window, chunk_size: sliding window and query-chunk size of the reference (module doc).
        poly_share: as :func:`lssa_attention`.
    Returns:
        (B, H, T, D) output in the input dtype.
    """
    check_qkv(q, k, v)
    p = check_p(p)
    poly_quarters(poly_share)
    backend = _fused_only_full(backend, window)
    if backend == "auto" and q.is_cuda and not cuda_kernel_supports_power(p):
        backend = "torch"
    if resolve_backend(backend, q) == "torch":
        return lssar_reference(q, k, v, p=p, window=window, chunk_size=chunk_size)
    check_triton_inputs(q)
    if q.is_cuda and not cuda_kernel_supports_power(p):
        raise ValueError(f"backend='triton' runs LSSAR on CUDA for whole-number p in 1..64 only, got p={p}; "
                         "use backend='auto' or 'torch'")
    from orbitlaw.kernels.lssa.fused import lssar_triton

    return lssar_triton(q, k, v, p, poly_share=poly_share)
