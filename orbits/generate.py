"""From systems to data: trajectories, forces and token sequences for a batch of systems.

Shapes: ``n`` sequences, ``S`` stored time steps, ``B = P + 1`` body slots (planets, then the star in
the last slot), ``L`` tokens per sequence. Units: AU, AU/yr, M_sun AU/yr^2, years.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from orbits.kepler import _orbit_state, _solve_block
from orbits.systems import G, SystemBatch
from orbits.tokenizer import TokenizerSpec, _bin


@numba.njit(cache=True)
def _analytic_fill(n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, steps, token_slots,
                   out_xy, out_pos, out_vel, token_order):
    """Kepler positions for every planet and the star.

    token_order=True writes positions straight into token order ``out_xy`` (n, token_slots, 2) and only
    the steps that fit; otherwise writes ``out_pos``/``out_vel`` (n, steps, B, 2).
    """
    n, P = a.shape
    M = np.empty(steps)
    E = np.empty(steps)
    sE = np.empty(steps)
    cE = np.empty(steps)
    for i in range(n):
        N = n_planets[i]
        ms = masses[i, P]
        steps_i = steps
        if token_order:
            steps_i = min(steps, (token_slots + N) // (N + 1))
        for j in range(N):
            mp = masses[i, j]
            mean_motion = math.sqrt(G * (mp + ms) / a[i, j] ** 3)
            cw = math.cos(omega[i, j])
            sw = math.sin(omega[i, j])
            planet_share = ms / (mp + ms)
            star_share = mp / (mp + ms)
            for k in range(steps_i):
                M[k] = M0[i, j] + mean_motion * (k * dt[i])
            _solve_block(M[:steps_i], e[i, j], E[:steps_i], sE[:steps_i], cE[:steps_i])
            for k in range(steps_i):
                x, y, vx, vy = _orbit_state(a[i, j], e[i, j], mean_motion, sE[k], cE[k], cw, sw)
                if frozen[i]:
                    px, py, pvx, pvy = star_pos[i, 0] + x, star_pos[i, 1] + y, vx, vy
                    sx, sy, svx, svy = star_pos[i, 0], star_pos[i, 1], 0.0, 0.0
                else:
                    px, py = com[i, 0] + planet_share * x, com[i, 1] + planet_share * y
                    pvx, pvy = planet_share * vx, planet_share * vy
                    sx, sy = com[i, 0] - star_share * x, com[i, 1] - star_share * y
                    svx, svy = -star_share * vx, -star_share * vy
                if token_order:
                    slot = k * (N + 1) + j
                    if slot < token_slots:
                        out_xy[i, slot, 0] = px
                        out_xy[i, slot, 1] = py
                    slot = k * (N + 1) + N
                    if j == 0 and slot < token_slots:
                        out_xy[i, slot, 0] = sx
                        out_xy[i, slot, 1] = sy
                else:
                    out_pos[i, k, j, 0] = px
                    out_pos[i, k, j, 1] = py
                    out_vel[i, k, j, 0] = pvx
                    out_vel[i, k, j, 1] = pvy
                    if j == 0:
                        out_pos[i, k, P, 0] = sx
                        out_pos[i, k, P, 1] = sy
                        out_vel[i, k, P, 0] = svx
                        out_vel[i, k, P, 1] = svy


def _check_analytic(batch: SystemBatch) -> None:
    batch.validate()
    if np.any((batch.n_planets > 1) & ~batch.star_frozen):
        raise ValueError("analytic orbits of several planets need a frozen star; use the nbody preset")


def analytic_token_positions(batch: SystemBatch, seq_len: int, steps: int) -> np.ndarray:
    """(n, seq_len - 1, 2) AU: body positions in token order (planets 1..N, star per step), NaN padding."""
    _check_analytic(batch)
    xy = np.full((len(batch), seq_len - 1, 2), np.nan)
    empty = np.empty((0, 0, 0, 2))
    _analytic_fill(batch.n_planets, batch.masses, batch.a, batch.e, batch.omega, batch.mean_anomaly0,
                   batch.com, batch.star_frozen, batch.star_position, batch.dt, steps, seq_len - 1,
                   xy, empty, empty, True)
    return xy


def analytic_states(batch: SystemBatch, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (AU) and velocities (AU/yr), each (n, steps, P + 1, 2), at times k * dt, k < steps."""
    _check_analytic(batch)
    n, P = batch.a.shape
    pos = np.full((n, steps, P + 1, 2), np.nan)
    vel = np.full_like(pos, np.nan)
    _analytic_fill(batch.n_planets, batch.masses, batch.a, batch.e, batch.omega, batch.mean_anomaly0,
                   batch.com, batch.star_frozen, batch.star_position, batch.dt, steps, 0,
                   np.empty((0, 0, 2)), pos, vel, False)
    return pos, vel


