"""Packaging: the wheel installs one top-level name, ``orbitlaw``, holding every room
(``orbitlaw.orbits``, ``orbitlaw.models``, ``orbitlaw.kernels``, ``orbitlaw.discovery``), so orbitlaw
installs, works and uninstalls beside Hugging Face's ``kernels`` (the PyPI package that transformers imports,
which owns the top-level name ``kernels``); and a lint rule keeps the bare room names out of imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("orbits", "models", "kernels", "discovery")


def _run(cmd, cwd, timeout=300):
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the tracked files (a build inside the checkout would leave build/
    there, and a stale file in it would reach later wheels)."""
    out, tree = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("tree")
    for name in _run(["git", "ls-files"], ROOT).splitlines():
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    _run([sys.executable, "-m", "pip", "wheel", tree, "--no-deps", "--no-build-isolation", "-q", "-w", out], tree)
    (path,) = out.glob("orbitlaw-*.whl")
    return path


def test_the_wheel_holds_orbitlaw_only_with_every_source_file(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"orbitlaw", wheel.name.split("-py3")[0] + ".dist-info"}
    tracked = _run(["git", "ls-files", "*.py"], ROOT).split()
    expected = {f"orbitlaw/{f}" if f.split("/")[0] in ROOMS else f
                for f in tracked if f.split("/")[0] in ROOMS + ("orbitlaw",)}
    assert expected == {n for n in names if n.endswith(".py")}


def test_orbitlaw_works_beside_hugging_face_kernels(wheel, tmp_path):
    env = tmp_path / "venv"
    venv.create(env, system_site_packages=True, with_pip=False)
    python = env / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    _run(pip + ["--no-deps", wheel], tmp_path)
    _run(pip + ["kernels"], tmp_path)  # Hugging Face's, installed last: it used to overwrite orbitlaw's
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip())
    script = f"""
import kernels, torch
from orbitlaw import orbits
from orbitlaw.kernels import lssar_attention, lssar_reference
from orbitlaw.models import build_model
assert kernels.__file__.startswith({str(site)!r}) and hasattr(kernels, "get_kernel"), kernels.__file__
assert lssar_attention.__module__ == "orbitlaw.kernels.attention"
import orbitlaw.kernels
assert orbitlaw.kernels.__file__ == {str(site / "orbitlaw" / "kernels" / "__init__.py")!r}
q, k, v = torch.randn(3, 1, 2, 16, 8).unbind(0)
torch.testing.assert_close(lssar_attention(q, k, v, backend="torch"), lssar_reference(q, k, v))
orbits.simulate("two-body", {{"train": 4}}, 0, "data", progress=False)
tokens = torch.from_numpy(orbits.load_dataset("data")["train"].tokens[:2, :16].astype("int64"))
model = build_model("tiny", attention="lssar", n_layer=1, n_embd=32, n_head=2)
assert model(tokens)[0].isfinite().all()
print("ok")
"""
    assert _run([python, "-c", script], tmp_path).strip().endswith("ok")
    assert "simulate" in _run([env / "bin" / "orbitlaw", "--help"], tmp_path)
    # uninstalling either leaves the other whole
    _run([sys.executable, "-m", "pip", "--python", python, "uninstall", "-q", "-y", "orbitlaw"], tmp_path)
    assert not list((site / "orbitlaw").rglob("*.py"))  # (numba's cache of the orbit kernels may stay)
    where = _run([python, "-c", "import kernels; kernels.get_kernel; print(kernels.__file__)"], tmp_path)
    assert where.strip() == str(site / "kernels" / "__init__.py")


def test_no_module_imports_a_bare_room_name():
    """Rule TID251 (pyproject.toml): `import kernels` would pick up whichever top-level `kernels` is
    installed (Hugging Face's), so orbitlaw's own code imports `orbitlaw.kernels` and never the bare name."""
    pytest.importorskip("ruff", reason="ruff (a dev dependency) is not installed")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "TID251", "--output-format",
                             "concise", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    planted = ROOT / "tests" / "_planted_bare_import.py"
    try:
        planted.write_text("import kernels\nfrom models.train import train\n")
        result = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "TID251", "--output-format",
                                 "concise", str(planted)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        planted.unlink()
    assert result.returncode == 1 and result.stdout.count("TID251") == 2, result.stdout
