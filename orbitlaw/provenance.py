"""Provenance, atomic writes and locks: what every room uses when it writes an artefact (the code version,
the versions of the dependencies that change results, a digest of the source, atomic files, output locks).

The toolkit-wide leaf module: every room may import it, and it imports nothing of orbitlaw's."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

RESULT_DEPENDENCIES = ("numpy", "scipy", "torch", "triton", "numba", "rebound", "pyoperon", "pysr", "sympy",
                       "scikit-learn", "safetensors")
"""Packages whose version can change a number orbitlaw writes (recorded beside every code version)."""

ROOMS = ("orbits", "models", "kernels", "discovery")
"""orbitlaw's rooms (installed as ``orbitlaw.<room>``)."""


def _base() -> Path:
    """The folder that holds the rooms: the checkout's root (rooms beside ``orbitlaw/``) or, in an installed
    wheel, the ``orbitlaw/`` package itself (rooms inside it)."""
    here = Path(__file__).resolve().parent
    return here if (here / "orbits").is_dir() else here.parent



def code_version() -> str:
    """orbitlaw's version plus the git commit of the source tree when it is a checkout (``+dirty``)."""
    from importlib import metadata

    try:
        version = metadata.version("orbitlaw")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = _base()
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
    base = _base()
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
    included); :meth:`release` also removes the file. Usable as a context manager: a block that raises also
    removes the directories that taking the lock created, where they are still empty, so a refused run leaves
    nothing behind."""

    def __init__(self, path: Path, what: str):
        self.path, self.what, self._fd, self._made = Path(path), what, None, []

    def acquire(self) -> OutputLock:
        import fcntl

        missing, parent = [], self.path.parent
        while not parent.exists() and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a component of the path is a file
            blocker = next((p for p in self.path.parents if p.exists() and not p.is_dir()), self.path.parent)
            raise ValueError(f"cannot write {self.what}: {blocker} is a file, not a directory") from None
        self._made = missing  # deepest first
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(f"{self.what} is being written by another orbitlaw process; wait for it to finish "
                             "or choose another output") from None
        self._fd = fd
        return self

    @classmethod
    def beside(cls, out: Path, what: str) -> OutputLock:
        """The lock of output ``out`` (a directory or a file): ``.<name>.lock`` next to it, so taking it creates
        nothing inside ``out`` and leaves no trace when released."""
        out = Path(out)
        return cls(out.parent / f".{out.name}.lock", what)

    def release(self) -> None:
        if self._fd is not None:
            try:  # only our own lock file: a failed run may have removed it, and another process made a new one
                if os.path.samestat(os.fstat(self._fd), os.stat(self.path)):
                    self.path.unlink()
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None

    __enter__ = acquire

    def __exit__(self, kind, *exc) -> None:
        self.release()
        if kind is not None:
            for directory in self._made:
                try:
                    directory.rmdir()  # only while empty: whatever the block did write stays
                except OSError:
                    break


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path`` (same suffix, so a writer that infers the format from it, such as
    matplotlib's ``savefig``, works); when the block succeeds the file is fsynced and renamed over ``path``
    (readers see the old file or the new one, never half of one); on any failure, a full disk or a kill
    included, the temporary is removed. The one place the toolkit writes a file atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        with naming(path, tmp):
            yield tmp
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def naming(path: Path, *aliases: Path):
    """Name ``path`` in an OSError raised in the block that names no file, or names one of ``aliases`` (a
    temporary of ``path``): a full disk reported while writing is "No space left on device: PATH", never a bare
    message nor a temporary file the user has never heard of."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None and str(exc.filename) not in {str(a) for a in aliases}:
            raise
        new = OSError(exc.errno, exc.strerror or str(exc), str(path)) if exc.errno else OSError(
            f"{exc}: {path}")
        raise new from None


@contextlib.contextmanager
def undo_on_failure(out: Path, resumable=None, restore: tuple[str, ...] = ()):
    """Leave ``out`` (an output directory) as it was before the block when the block fails, a full disk or an
    interrupt included: every entry of ``out`` the block created is removed, ``out`` itself when the block
    created it and left it empty, and the files of ``out`` named in ``restore`` (small ones the block rewrites,
    such as a run's config.json) get back the bytes they had. Other entries that were there before are never
    touched. ``resumable()`` (when given) true after the failure means the block left a state a re-run
    continues from (a new checkpoint): then nothing is undone, as after a kill. Enter it after taking the
    output's :class:`OutputLock` (what is there then is not this command's)."""
    out = Path(out)
    existed = os.path.lexists(out)
    before = set(os.listdir(out)) if existed and out.is_dir() and not out.is_symlink() else set()
    saved = {name: (out / name).read_bytes() for name in restore if name in before and (out / name).is_file()}
    try:
        yield
    except BaseException:
        try:
            keep = resumable is not None and bool(resumable())
        except Exception:  # an output that cannot be read back: never remove what may be worth keeping
            keep = True
        if not keep:
            remove_created(out, existed, before)
            for name, data in saved.items():
                _put_back(out / name, data)
        raise


def _put_back(path: Path, data: bytes) -> None:
    """Give ``path`` the bytes ``data`` again, best effort (the failure being reported matters more): a file
    that only grew (appended rows) is truncated in place, which needs no disk space; another is rewritten."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
        with open(path, "rb") as f:
            grew = f.read(len(data)) == data
        if grew:
            os.truncate(path, len(data))
        else:
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)


def remove_created(out: Path, existed: bool, before: set[str]) -> None:
    """Remove the entries of directory ``out`` not named in ``before``, then ``out`` when it did not exist
    (``existed`` false) and is empty (see :func:`undo_on_failure`)."""
    out = Path(out)
    if not out.is_dir() or out.is_symlink():
        if not existed:
            out.unlink(missing_ok=True)
        return
    for name in set(os.listdir(out)) - set(before):
        entry = out / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not existed:
        with contextlib.suppress(OSError):
            out.rmdir()


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


@contextlib.contextmanager
def staged_directory(out: Path):
    """Yield a new staging directory beside ``out`` (``.NAME.<random>.staging``, mode 0755: never a name another
    command resumes from, nor one a concurrent call shares) to build ``out`` in; when the block succeeds it is
    renamed to ``out``, and on any failure removed: ``out`` is whole or absent."""
    import tempfile

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".staging", dir=out.parent))
    os.chmod(stage, 0o755)
    try:
        yield stage
        os.replace(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
