"""Which implementation runs: Triton kernels when they can, the PyTorch reference otherwise.

Triton is imported lazily, so ``import orbitlaw.kernels`` works without it. The Triton kernels run on CUDA
tensors, or on CPU tensors under the Triton interpreter (TRITON_INTERPRET=1 set before triton is first
imported; numpy emulation, slow, for tests only).
"""

from __future__ import annotations

import functools
import os

import torch

from orbitlaw.kernels.checks import check_backend

TRITON_HEAD_DIMS = (16, 32, 64, 128)
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when triton imports (the kernels may still need CUDA or the interpreter to run)."""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a broken install failing at import time
        return False
    return True


MAX_INT_POWER = 64  # integer p up to this use repeated squaring in the kernels; other p use exp2/log2


def integer_power(p: float) -> int:
    """p as a compile-time integer when it is a whole number in 1..MAX_INT_POWER, else 0 (real power)."""
    return int(p) if float(p).is_integer() and 1 <= p <= MAX_INT_POWER else 0


def cuda_kernel_supports_power(p: float) -> bool:
    """Whether the fused LSSAR kernels run power p on CUDA: whole numbers 1..MAX_INT_POWER.

    The real-power path (exp2/log2 of the hardware's approximate fp32 units) matches the float64 reference
    under the Triton interpreter but failed the 1e-5 float32 check on an H200 (p = 2.5, T = 1, 16, 37;
    2026-11-29), so non-integer p runs the PyTorch reference on CUDA until that path is fixed and re-checked.
    """
    return integer_power(p) > 0


def interpreter_enabled() -> bool:
    """True when the Triton interpreter is switched on (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_triton_inputs(q: torch.Tensor) -> None:
    """Raise a one-line error if the Triton kernels cannot run on q's device, dtype or head dim."""
    if not triton_available():
        raise RuntimeError("backend='triton' needs the triton package, which is not importable; use backend='torch'")
    if q.device.type != "cuda" and not (q.device.type == "cpu" and interpreter_enabled()):
        raise RuntimeError(
            "backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1 set before importing "
            f"triton), got device {q.device}"
        )
    if q.dtype not in TRITON_DTYPES:
        raise TypeError(f"backend='triton' supports float32, float16, bfloat16 inputs, got {q.dtype}")
    if q.device.type == "cpu" and q.dtype == torch.bfloat16:
        raise TypeError(
            "backend='triton' cannot run bfloat16 under the Triton interpreter (its tl.dot mishandles it); "
            "use float32 or float16 on the CPU"
        )
    if q.shape[-1] not in TRITON_HEAD_DIMS:
        raise ValueError(
            f"backend='triton' supports head dims {TRITON_HEAD_DIMS}, got D={q.shape[-1]}; use backend='torch'"
        )


def resolve_backend(backend: str, q: torch.Tensor) -> str:
    """Map 'auto' to 'triton' (CUDA tensor, triton importable, supported dtype and head dim) or 'torch'."""
    check_backend(backend)
    if backend != "auto":
        return backend
    usable = (
        q.device.type == "cuda" and q.dtype in TRITON_DTYPES and q.shape[-1] in TRITON_HEAD_DIMS and triton_available()
    )
    return "triton" if usable else "torch"
