"""Provenance helpers shared by everything that writes an artefact: the code version, atomic JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


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


def write_json_atomic(path: Path, obj) -> None:
    """Write JSON to ``path`` via a temporary file, fsync and rename: readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