@numba.njit(cache=True)
def _layout(pos, n_planets, out_xy):
    n, S, B, _ = pos.shape
    slots = out_xy.shape[1]
    for i in range(n):
        N = n_planets[i]
        slot = 0
        for k in range(S):
            for j in range(N + 1):
                if slot >= slots:
                    break
                body = j if j < N else B - 1
                out_xy[i, slot, 0] = pos[i, k, body, 0]
                out_xy[i, slot, 1] = pos[i, k, body, 1]
                slot += 1


def token_order(positions: np.ndarray, n_planets: np.ndarray, seq_len: int) -> np.ndarray:
    """Reorder positions (n, S, B, 2) into token order (n, seq_len - 1, 2), NaN where steps run out."""
    xy = np.full((positions.shape[0], seq_len - 1, 2), np.nan)
    _layout(positions, np.asarray(n_planets, np.int64), xy)
    return xy


@numba.njit(cache=True)
def _encode_sequences(xy, dt_ids, lo, width, num_bins, pad, out):
    outside = 0
    n, slots, _ = xy.shape
    for i in range(n):
        out[i, 0, 0] = dt_ids[i]
        out[i, 0, 1] = dt_ids[i]
        for s in range(slots):
            for c in range(2):
                x = xy[i, s, c]
                if math.isnan(x):
                    out[i, s + 1, c] = pad
                else:
                    b, o = _bin(x, lo, width, num_bins)
                    out[i, s + 1, c] = b
                    outside += o
    return outside


def tokenize(xy: np.ndarray, dt_index: np.ndarray, spec: TokenizerSpec) -> tuple[np.ndarray, int]:
    """Token sequences (n, seq_len, 2) uint16 from token-order positions (n, seq_len - 1, 2) AU.

    Returns the tokens and how many coordinates fell outside the tokeniser's range (clipped to the edge
    bins). NaN positions become the pad id; the first token is the time-step id.
    """
    if np.any(np.isinf(xy)):
        raise ValueError("cannot tokenise infinite coordinates")
    tokens = np.empty((xy.shape[0], xy.shape[1] + 1, 2), np.uint16)
    dt_ids = spec.num_bins + np.asarray(dt_index, np.int64)
    outside = _encode_sequences(xy, dt_ids, spec.lo, spec.width, spec.num_bins, spec.pad_id, tokens)
    return tokens, int(outside)


def gravitational_forces(positions: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """Net Newtonian force on each body, (n, S, B, 2) in M_sun AU / yr^2; NaN for absent bodies.

    positions: (n, S, B, 2) AU with NaN for absent bodies; masses: (n, B) M_sun with NaN likewise.
    F_i = sum_{j != i} G m_i m_j (r_j - r_i) / |r_j - r_i|^3.
    """
    present = np.isfinite(masses)[:, None, :] & np.all(np.isfinite(positions), axis=-1)
    m = np.where(np.isfinite(masses), masses, 0.0)[:, None, :]
    r = np.where(present[..., None], positions, 0.0)
    sep = r[:, :, None, :, :] - r[:, :, :, None, :]  # (n, S, i, j, 2): r_j - r_i
    dist = np.sqrt(np.sum(sep**2, axis=-1))
    pair = present[:, :, :, None] & present[:, :, None, :] & (dist > 0)
    inv3 = np.where(pair, 1.0 / np.where(pair, dist, 1.0) ** 3, 0.0)
    coeff = G * m[:, :, :, None] * m[:, :, None, :] * inv3
    forces = np.einsum("nsij,nsijc->nsic", coeff, sep)
    return np.where(present[..., None], forces, np.nan)
