"""Provenance helpers shared by everything that writes an artefact: the code version, the versions of the
dependencies that change results, a digest of the source, atomic JSON."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

RESULT_DEPENDENCIES = ("numpy", "scipy", "torch", "triton", "numba", "rebound", "pyoperon", "pysr", "sympy",
                       "scikit-learn", "safetensors")
"""Packages whose version can change a number orbitlaw writes (recorded beside every code version)."""

ROOMS = ("orbits", "models", "kernels", "discovery")
"""orbitlaw's rooms (installed as ``orbitlaw.<room>``)."""



def code_version() -> str:
    """orbitlaw's version plus the git commit of the source tree when it is a checkout (``+dirty``)."""
    from importlib import metadata

    try:
        version = metadata.version("orbitlaw")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        return f"{version}+g{commit}" + (".dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return version


@functools.lru_cache(maxsize=1)
def dependency_versions() -> dict[str, str | None]:
    """{package: installed version or None} for :data:`RESULT_DEPENDENCIES`, plus Python's version."""
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in RESULT_DEPENDENCIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _source_files() -> list[tuple[str, Path]]:
    """(name inside the package, file) for every Python source of orbitlaw and its rooms, the same names
    whether the rooms sit beside ``orbitlaw/`` (a checkout) or inside it (an installed wheel)."""
    base = Path(__file__).resolve().parent.parent  # the checkout's root, or the installed orbitlaw/
    rooms = [base / room for room in ROOMS]
    core = base if base.name == "orbitlaw" and (base / "cli.py").is_file() else base / "orbitlaw"
    files = [(f"orbitlaw/{f.relative_to(core)}", f) for f in core.rglob("*.py")
             if not any(f.is_relative_to(room) for room in rooms)]
    for room in rooms:
        files += [(f"orbitlaw/{room.name}/{f.relative_to(room)}", f) for f in room.rglob("*.py")]
    return sorted(files)


def source_digest() -> str:
    """sha256 (16 hex digits) of every Python source file of the toolkit, by name and content: changes
    with any code change, committed or not, and with nothing else (README edits do not count); the same
    for a checkout and the wheel built from it."""
    digest = hashlib.sha256()
    for name, f in _source_files():
        digest.update(name.encode())
        digest.update(hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()[:16]


class OutputLock:
    """An exclusive lock on an output that one process writes at a time (``fcntl.flock`` on ``path``, a
    small file beside or inside the output): a second orbitlaw run into the same output gets a one-line
    ValueError instead of interleaving its writes. The OS drops the lock when the process dies (kill -9
    included); :meth:`release` also removes the file. Usable as a context manager."""

    def __init__(self, path: Path, what: str):
        self.path, self.what, self._fd = Path(path), what, None

    def acquire(self) -> OutputLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(f"{self.what} is being written by another orbitlaw process; wait for it to finish "
                             "or choose another output") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path`` (same suffix, so a writer that infers the format from it, such as
    matplotlib's ``savefig``, works); when the block succeeds the file is fsynced and renamed over ``path``
    (readers see the old file or the new one, never half of one); on any failure, a full disk or a kill
    included, the temporary is removed. The one place the toolkit writes a file atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: Path, obj) -> None:
    """Write JSON to ``path`` atomically (:func:`atomic_path`): readers see old or new, never half."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def inside(root: Path, path: Path, what: str) -> Path:
    """``path`` with every link and '..' resolved, when it stays inside ``root`` (also resolved); else a
    one-line ValueError naming ``path``. Every file a command reads from a run or a dataset goes through
    here, so a link (or a recorded name) leading out of it is refused before anything is read from it, and
    the message never quotes the target's contents. ``what`` names the container ("run", "dataset")."""
    try:
        real_root, real = Path(root).resolve(), Path(path).resolve()
    except (OSError, RuntimeError):  # a loop of links
        raise ValueError(f"{path} is a loop of links: the {what} {root} is damaged or was tampered with") from None
    if real != real_root and not real.is_relative_to(real_root):
        raise ValueError(f"{path} leads outside the {what} {root} (a link or '..' out of it): refusing to read it")
    return real
