"""Keep numba's on-disk cache of the compiled orbit kernels in step with their sources.

numba keys a cached function on the timestamp of the file that defines it, but a compiled function also
contains the code of the functions it calls from other modules (``generate._fill_tokens`` holds
``kepler``'s solver). After an edit to ``kepler.py`` alone, the cached ``generate`` kernels would keep
running the old solver. So on import the package hashes its own sources and, when they differ from the
sources the cache was built from, drops the package's cached kernels (numba then recompiles them, once).
Only the cache beside the sources is managed (``__pycache__``, numba's default for a writable install).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from orbitlaw.provenance import write_text_atomic

PACKAGE = Path(__file__).parent
STAMP = "numba-sources.sha256"


def sources_digest(package: Path = PACKAGE) -> str:
    """sha256 over the package's Python sources, in name order."""
    h = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def drop_stale_cache(package: Path = PACKAGE) -> bool:
    """Remove the package's cached numba kernels if its sources changed since they were built; returns
    whether anything was dropped. Does nothing where the cache directory cannot be written."""
    cache = package / "__pycache__"
    digest = sources_digest(package)
    stamp = cache / STAMP
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        stale = [p for p in cache.iterdir() if p.suffix in (".nbi", ".nbc")]
        for path in stale:
            path.unlink(missing_ok=True)
        write_text_atomic(stamp, digest)
    except OSError:
        return False
    return bool(stale)
