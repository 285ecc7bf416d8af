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


@pytest.mark.skipif(not _has_cuda_backend(), reason="triton with its NVIDIA backend is not installed")
def test_kernel_cost_reads_the_special_functions_from_the_sass(monkeypatch):
    """benchmarks/kernel_cost.py counts from compiled sm_90 code: LSSAR's forward issues one MUFU.EX2 per score
    in each pass at poly share 0 and none at share 1, and its dq kernel an exp and a reciprocal per score."""
    import importlib.util

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = importlib.util.spec_from_file_location("kernel_cost", os.path.join(ROOT, "benchmarks", "kernel_cost.py"))
    kc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kc)
    cases = {q: {c[0]: c for c in kc.kernel_cases(q)} for q in (0, 4)}
    for q, mufu in ((0, {"mufu.EX2": 2.0}), (4, {})):
        name, kernel, cx, warps, stages, per_thread = cases[q]["lssar_forward"]
        compiled = kc._compile(kernel, "bf16", cx, warps, stages, 90)
        sass = kc.sass_of(compiled.asm["cubin"])
        if sass is None:
            pytest.skip("cuobjdump is not available")
        loops = kc.sass_loops(sass)
        assert len(loops) == 4  # two passes, each over the off-diagonal blocks and the diagonal ones
        totals = {}
        for i in kc.OFF_DIAGONAL_LOOPS[kernel]:
            for k, n in kc.sass_pipes(loops[i]).items():
                totals[k] = totals.get(k, 0) + n
        assert {k: n / per_thread for k, n in totals.items() if k.startswith("mufu.")} == mufu
        # tensor-core MACs per score: QK^T in each pass, PV and (E g) V in the second: 4 D at D = 64
        assert totals["tensor_mac"] * (warps / 4) / (cx["BLOCK_M"] * cx["BLOCK_N"]) == 256
