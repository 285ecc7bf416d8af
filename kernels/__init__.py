"""Attention kernels of orbitlaw: fused Triton LSSA / LSSAR (forward and backward, O(T) memory), their
plain PyTorch references, LASER on top of PyTorch SDPA, and the registry of every attention by name
(``orbitlaw.kernels.registry``: the definitions in ``orbitlaw.kernels.weights``).

All functions take causal q, k, v of shape (B, H, T, D) and return (B, H, T, D). Importing this package
does not import triton; without it, backend="auto" runs the PyTorch references.
"""

from orbitlaw.kernels.attention import lssa_attention, lssar_attention
from orbitlaw.kernels.backend import TRITON_HEAD_DIMS, cuda_kernel_supports_power, triton_available
from orbitlaw.kernels.reference import laser_attention, lssa_reference, lssar_reference

__all__ = [
    "TRITON_HEAD_DIMS",
    "cuda_kernel_supports_power",
    "laser_attention",
    "lssa_attention",
    "lssa_reference",
    "lssar_attention",
    "lssar_reference",
    "triton_available",
]
