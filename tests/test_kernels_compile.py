"""The Triton kernels compile for an H100 / H200 (sm_90) on a machine without a GPU.

The interpreter used by tests/test_kernels.py accepts some programs the GPU compiler rejects and never
takes the GPU-only branches; this runs `python -m orbitlaw.kernels.compile_check` (Triton's compiler down to a
cubin, no device needed) in a subprocess without TRITON_INTERPRET.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orbitlaw.kernels.backend import triton_available

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _has_cuda_backend() -> bool:
    if not triton_available():
        return False
    try:
        from triton.backends import backends
    except ImportError:
        return False
    return "nvidia" in backends


@pytest.mark.skipif(not _has_cuda_backend(), reason="triton with its NVIDIA backend is not installed")
def test_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    res = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "orbitlaw.kernels.compile_check", "--arch", "90"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert res.stdout.count(": ok") == 21, res.stdout  # 11 kernel variants, 10 of them again with float64 scalars
    assert res.stdout.count("floats=fp64") == 10, res.stdout
    assert res.stdout.count("'POLY': 2") == 2 and res.stdout.count("'POLY': 4") == 2, res.stdout  # the poly shares
