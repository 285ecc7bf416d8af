"""Test-wide settings.

Triton kernels run on the CPU under the interpreter (numpy emulation) unless a CUDA run is asked for
with ORBITLAW_TEST_CUDA=1. The variable must be set before triton is first imported.
"""

import os
import subprocess

import pytest

if os.environ.get("ORBITLAW_TEST_CUDA") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def small_disk(tmp_path):
    """A factory: ``small_disk("2m")`` mounts a tmpfs of that size (a disk that fills up) and returns its path;
    unmounted after the test. Skips where mounting is not allowed (needs root)."""
    mounted = []

    def mount(size: str):
        path = tmp_path / f"small-{len(mounted)}"
        path.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a small tmpfs here (needs root)")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=False)
