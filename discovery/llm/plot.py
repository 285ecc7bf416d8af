"""Figure of predicted vs true force magnitude per system (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orbitlaw.discovery.llm.systems import System
from orbitlaw.provenance import atomic_path


def plot_forces(path: Path, systems: list[System], answers: dict[str, dict[int, dict[int, float]]],
                max_panels: int = 30) -> Path:
    """One panel per system (the first ``max_panels``): true |F| (M_sun AU / yr^2) against the time step,
    each model's answers as points, revealed steps marked. ``answers``: model -> system -> step -> |F|.
    The y range is the truth's range widened by its spread (answers far outside it are counted in the
    panel title as off-scale and drawn on its edge, so they cannot flatten the truth). Written atomically."""
    import matplotlib
    from matplotlib.figure import Figure  # object API: never switches the caller's backend

    shown = systems[:max_panels]
    cols = min(5, max(1, len(shown)))
    rows = -(-len(shown) // cols)
    fig = Figure(figsize=(3.6 * cols, 2.9 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, s in zip(axes.flat, shown, strict=False):
        steps = np.arange(len(s.force))
        ax.plot(steps, s.force, color="black", lw=1.5, label="true |F|")
        ax.plot(s.revealed, s.force[s.revealed], "x", color="black", ms=6, label="revealed")
        lo, hi = float(np.min(s.force)), float(np.max(s.force))
        pad = max(hi - lo, 0.02 * abs(hi)) * 0.6
        lo, hi = lo - pad, hi + pad
        off = 0
        for c, (model, per_system) in enumerate(sorted(answers.items())):
            values = per_system.get(s.index, {})
            k = np.array([k for k in sorted(values) if 0 <= k < len(s.force)], dtype=int)
            v = np.array([values[int(i)] for i in k], dtype=float)
            off += int(np.sum((v < lo) | (v > hi)))
            ax.plot(k, np.clip(v, lo, hi), ".", ms=2.5, color=colours[c % len(colours)], label=model)
        ax.set_ylim(lo, hi)
        ax.set_title(f"system {s.index}" + (f" ({off} answers off-scale)" if off else ""), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, markerscale=2)
    fig.supxlabel("time step")
    fig.supylabel("|F| (M$_\\odot$ AU / yr$^2$)")
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path
