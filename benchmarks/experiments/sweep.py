"""What the attention sweeps (``extrapolation.py``, ``passkey.py``) share: the variants to run, a pool of
runs, and the curve figure (mean ± sd over seeds per variant)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path


def sweep_parser(doc: str, steps: int):
    """A sweep's parser (``doc``'s first line as its description) with the flags every sweep starts with:
    ``--seeds`` (training seeds per variant) and ``--steps`` (training steps, default ``steps``)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=steps)
    return parser


def add_sweep_arguments(parser, work: str, out: str) -> None:
    """The flags every sweep takes after its own: LSSAR's ``--p``, ``--only`` (labels), ``--workers``, the scratch
    folder ``--work`` (resumable runs) and the result ``--out``."""
    parser.add_argument("--p", type=float, default=15.0)
    parser.add_argument("--only", default=None, help="comma-separated labels (default: every variant)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", default=work)
    parser.add_argument("--out", default=out)


def chosen_variants(only: str | None, p: float) -> tuple[dict[str, tuple[str, float]], list[str]]:
    """(label -> (attention, p) of ``orbitlaw.kernels.registry.sweep``, the labels to run); an unknown label
    in ``only`` (comma-separated) exits with a one-line message."""
    from orbitlaw.kernels.registry import sweep

    labels = sweep(p)
    chosen = only.split(",") if only else list(labels)
    unknown = [c for c in chosen if c not in labels]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(labels)}")
    return labels, chosen


def run_all(one_run: Callable[[dict], dict], tasks: list[dict], workers: int, line: Callable[[dict], str]) -> list:
    """``one_run`` on every task, ``workers`` processes at once (spawned), printing ``line(result)`` as each
    finishes; results in task order."""
    rows = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        for row in pool.map(one_run, tasks):
            rows.append(row)
            print(line(row), flush=True)
    return rows


def plot_curves(table: dict, xs: list[int], key: Callable[[dict, int], tuple[float, float | None]], out: Path,
                xlabel: str, ylabel: str, title: str, ylog: bool = False) -> None:
    """One errorbar curve per variant of ``table`` over the multiples ``xs`` (``key(entry, x) -> (mean, sd)``),
    written atomically to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (label, entry) in enumerate(table.items()):
        stats = [key(entry, x) for x in xs]
        ax.errorbar(xs, [m for m, _ in stats], yerr=[sd or 0.0 for _, sd in stats], marker="o", capsize=3,
                    label=label, color=f"C{i % 10}", linestyle="-" if i < 10 else "--")
    ax.set_xscale("log", base=2)
    if ylog:
        ax.set_yscale("log")
    ax.set_xticks(xs, [f"{x}x" for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    tmp = out.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, out)
