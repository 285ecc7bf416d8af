"""Worker processes that never outlive the command that started them.

``ProcessPoolExecutor(..., initializer=die_with_parent, initargs=(os.getpid(),))``: on Linux each worker
asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a ``kill -9`` of
``orbitlaw simulate --workers N`` or ``orbitlaw discover --workers N`` leaves no worker running on; a
worker whose parent is already gone exits at once. Elsewhere it does nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

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


_SHARED: dict[int, ProcessPoolExecutor] = {}


def shared_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (:func:`die_with_parent`) kept for the life of this process, so that
    many short jobs (a study's symbolic regressions, a few seconds each) pay a worker's start (its imports, about
    five seconds) once rather than once a call. Call :func:`drop_shared_pool` after a failure: a pool whose jobs were
    interrupted is not handed out again."""
    pool = _SHARED.get(workers)
    if pool is None:
        if not _SHARED:
            _at_thread_exit(shutdown_shared_pools)
        pool = _SHARED[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=die_with_parent, initargs=(os.getpid(),))
    return pool


def shutdown_shared_pools() -> None:
    """Shut every shared pool down and wait for its workers: run as the interpreter exits, before
    ``concurrent.futures``' own exit hook, whose join of an idle pool's manager thread was seen to hang a finished
    test run at exit."""
    while _SHARED:
        _SHARED.popitem()[1].shutdown(wait=True, cancel_futures=True)


def _at_thread_exit(fn) -> None:
    """Run ``fn`` when the interpreter shuts its threads down, before the hooks registered earlier (the order
    ``threading`` runs them in), i.e. before ``concurrent.futures.process``' exit hook."""
    import threading

    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(fn)
    else:  # pragma: no cover - an interpreter without the hook
        import atexit

        atexit.register(fn)


def drop_shared_pool(workers: int) -> None:
    """Shut the shared pool of ``workers`` down, its queued jobs cancelled; the next :func:`shared_pool` starts anew."""
    pool = _SHARED.pop(workers, None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
