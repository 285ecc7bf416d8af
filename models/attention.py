"""The GPT's attention: every variant of the registry (``orbitlaw.kernels.registry``), by name.

``ATTENTIONS`` lists the names (``orbitlaw train --attention``, the study presets and the figures read it);
``attend(name, q, k, v, p, window, chunk_size)`` runs one on q, k, v of shape (B, H, T, D) and returns
(B, H, T, D). The formulas are in ``orbitlaw.kernels.weights``; which implementation runs (SDPA, fused
Triton, the PyTorch reference) is decided there, once.
"""

from __future__ import annotations

from orbitlaw.kernels.registry import NAMES as ATTENTIONS
from orbitlaw.kernels.registry import attention as attend

__all__ = ["ATTENTIONS", "attend"]
