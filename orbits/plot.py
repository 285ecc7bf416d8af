"""Plot a system's orbits (matplotlib): each planet's path, the star's, and the tokens' bin centres."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orbitlaw.orbits import generate, presets
from orbitlaw.provenance import atomic_path


def system_positions(split, index: int) -> np.ndarray:
    """Positions (steps, bodies, 2) AU of sequence ``index``: stored ones, or recomputed exactly from the
    stored orbital elements when the preset keeps only elements (vafa2025)."""
    if split.positions is not None:
        return np.asarray(split.positions[index])
    batch = split.systems(slice(index, index + 1))
    params = split.manifest["params"]
    steps = int(presets.steps_in_sequence(batch.n_planets, int(params["seq_len"]))[0])
    pos, _ = generate.analytic_states(batch, min(steps, int(params["steps"])))
    return pos[0]


def plot_system(split, index: int = 0, ax=None, out: str | Path | None = None):
    """Draw sequence ``index`` of a loaded split (see ``orbitlaw.orbits.load_dataset``); save to ``out`` if given.

    Returns the matplotlib Axes. Planets are coloured lines, the star a black line (or a star marker
    when it is frozen); small dots mark the decoded token positions (bin centres).
    """
    if not 0 <= index < len(split):
        raise ValueError(f"sequence index {index} out of range: split {split.name!r} has {len(split)}")
    if out is not None:
        out = check_image_path(out)
    pos = system_positions(split, index)
    n = int(split.n_planets[index])
    if ax is None and out is not None:  # a figure of its own, off-screen: the caller's backend is untouched
        from matplotlib.figure import Figure

        ax = Figure(figsize=(6, 6)).subplots()
    elif ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 6))
    decoded = split.tokenizer.decode(np.asarray(split.tokens[index, 1:]))
    ax.plot(decoded[:, 0], decoded[:, 1], ".", ms=1.5, color="0.75", zorder=0, label="token bin centres")
    for j in range(n):
        mass = float(split.masses[index, j])
        ax.plot(pos[:, j, 0], pos[:, j, 1], lw=1, label=f"planet {j + 1} (m = {mass:.2e} M$_\\odot$)")
    star = pos[:, -1]
    ax.plot(star[:, 0], star[:, 1], "k*-" if np.ptp(star[:, 0]) == 0 else "k-", lw=1, ms=10,
            label=f"star (m = {split.masses[index, -1]:.2f} M$_\\odot$)")
    ax.set_aspect("equal")
    ax.set_xlabel("x (AU)")
    ax.set_ylabel("y (AU)")
    preset = split.manifest["preset"]
    ax.set_title(f"{preset} / {split.name} #{index}: {n} planet(s), dt = {float(split.dt[index]):.4f} yr")
    ax.legend(fontsize=7, loc="upper right")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            ax.figure.savefig(tmp, dpi=120, bbox_inches="tight", format=out.suffix[1:].lower())
    return ax


def check_image_path(out: str | Path) -> Path:
    """``out`` as a Path when it can name an image matplotlib writes (its suffix gives the format); else a
    one-line ValueError naming it and what to give instead."""
    from matplotlib.backend_bases import FigureCanvasBase

    out = Path(out)
    if out.is_dir():
        raise ValueError(f"{out} is a directory; name an image file, e.g. {out / 'system.png'}")
    formats = FigureCanvasBase.get_supported_filetypes()
    if out.suffix[1:].lower() not in formats:
        raise ValueError(f"{out} does not name an image file: end it in .png (or .pdf, .svg; matplotlib writes "
                         f"{', '.join(sorted(formats))})")
    return out
