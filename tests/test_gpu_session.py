"""benchmarks/gpu_session.sh --dry-run: the prepared GPU run checked on a machine without a GPU.

The dry run executes nothing on a device; it checks that every script of the session exists, imports and
accepts each flag it is given, and that the pytest selection collects, so the few minutes of a lent GPU are
not lost to a typo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"


def _dry_run(script: Path, tmp_path: Path, *sections: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(tmp_path / "out")}
    return subprocess.run(["bash", str(script), "--dry-run", *sections], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_dry_run_checks_every_section(tmp_path):
    res = _dry_run(SCRIPT, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    for n in ("1.", "2.", "3.", "4."):
        assert f"=== {n}" in res.stdout
    assert "tests collected" in res.stdout and "failed: 0" in res.stdout
    assert "--poly-shares 0.5 1" in res.stdout and "--steps 50" in res.stdout
    assert not (tmp_path / "out" / "attention_cuda.json").exists()  # nothing ran


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_dry_run_fails_on_a_flag_a_script_does_not_take(tmp_path):
    bad = tmp_path / "gpu_session.sh"
    bad.write_text(SCRIPT.read_text().replace("--poly-shares 0.5", "--poly-sharez 0.5"))
    res = _dry_run(bad, tmp_path, "2")
    assert res.returncode == 1 and "flag --poly-sharez is not accepted" in res.stdout, res.stdout[-2000:]
    assert "=== 1." not in res.stdout  # only the section asked for


def test_unknown_section_is_refused(tmp_path):
    res = _dry_run(SCRIPT, tmp_path, "7")
    assert res.returncode == 2 and "unknown argument 7" in res.stderr
