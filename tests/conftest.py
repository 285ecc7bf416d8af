"""Test-wide settings.

Triton kernels run on the CPU under the interpreter (numpy emulation) unless a CUDA run is asked for
with ORBITLAW_TEST_CUDA=1. The variable must be set before triton is first imported. The suite runs on every core
(pytest-xdist, ``-n auto``), a test file per worker; ``-n 0`` runs it in one process.
"""

import contextlib
import io
import os
import subprocess
import types

import pytest

TINY_MODEL = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64}
TINY_ORBITS = {"seq_len": 65, "steps": 32, "mass_uniform": [1e-3, 1.1e-3], "a_range": [0.5, 3.0]}

if os.environ.get("ORBITLAW_TEST_CUDA") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Under pytest-xdist (pyproject's addopts: one worker per core) the workers share the cores: each gets its share of
# threads (torch and numpy read this at import, and the commands the tests start inherit it), not all of them.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))


# The test files that take longest (the smoke study's fixture, the path and controls presets, the notebooks, the
# kernels' compile check; `python benchmarks/quickstart.py --durations` lists them) run first: with a file per
# worker, one of them started last would run alone at the end while the other worker idles.
SLOWEST_FIRST = ("test_study.py", "test_path.py", "test_controls.py", "test_notebooks.py", "test_kernels_compile.py",
                 "test_tracking.py", "test_verdict_precision.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the order within a file is kept


@pytest.fixture
def small_disk(tmp_path):
    """A factory: ``small_disk("2m")`` mounts a tmpfs of that size (a disk that fills up) and returns its path;
    unmounted after the test. Skips where mounting is not allowed (needs root)."""
    mounted = []

    def mount(size: str):
        path = tmp_path / f"small-{len(mounted)}"
        path.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a small tmpfs here (needs root)")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=False)


def run_cli(*args) -> types.SimpleNamespace:
    """``orbitlaw ARGS`` in this process, as ``subprocess.run(..., capture_output=True, text=True)`` gives it
    (``returncode``, ``stdout``, ``stderr``): a command's exit code and what it printed, without the 2-3 s of a new
    interpreter importing torch (test_packaging runs ``python -m orbitlaw`` itself)."""
    from orbitlaw.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def tiny_controls(seeds: tuple[int, ...] = (0,)) -> dict:
    """The controls of :mod:`orbitlaw.study.controls` at the fewest steps that run every stage (training 8 steps,
    the fine-tuned probe 4, the linear probe, one symbolic-regression seed; the ``tokens`` row 4 steps of 4
    sequences): for tests of a study's plumbing, not of what the models learn."""
    from orbitlaw.study import presets

    return presets._controls(pretrain=64, probe=48, steps=8, probe_steps=4, seeds=list(seeds),
                             discover={"seeds": 1, "points": 300, "restarts": 1, "budget": 2000}, token_steps=4,
                             token_batch=4)


def tiny_train_config(data, out, **kw):
    """The TrainConfig of a one-layer ``tiny`` GPT (width 32) trained 2 steps on ``data`` into ``out``."""
    from orbitlaw.models.train import TrainConfig

    return TrainConfig(**{**dict(data=str(data), out=str(out), preset="tiny", model_overrides=TINY_MODEL,
                                 max_steps=2, checkpoint_every=2, eval_every=2, batch_size=4, seed=0), **kw})


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(dataset, run): a tiny two-body dataset (forces stored; 16 train and 8 val sequences of 65 steps) and a
    token run trained on it for 2 steps (:func:`tiny_train_config`). Built once per test module."""
    from orbitlaw import orbits
    from orbitlaw.models.train import train

    root = tmp_path_factory.mktemp("tiny")
    data = orbits.simulate("two-body", {"train": 16, "val": 8}, 0, root / "data", overrides=TINY_ORBITS,
                           progress=False)
    run = root / "run"
    train(tiny_train_config(data, run), progress=False)
    return data, run
