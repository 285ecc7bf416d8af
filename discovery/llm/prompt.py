"""The LLM force prompt of Vafa et al. (2025, section on LLM baselines), byte for byte.

One zero-shot user message per two-body system: the planet's position at each of ``STEPS`` = 450 time
steps (AU, two decimals, as the reference prints the tokeniser's bin centres), the force magnitude
|F| (M_sun AU / yr^2, Python ``repr`` of the float32 value as the reference prints it) at ``REVEALED``
= 10 of them and ``Unk`` elsewhere, and the request to end with ``ANSWER: {0: ..., ..., 449: ...}``.

The reference wording says "The sun is at the origin.", which is false for its own data (the star
moves about the centre of mass, which is itself at a random point). By default that sentence is replaced
by a true description; ``reference=True`` keeps the original wording exactly. Nothing else changes: in
particular the outcome is still not named as a force, as in the reference.
"""

from __future__ import annotations

import numpy as np

STEPS = 450
"""Planet time steps shown per system."""
REVEALED = 10
"""Force magnitudes revealed per system."""

_SETTING_REFERENCE = """\
    The coordinates are the positions of a planet in a 2-body solar system.\x20
    The planet is orbiting the sun.
    The sun is at the origin.
"""
_SETTING_TRUE = """\
    The coordinates are the positions of a planet in a 2-body solar system, in astronomical units.\x20
    The planet and the sun orbit their common centre of mass, so the sun moves too.
    The coordinates are given in an arbitrary inertial frame; the sun is not fixed at the origin.
"""
_HEAD = """
    You are a physics expert. You are given a sequence of coordinates and outcomes.
{setting}
    Here is a sequence of observations. Some of them are unknown.\x20
    Your job is to predict the outcomes for the unknown timesteps.\x20

    """
_TAIL = """

    You can reason all you'd like, but your answer should end with "ANSWER: " followed by the predicted \
outcomes for all of the timesteps, even the unknown ones.\x20
    You should structure your predictions as a dict, where each key is a timestep and each value is the \
prediction.
    You should make predictions for all of the timesteps, even the ones that are known.

    Here is an example of the output format:
    ANSWER: {
        0: 1.0e-8,
        1: 1.0e-8,
        2: 1.0e-8,
        ...
        449: 1.0e-8,
    }
    """


def observation_lines(coords: np.ndarray, forces: np.ndarray, revealed) -> list[str]:
    """One ``Timestep: i, Coordinates: (x, y), Outcome: v|Unk`` line per step.

    coords: (T, 2) planet positions in AU; forces: (T,) |F| in M_sun AU / yr^2 (only the revealed steps
    are read); revealed: step indices whose force is shown. Coordinates are printed with two decimals and
    forces as the ``repr`` of their float32 value widened to a Python float, as the reference does.
    """
    coords = np.asarray(coords, dtype=np.float64)
    forces = np.asarray(forces).reshape(-1)
    shown = {int(i) for i in np.asarray(revealed).reshape(-1)}
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ValueError(f"coordinates must have shape (steps, 2), got {coords.shape}")
    if any(not 0 <= i < len(coords) for i in shown):
        raise ValueError(f"revealed steps must lie in [0, {len(coords)})")
    lines = []
    for i, (x, y) in enumerate(coords):
        outcome = repr(float(np.float32(forces[i]))) if i in shown else "Unk"
        lines.append(f"Timestep: {i}, Coordinates: ({x:.2f}, {y:.2f}), Outcome: {outcome}")
    return lines


def build_prompt(coords: np.ndarray, forces: np.ndarray, revealed, reference: bool = False) -> str:
    """The user message for one system (see the module docstring); ``reference`` keeps the original
    (false) "the sun is at the origin" wording."""
    setting = _SETTING_REFERENCE if reference else _SETTING_TRUE
    return _HEAD.format(setting=setting) + "\n".join(observation_lines(coords, forces, revealed)) + _TAIL
