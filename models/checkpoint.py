"""Training checkpoints: weights as safetensors plus the trainer state, written atomically.

Layout inside a run directory::

    RUN/ckpt-<step>/model.safetensors   the weights (float32, as trained)
    RUN/ckpt-<step>/trainer.pt          optimiser state, RNG states, step, data position, configs
    RUN/ckpt-<step>/checksums.json      {"sha256": {file name: hex digest}} of the two files above
    RUN/latest                          the name of the newest complete checkpoint directory

A checkpoint directory is written under a temporary name, fsynced and renamed; ``latest`` is then
replaced atomically, and older checkpoints are removed. A kill at any moment leaves ``latest`` naming a
complete checkpoint.

Opening someone else's run is safe: weights load from safetensors only (:func:`load_weights`, all that
``evaluate`` and the probes need); the trainer state loads with ``torch.load(weights_only=True)``, which
rebuilds tensors and plain containers and refuses any other pickled object (RNG states are stored as
tensors and numbers); ``latest`` must name a ``ckpt-<step>`` directory inside the run, and no file of a
checkpoint (``latest`` and the checkpoint directory included) may be a link out of the run.

Nothing damaged is computed on: every file read is checked against ``checksums.json`` (sha256, about
1 GB/s: 0.4 s for the 436 MB of a 109M-parameter model), and a mismatch is a one-line ValueError naming
the file. A checkpoint without ``checksums.json`` (one written before checksums existed, or one whose record
was removed, which would otherwise turn every check off) is refused, unless the user asks for it explicitly:
``orbitlaw --allow-unchecked COMMAND`` or ``ORBITLAW_ALLOW_UNCHECKED=1`` (:data:`ALLOW_UNCHECKED_ENV`); it then
loads unchecked, and the next save of a resumed run writes one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from orbitlaw.provenance import inside, write_text_atomic

CHECKSUMS = "checksums.json"
ALLOW_UNCHECKED_ENV = "ORBITLAW_ALLOW_UNCHECKED"
"""Set to 1 (``orbitlaw --allow-unchecked`` does) to load a checkpoint that has no checksums, unchecked."""
_CHECKED = ("model.safetensors", "trainer.pt")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(run: Path, step: int, model: torch.nn.Module, trainer_state: dict) -> Path:
    """Write checkpoint ``ckpt-<step>`` atomically and point ``latest`` at it."""
    run = Path(run)
    final = run / f"ckpt-{step:08d}"
    tmp = run / f".ckpt-{step:08d}.tmp"
    for stray in run.glob(".ckpt-*.tmp"):  # left by a kill during an earlier save
        shutil.rmtree(stray, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(weights, tmp / "model.safetensors")
        torch.save(trainer_state, tmp / "trainer.pt")
        sums = {name: _sha256(tmp / name) for name in _CHECKED}
        (tmp / CHECKSUMS).write_text(json.dumps({"sha256": sums}, indent=2, sort_keys=True) + "\n")
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(tmp)
    except BaseException as exc:  # a full disk or a kill mid-save: nothing half-written is left
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, (OSError, SafetensorError, RuntimeError)):
            full = getattr(exc, "errno", None) == errno.ENOSPC or shutil.disk_usage(run).free < 1 << 20
            reason = ("No space left on device" if full  # torch and safetensors report it cryptically
                      else " ".join(str(exc).split())[:200])
            raise OSError(f"could not write checkpoint {final.name} in {run}: {reason}") from None
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    write_text_atomic(run / "latest", final.name + "\n")
    _fsync_dir(run)
    for old in run.glob("ckpt-*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest(run: Path) -> Path | None:
    """The newest complete checkpoint directory of ``run``, or None.

    ``latest`` and the directory it names must stay inside ``run`` (links are resolved); a pointer that is
    not ``ckpt-<8 digits>`` is refused without quoting it (it may be any file's contents)."""
    run = Path(run)
    pointer = run / "latest"
    if not pointer.exists() and not pointer.is_symlink():
        return None
    real = inside(run, pointer, "run")
    if not real.is_file():
        raise ValueError(f"{pointer} is not a file: the run directory is damaged or was tampered with")
    with open(real, "rb") as f:
        head = f.read(64)  # a checkpoint name is 13 characters: never read a large file whole
    name = head.decode("ascii", errors="replace").strip()
    if not re.fullmatch(r"ckpt-\d{8}", name):  # never an absolute path, '..' or another directory
        raise ValueError(f"{pointer} holds something that is not a checkpoint of this run (ckpt-<8 digits>): the "
                         "run directory is damaged or was tampered with")
    path = run / name
    inside(run, path, "run")
    if not path.is_dir():
        raise ValueError(f"{pointer} names {name}, which is missing: the run directory is damaged")
    return path


def weights_dir(run: Path) -> Path | None:
    """Where a model's weights are: the newest checkpoint of a run directory, or a pretrained folder itself
    (``model.safetensors`` beside its ``checksums.json``, :mod:`orbitlaw.models.hub`); None if neither."""
    run = Path(run)
    ckpt = latest(run)
    if ckpt is None and (run / "model.safetensors").exists():
        return run
    return ckpt


def weights_id(run: Path) -> str:
    """Which weights a model directory holds, for a record of what was computed on them: the newest checkpoint's
    name in a run (a run trained further is another model), the weights' sha256 in a pretrained folder."""
    where = weights_dir(run)
    if where is None:
        raise ValueError(f"{run} has no checkpoint")
    if where.name.startswith("ckpt-"):
        return where.name
    return "sha256:" + _sha256(_checked_file(where, "model.safetensors"))  # checked (or allowed unchecked) first


def _sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 8 MiB pieces (about 1 GB/s)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(8 << 20):
            digest.update(piece)
    return digest.hexdigest()


def _checked_file(path: Path, name: str) -> Path:
    """``path/name`` (a checkpoint directory's file), refused unless it stays inside ``path`` and matches
    the sha256 recorded in ``path/checksums.json`` (a checkpoint written before checksums has none: then
    refused unless :data:`ALLOW_UNCHECKED_ENV` is set, see the module docstring). One-line ValueError naming the
    file."""
    path = Path(path)
    file = inside(path, path / name, "checkpoint")
    record = path / CHECKSUMS
    if not record.exists() and not record.is_symlink():
        if os.environ.get(ALLOW_UNCHECKED_ENV) == "1":
            return file
        raise ValueError(f"checkpoint {path} has no {CHECKSUMS}, so {name} cannot be checked (a checkpoint from "
                         "before checksums, or one whose record was removed); to load it unchecked, pass "
                         f"orbitlaw --allow-unchecked (or set {ALLOW_UNCHECKED_ENV}=1)")
    record = inside(path, record, "checkpoint")
    try:
        expected = json.loads(record.read_bytes())["sha256"][name]
        if not isinstance(expected, str):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise ValueError(f"checkpoint {path}/{CHECKSUMS} is corrupted: no sha256 for {name}") from None
    try:
        actual = _sha256(file)
    except OSError as exc:
        raise ValueError(f"checkpoint {path}/{name} is missing or unreadable: {exc.strerror or exc}") from None
    if actual != expected:
        raise ValueError(f"checkpoint {path}/{name} is corrupted or truncated: checksum mismatch (it differs from "
                         "what was saved)")
    return file


def load(path: Path, model: torch.nn.Module | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(weights, trainer state) of a checkpoint directory; loads the weights into ``model`` if given.

    Raises ValueError naming the file when a checkpoint is truncated, corrupted (its checksum differs), a
    link out of its directory, or holds anything but tensors and plain containers (a pickle that would run
    code is refused, never run).
    """
    weights = load_weights(path, model)
    state_file = _checked_file(path, "trainer.pt")  # refused here, before torch reads a byte of it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about legacy pickle formats before refusing them
            state = torch.load(state_file, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged or unsafe pickle/zip
        verified = (Path(path) / CHECKSUMS).exists()  # _checked_file matched it against its checksum
        kind = _refused(str(exc), verified) if "Weights only load failed" in str(exc) else "damaged"
        if kind == "unsafe":
            raise ValueError(f"checkpoint {path}/trainer.pt is not safe to load: it holds objects other than "
                             "tensors and plain containers, which could run code (refused, nothing was run)") from None
        if kind == "damaged":
            raise ValueError(f"checkpoint {path}/trainer.pt is corrupted or truncated: it cannot be read back (a "
                             "damaged byte, or a file cut short); resume from an intact copy of the run or start it "
                             "again") from None
        raise ValueError(f"checkpoint {path}/trainer.pt is corrupted, or holds objects other than tensors and plain "
                         "containers (it has no checksum to tell which; refused, nothing was run); resume from an "
                         "intact copy of the run or start it again") from None
    return weights, state


def _refused(message: str, verified: bool) -> str:
    """Why torch refused a trainer state (``message``): "unsafe" (a planted object), "damaged" (a flipped byte)
    or "either". A file that matched its checksum is as it was saved, so an object it names was put there on
    purpose: unsafe. Without a checksum (a checkpoint from before checksums), the object the refusal names
    decides: a real one (``os.system``) is unsafe, one that exists nowhere is a damaged byte
    (``torch.FloatStorage`` with a flipped bit reads ``tobch.FloatStorage``); any other refusal can be either.
    Nothing is imported to decide: only modules already loaded, or found on the path, count."""
    import importlib.util
    import sys

    if verified:
        return "unsafe"
    found = re.search(r"GLOBAL (.+?) (?:was not an allowed global|whose module)", message, re.S)
    if found is None:
        return "either"
    parts = found.group(1).split(".")
    if not all(part.isidentifier() for part in parts):
        return "damaged"  # no Python object has such a name
    for i in range(1, len(parts)):
        obj = sys.modules.get(".".join(parts[:i]))
        for attr in parts[i:]:
            if obj is None:
                break
            obj = getattr(obj, attr, None)
        if obj is not None:
            return "unsafe"
    try:
        unknown = importlib.util.find_spec(parts[0]) is None
    except (ImportError, ValueError):
        unknown = True
    return "damaged" if unknown or parts[0] in sys.modules else "unsafe"


def load_weights(path: Path, model: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """The weights of a checkpoint directory (safetensors only; the trainer state is not read); loaded into
    ``model`` if given. ValueError naming the file for a damaged file (checked against its checksum first) or
    weights that do not fit."""
    path = Path(path)
    file = _checked_file(path, "model.safetensors")
    try:
        weights = load_file(file)
    except (SafetensorError, OSError, RuntimeError) as exc:
        raise ValueError(f"checkpoint {path}/model.safetensors is corrupted or truncated: {exc}") from None
    bad = [name for name, t in weights.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise ValueError(f"checkpoint {path}/model.safetensors holds non-finite weights ({len(bad)} of "
                         f"{len(weights)} tensors, e.g. {bad[0]}): the run that wrote it diverged; nothing was "
                         "computed on it")
    if model is not None:
        try:
            model.load_state_dict(weights)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"checkpoint {path} does not fit this model: {first}") from None
    return weights
