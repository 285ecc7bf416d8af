"""True vs predicted force arrows along each orbit (the reference's Solar System figure).

Left panel: the true force on each planet at its held-out steps; right panel: the probe's prediction at
the same steps. Arrows are drawn at the planet's position (AU). Forces on different planets differ by
orders of magnitude, so each planet's arrows are scaled so that its largest true |F| is drawn 0.3 times
its median distance from the star long (the same factor in both panels, so a prediction's length is
comparable to the truth's).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orbitlaw.provenance import atomic_path


def plot_force_arrows(cols: dict, out: Path, title: str = "", names: dict[int, str] | None = None,
                      max_arrows: int = 40) -> Path:
    """Draw ``out`` (PNG) from prediction columns: sequence, x, y, r (AU), Fx_true, Fy_true, Fx_pred,
    Fy_pred (M_sun AU/yr^2), one orbit per sequence (labelled by ``names[sequence]`` when given), at most
    ``max_arrows`` arrows per orbit."""
    import matplotlib
    from matplotlib.figure import Figure  # object API: never switches the caller's backend

    seq = np.asarray(cols["sequence"])
    fig = Figure(figsize=(12, 6))
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    colours = matplotlib.colormaps["tab10"]
    for k, s in enumerate(np.unique(seq)):
        m = seq == s
        x, y = np.asarray(cols["x"])[m], np.asarray(cols["y"])[m]
        ftrue = np.stack([np.asarray(cols["Fx_true"])[m], np.asarray(cols["Fy_true"])[m]], 1)
        fpred = np.stack([np.asarray(cols["Fx_pred"])[m], np.asarray(cols["Fy_pred"])[m]], 1)
        scale = 0.3 * np.median(np.asarray(cols["r"])[m]) / max(np.max(np.hypot(*ftrue.T)), 1e-300)
        pick = np.unique(np.linspace(0, len(x) - 1, min(max_arrows, len(x))).astype(int))
        for ax, f in zip(axes, (ftrue, fpred), strict=True):
            label = (names or {}).get(int(s), f"sequence {s}")
            label += f": 1 AU of arrow = {1 / scale:.3g} M$_\\odot$ AU/yr$^2$"  # the orbit's scale key
            ax.plot(x, y, "-", lw=0.6, color=colours(k % 10), alpha=0.5, label=label)
            ax.quiver(x[pick], y[pick], f[pick, 0] * scale, f[pick, 1] * scale, angles="xy", scale_units="xy",
                      scale=1, color=colours(k % 10), width=0.003)
    for ax, name in zip(axes, ("true force", "predicted force"), strict=True):
        ax.set_title(f"{name}" + (f" ({title})" if title else "") + "; arrows scaled per orbit, alike in both panels",
                     fontsize=9)
        ax.set_xlabel("x (AU)")
        ax.set_aspect("equal")
    axes[0].set_ylabel("y (AU)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8, frameon=False)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    return out
