"""Packaging: the wheel installs one top-level name, ``orbitlaw``, holding every room
(``orbitlaw.orbits``, ``orbitlaw.models``, ``orbitlaw.kernels``, ``orbitlaw.discovery``), so orbitlaw
installs, works and uninstalls beside Hugging Face's ``kernels`` (the PyPI package that transformers imports,
which owns the top-level name ``kernels``; a stand-in built here, so no test reaches the network) and beside
other distributions' ``models``, ``orbits`` or ``discovery``; and a lint rule keeps the bare room names out of
imports. The test venv sees the packages of whatever environment runs pytest (plain venv, venv with system
site-packages, system install) through a .pth file."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import site
import subprocess
import sys
import sysconfig
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
    _run([sys.executable, "-m", "pip", "wheel", tree, "--no-index", "--no-deps", "--no-build-isolation", "-q",
          "-w", out], tree)
    (path,) = out.glob("orbitlaw-*.whl")
    return path


def test_the_wheel_holds_orbitlaw_only_with_every_source_file(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"orbitlaw", wheel.name.split("-py3")[0] + ".dist-info"}
    tracked = _run(["git", "ls-files", "*.py"], ROOT).split()
    expected = {f"orbitlaw/{f}" if f.split("/")[0] in ROOMS else f
                for f in tracked if f.split("/")[0] in ROOMS + ("orbitlaw",)}
    assert expected == {n for n in names if n.endswith(".py")}


def _stand_in_wheel(out: Path) -> Path:
    """A wheel of another distribution owning the top-level names ``kernels`` (as Hugging Face's ``kernels``
    does, with its ``get_kernel``) and ``models``, ``orbits``, ``discovery``: what orbitlaw must not collide
    with. Written by hand, so the test needs neither the network nor a build backend."""
    name, version = "kernels", "0.0.0+standin"
    files = {f"{room}/__init__.py": f"STAND_IN = {room!r}\n" for room in ROOMS}
    files["kernels/__init__.py"] += "\n\ndef get_kernel(repo_id):\n    return repo_id\n"
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: orbitlaw-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name_in_wheel, text in files.items():
            whl.writestr(name_in_wheel, text)
    return path


def _venv_beside_this_environment(env: Path, cwd: Path) -> tuple[Path, Path]:
    """A venv that sees the site-packages of the environment running the tests (torch, numba, ... wherever
    they were installed: a plain venv, a venv with system site-packages, a system or user install) behind
    its own, through a .pth file; returns its python and its site-packages. Only the site-packages folders
    are listed (not the checkout, which holds folders named kernels/ and models/), as plain paths: the .pth
    files inside them, orbitlaw's editable install among them, are not run."""
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site_dirs = {os.path.realpath(p) for p in (*site.getsitepackages(), sysconfig.get_paths()["purelib"],
                                               sysconfig.get_paths()["platlib"])}
    if site.ENABLE_USER_SITE:
        site_dirs.add(os.path.realpath(site.getusersitepackages()))
    outer = [p for p in dict.fromkeys(os.path.realpath(p) for p in sys.path if p) if p in site_dirs]
    own = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd).strip())
    (own / "_orbitlaw_tests_outer_env.pth").write_text("".join(f"{p}\n" for p in outer))
    return python, own


def test_orbitlaw_works_beside_hugging_face_kernels(wheel, tmp_path):
    """Hugging Face's ``kernels`` (which transformers imports) owns the top-level name ``kernels``; orbitlaw
    used to install one too, and installing theirs overwrote orbitlaw's. A stand-in distribution (offline)
    owning ``kernels``, ``models``, ``orbits`` and ``discovery`` now installs, imports and uninstalls beside
    orbitlaw without either touching the other."""
    env = tmp_path / "venv"
    python, site_dir = _venv_beside_this_environment(env, tmp_path)
    pip = [python, "-m", "pip"]  # this environment's pip, run by the venv's python: it installs into the venv
    install = pip + ["install", "-q", "--no-index", "--no-deps"]
    _run(install + [wheel], tmp_path)
    _run(install + [_stand_in_wheel(tmp_path)], tmp_path)  # installed last: it used to overwrite orbitlaw's
    script = f"""
import kernels, models, orbits, discovery, torch
from orbitlaw import orbits as orbitlaw_orbits
from orbitlaw.kernels import lssar_attention, lssar_reference
from orbitlaw.models import build_model
for module in (kernels, models, orbits, discovery):
    assert module.__file__.startswith({str(site_dir)!r}), module.__file__
    assert module.STAND_IN == module.__name__, module.__file__
assert kernels.get_kernel("x") == "x"
assert lssar_attention.__module__ == "orbitlaw.kernels.attention"
import orbitlaw.kernels
assert orbitlaw.kernels.__file__ == {str(site_dir / "orbitlaw" / "kernels" / "__init__.py")!r}
q, k, v = torch.randn(3, 1, 2, 16, 8).unbind(0)
torch.testing.assert_close(lssar_attention(q, k, v, backend="torch"), lssar_reference(q, k, v))
orbitlaw_orbits.simulate("two-body", {{"train": 4}}, 0, "data", progress=False)
tokens = torch.from_numpy(orbitlaw_orbits.load_dataset("data")["train"].tokens[:2, :16].astype("int64"))
model = build_model("tiny", attention="lssar", n_layer=1, n_embd=32, n_head=2)
assert model(tokens)[0].isfinite().all()
print("ok")
"""
    assert _run([python, "-c", script], tmp_path).strip().endswith("ok")
    assert "simulate" in _run([env / "bin" / "orbitlaw", "--help"], tmp_path)
    # uninstalling either leaves the other whole
    _run(pip + ["uninstall", "-q", "-y", "orbitlaw"], tmp_path)
    assert not list((site_dir / "orbitlaw").rglob("*.py"))  # (numba's cache of the orbit kernels may stay)
    where = _run([python, "-c", "import kernels, models; kernels.get_kernel; print(kernels.__file__, models.__file__)"],
                 tmp_path)
    assert where.split() == [str(site_dir / room / "__init__.py") for room in ("kernels", "models")]
    _run(install + [wheel], tmp_path)
    _run(pip + ["uninstall", "-q", "-y", "kernels"], tmp_path)
    assert not [path for room in ROOMS for path in (site_dir / room).rglob("*.py")]
    where = _run([python, "-c", "import orbitlaw.kernels as k; k.lssar_attention; print(k.__file__)"], tmp_path)
    assert where.strip() == str(site_dir / "orbitlaw" / "kernels" / "__init__.py")


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
