"""Two-body systems for the LLM prompts, and the reference's on-disk layout.

:func:`generate_systems` draws ``n`` systems of a one-planet preset through the orbits package: by
default ``two-body-exoplanet``, the reference's force-probe set (planet and star masses from the exoplanet
priors, the star moves, week or six-month step; the five recorded systems have stars of 0.62-1.21 and
planets of 1.6e-7-4.8e-4 M_sun), or ``two-body`` (both masses U(1e-4, 1.01e-2) M_sun), split
``"llm"``: system i depends only on (seed, i), so asking for more systems keeps the first ones (and
their cached answers). The planet's coordinates are the tokeniser's bin centres, as in the reference
prompts; the force is the exact |F| = G m1 m2 / r^2 on the planet (M_sun AU / yr^2, G = 4 pi^2).
Revealed steps: 10 distinct steps drawn uniformly from the first half of the 450 (the reference's
recorded revealed steps all lie below 225).

The layout (the reference's ``llm-prompts/``), per system i: ``i.txt`` the prompt, ``traj_i.npy`` (450, 2)
planet coordinates shown (AU), ``true_force_i.npy`` (450, 1) |F|, ``true_state_i.npy`` (450, 6) with
columns 0-1 the planet's position relative to the star (AU), 2-3 the relative velocity (AU/yr; the
reference's columns 2-3 hold another velocity, unused here), 4 the planet mass and 5 the star mass
(M_sun), and ``unmasked_inds_i.npy`` the revealed steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from orbitlaw.discovery.llm.prompt import REVEALED, STEPS
from orbitlaw.provenance import atomic_path
from orbitlaw.validate import FieldError, at_least

SPLIT = "llm"
DEFAULT_PRESET = "two-body-exoplanet"
"""The dataset preset prompts are drawn from by default: the reference's force-probe set."""
_INDEX = re.compile(r"^true_force_(\d+)\.npy$")


@dataclass
class System:
    """One prompt's data. coords (T, 2) AU as shown; force (T,) |F| M_sun AU/yr^2; revealed (k,) steps;
    state (T, 6) or None (see the module docstring); r (T,) AU, m1 planet and m2 star masses (M_sun)."""

    index: int
    coords: np.ndarray
    force: np.ndarray
    revealed: np.ndarray
    state: np.ndarray | None = None

    @property
    def r(self) -> np.ndarray | None:
        return None if self.state is None else np.hypot(self.state[:, 0], self.state[:, 1])

    @property
    def m1(self) -> np.ndarray | None:
        return None if self.state is None else self.state[:, 4]

    @property
    def m2(self) -> np.ndarray | None:
        return None if self.state is None else self.state[:, 5]


def revealed_steps(seed: int, index: int, steps: int = STEPS, k: int = REVEALED) -> np.ndarray:
    """The ``k`` revealed steps of system ``index``: distinct, sorted, from the first half of ``steps``."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6C6C6D, int(index)]))
    return np.sort(rng.choice(steps // 2, size=k, replace=False)).astype(np.int64)


def force_probe_presets() -> tuple[str, ...]:
    """The dataset presets whose systems can be prompted: those whose record is a ``force_probe`` set (one
    planet, a moving star), in the records' order."""
    from orbitlaw.orbits.presets import RECORDS

    return tuple(name for name, record in RECORDS.items() if record.force_probe)


def generate_systems(systems: int, seed: int, steps: int = STEPS, preset: str = DEFAULT_PRESET) -> list[System]:
    """Systems 0..systems-1 of ``preset`` for ``seed`` (see the module docstring)."""
    from orbitlaw.orbits import preset_params
    from orbitlaw.orbits.blocks import SHARD_SIZE, blocks, build_block
    from orbitlaw.orbits.tokenizer import TokenizerSpec

    at_least(SimpleNamespace(systems=systems), 1, "systems")
    if preset not in (choices := force_probe_presets()):
        raise FieldError(message=f"`preset` {preset!r}: LLM prompts need a one-planet preset, {' or '.join(choices)}")
    params, spec = preset_params(preset), TokenizerSpec()
    out: list[System] = []
    for _, block, count in blocks({SPLIT: systems}):
        arrays, _ = build_block(preset, params, spec, int(seed), SPLIT, block, count)
        pos, vel = arrays["positions"][:, :steps], arrays["velocities"][:, :steps]
        if pos.shape[1] < steps:
            raise ValueError(f"the {preset} preset stores {pos.shape[1]} steps, fewer than {steps}")
        coords = spec.decode(arrays["tokens"][:, 1::2][:, :steps])  # planet tokens: 1, 3, 5, ...
        force = np.linalg.norm(arrays["forces"][:, :steps, 0], axis=-1)
        masses = arrays["masses"]
        for j in range(count):
            i = block * SHARD_SIZE + j
            state = np.column_stack([pos[j, :, 0] - pos[j, :, 1], vel[j, :, 0] - vel[j, :, 1],
                                     np.full(steps, masses[j, 0]), np.full(steps, masses[j, 1])])
            out.append(System(i, coords[j], force[j], revealed_steps(seed, i, steps), state))
    return out


def write_layout(directory: Path, systems: list[System], prompts: list[str]) -> None:
    """Write the systems and their prompts in the reference layout (each file atomically)."""
    from orbitlaw.provenance import write_text_atomic

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for s, prompt in zip(systems, prompts, strict=True):
        for name, arr in (("traj", s.coords), ("true_force", s.force[:, None]), ("true_state", s.state),
                          ("unmasked_inds", s.revealed)):
            path = directory / f"{name}_{s.index}.npy"
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                np.save(f, np.asarray(arr))
        write_text_atomic(directory / f"{s.index}.txt", prompt)


def read_layout(directory: Path) -> list[System]:
    """Systems stored in the reference layout under ``directory`` (``true_force_<i>.npy`` and
    ``unmasked_inds_<i>.npy`` required, ``traj_<i>.npy`` and ``true_state_<i>.npy`` optional), by index."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FieldError(message=f"`prompts` {directory}: no such directory")
    indices = sorted(int(m.group(1)) for p in directory.iterdir() if (m := _INDEX.match(p.name)))
    if not indices:
        raise FieldError(message=f"`prompts` {directory}: no true_force_<i>.npy files")
    systems = []
    for i in indices:
        def load(name, required=True, i=i):
            path = directory / f"{name}_{i}.npy"
            if not path.exists():
                if required:
                    raise FieldError(message=f"`prompts` {directory}: {path.name} is missing")
                return None
            try:
                return np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ValueError(f"cannot read {path}: {exc}") from None

        force = np.asarray(load("true_force"), dtype=np.float64).reshape(-1)
        revealed = np.asarray(load("unmasked_inds"), dtype=np.int64).reshape(-1)
        traj, state = load("traj", False), load("true_state", False)
        if state is not None and (state.ndim != 2 or state.shape[1] < 6 or len(state) != len(force)):
            state = None
        coords = np.full((len(force), 2), np.nan) if traj is None else np.asarray(traj, dtype=np.float64)
        systems.append(System(i, coords, force, revealed, None if state is None else state.astype(np.float64)))
    return systems
