"""Attention kernels of orbitlaw: fused Triton LSSA / LSSAR (forward and backward, O(T) memory), their
plain PyTorch references, LASER on top of PyTorch SDPA, and the registry of every attention by name.

All functions take causal q, k, v of shape (B, H, T, D) and return (B, H, T, D). Importing this package
does not import triton; without it, backend="auto" runs the PyTorch references.

Layout:
  ``attention.py``      lssa_attention, lssar_attention: the one place that picks Triton or the reference
  ``backend.py``        whether triton is usable, on which device, dtype and head dim; ``checks.py`` inputs
  ``lssa/``             the LSSA / LSSAR op, as flash-linear-attention's ``ops/<op>/``: ``naive.py`` the
                        PyTorch references, ``fused.py`` the Triton op on ``forward.py`` and ``backward.py``
                        (one set of kernels for both, REWEIGHT selecting LSSAR), ``tiles.py``, ``launch.py``
  ``reference.py``      what every PyTorch reference shares (query chunks, causal masks) and LASER
  ``weights.py``        the attention weights of every variant, in PyTorch; ``registry.py`` every attention
                        by name (``orbitlaw.kernels.registry``)
  ``compile_check.py``  compiles the kernels for a GPU architecture without a GPU
"""

from orbitlaw.kernels.attention import lssa_attention, lssar_attention
from orbitlaw.kernels.backend import TRITON_HEAD_DIMS, cuda_kernel_supports_power, triton_available
from orbitlaw.kernels.lssa.naive import lssa_reference, lssar_reference
from orbitlaw.kernels.reference import laser_attention

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
