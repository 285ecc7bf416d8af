"""The Triton kernels compile for an H100 / H200 (sm_90) on a machine without a GPU.

The interpreter used by tests/test_kernels.py accepts some programs the GPU compiler rejects and never
takes the GPU-only branches; this runs `python -m orbitlaw.kernels.compile_check` (Triton's compiler down to a
cubin, no device needed) in a subprocess without TRITON_INTERPRET.
"""

from __future__ import annotations

import json
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


KERNEL_COST_CHECK = """
import json, sys
sys.path.insert(0, "benchmarks")
import kernel_cost as kc
out = {}
for q in (0, 4):
    name, kernel, cx, warps, stages, per_thread = {c[0]: c for c in kc.kernel_cases(q)}["lssar_forward"]
    sass = kc.sass_of(kc._compile(kernel, "bf16", cx, warps, stages, 90).asm["cubin"])
    if sass is None:
        print(json.dumps(None)); sys.exit()
    loops = kc.sass_loops(sass)
    totals = {}
    for i in kc.OFF_DIAGONAL_LOOPS[kernel]:
        for k, n in kc.sass_pipes(loops[i]).items():
            totals[k] = totals.get(k, 0) + n
    out[q] = {"loops": len(loops), "mufu": {k: n / per_thread for k, n in totals.items() if k.startswith("mufu.")},
              "mac_per_score": totals["tensor_mac"] * (warps / 4) / (cx["BLOCK_M"] * cx["BLOCK_N"])}
print(json.dumps(out))
"""


@pytest.mark.skipif(not _has_cuda_backend(), reason="triton with its NVIDIA backend is not installed")
def test_kernel_cost_reads_the_special_functions_from_the_sass():
    """benchmarks/kernel_cost.py counts from compiled sm_90 code (in a process without TRITON_INTERPRET): LSSAR's
    forward issues one MUFU.EX2 per score in each pass at poly share 0 and none at share 1, and 4 D tensor-core
    MACs per score (QK^T in each pass, PV and (E g) V in the second)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", KERNEL_COST_CHECK], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = json.loads(res.stdout.strip().splitlines()[-1])
    if counts is None:
        pytest.skip("cuobjdump is not available")
    assert counts["0"] == {"loops": 4, "mufu": {"mufu.EX2": 2.0}, "mac_per_score": 256.0}
    assert counts["4"] == {"loops": 4, "mufu": {}, "mac_per_score": 256.0}


@pytest.mark.slow
@pytest.mark.skipif(not _has_cuda_backend(), reason="triton with its NVIDIA backend is not installed")
def test_every_autotune_config_compiles_for_sm90():
    """Every autotuning config (tiles x the poly shares "auto" tunes over, bf16 and fp16, D 64 and 128):
    `compile_check --all`, about half an hour on one core (run with -m slow)."""
    from orbitlaw.kernels.compile_check import cases
    from orbitlaw.kernels.lssa.launch import TUNED_POLY_QUARTERS

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-W", "ignore", "-m", "orbitlaw.kernels.compile_check", "--all"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=7200)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    full = cases(full=True)
    assert {c[2].get("POLY") for c in full if "POLY" in c[2]} == set(TUNED_POLY_QUARTERS)
    assert res.stdout.count(": ok") == len(full) + len([c for c in cases() if c[0] in ("lssa_forward", "lssar_forward",
                                                                                      "coefficients", "dkdv", "dq")])
