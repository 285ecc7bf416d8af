"""Worker processes that never outlive the command that started them.

``ProcessPoolExecutor(..., initializer=die_with_parent, initargs=(os.getpid(),))``: on Linux each worker
asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a ``kill -9`` of
``orbitlaw simulate --workers N`` or ``orbitlaw discover --workers N`` leaves no worker running on; a
worker whose parent is already gone exits at once. Elsewhere it does nothing.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Pool initializer: be killed with the process ``parent`` (Linux); exit now if it is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
