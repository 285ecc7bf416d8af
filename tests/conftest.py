"""Test-wide settings.

Triton kernels run on the CPU under the interpreter (numpy emulation) unless a CUDA run is asked for
with ORBITLAW_TEST_CUDA=1. The variable must be set before triton is first imported.
"""

import os

if os.environ.get("ORBITLAW_TEST_CUDA") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
