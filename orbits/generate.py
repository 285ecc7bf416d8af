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


@numba.njit(cache=True, inline="always")
def _eccentric_anomalies(e, M0, mean_motion, dt, steps, M, E, sE, cE):
    """sin E and cos E (in ``sE``, ``cE``) at t = k * dt, k < steps, for one orbit."""
    for k in range(steps):
        M[k] = M0 + mean_motion * (k * dt)
    _solve_block(M[:steps], e, E[:steps], sE[:steps], cE[:steps])


@numba.njit(cache=True)
def _fill_tokens(n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, dt_ids, steps, lo, width,
                 num_bins, pad, out):
    """Token sequences (n, L, 2) straight from the orbits: the fast path for token-only presets.

    Computes only positions (no velocities) and only the steps whose first body fits; the arithmetic is
    that of ``_fill_states`` so the tokens equal those of the general path. Returns the number of
    coordinates outside the tokeniser range.
    """
    n, P = a.shape
    slots = out.shape[1] - 1
    outside = 0
    M, E, sE, cE = np.empty(steps), np.empty(steps), np.empty(steps), np.empty(steps)
    for i in range(n):
        out[i, 0, 0] = dt_ids[i]
        out[i, 0, 1] = dt_ids[i]
        for s in range(slots):
            out[i, s + 1, 0] = pad
            out[i, s + 1, 1] = pad
        N = n_planets[i]
        ms = masses[i, P]
        steps_i = min(steps, (slots + N) // (N + 1))
        for j in range(N):
            mp = masses[i, j]
            mean_motion = math.sqrt(G * (mp + ms) / a[i, j] ** 3)
            _eccentric_anomalies(e[i, j], M0[i, j], mean_motion, dt[i], steps_i, M, E, sE, cE)
            cw, sw = math.cos(omega[i, j]), math.sin(omega[i, j])
            ax, ay = a[i, j], a[i, j] * math.sqrt(1.0 - e[i, j] ** 2)
            if frozen[i]:  # the planet orbits the pinned star
                ox, oy, share, star_share = star_pos[i, 0], star_pos[i, 1], 1.0, 0.0
            else:  # planet and star orbit their centre of mass
                ox, oy, share, star_share = com[i, 0], com[i, 1], ms / (mp + ms), mp / (mp + ms)
            for k in range(steps_i):
                px = ax * (cE[k] - e[i, j])
                py = ay * sE[k]
                x = cw * px - sw * py
                y = sw * px + cw * py
                slot = 1 + k * (N + 1) + j
                if slot <= slots:
                    out[i, slot, 0], o1 = _bin(ox + share * x, lo, width, num_bins)
                    out[i, slot, 1], o2 = _bin(oy + share * y, lo, width, num_bins)
                    outside += o1 + o2
                slot = 1 + k * (N + 1) + N
                if j == 0 and slot <= slots:
                    out[i, slot, 0], o1 = _bin(ox - star_share * x, lo, width, num_bins)
                    out[i, slot, 1], o2 = _bin(oy - star_share * y, lo, width, num_bins)
                    outside += o1 + o2
    return outside


@numba.njit(cache=True)
def _fill_states(n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, out_pos, out_vel):
    """Positions (AU) and velocities (AU/yr), (n, steps, B, 2), of every planet and the star."""
    n, P = a.shape
    steps = out_pos.shape[1]
    M, E, sE, cE = np.empty(steps), np.empty(steps), np.empty(steps), np.empty(steps)
    for i in range(n):
        N = n_planets[i]
        ms = masses[i, P]
        for j in range(N):
            mp = masses[i, j]
            mean_motion = math.sqrt(G * (mp + ms) / a[i, j] ** 3)
            _eccentric_anomalies(e[i, j], M0[i, j], mean_motion, dt[i], steps, M, E, sE, cE)
            cw, sw = math.cos(omega[i, j]), math.sin(omega[i, j])
            if frozen[i]:
                ox, oy, share, star_share = star_pos[i, 0], star_pos[i, 1], 1.0, 0.0
            else:
                ox, oy, share, star_share = com[i, 0], com[i, 1], ms / (mp + ms), mp / (mp + ms)
            for k in range(steps):
                x, y, vx, vy = _orbit_state(a[i, j], e[i, j], mean_motion, sE[k], cE[k], cw, sw)
                out_pos[i, k, j, 0] = ox + share * x
                out_pos[i, k, j, 1] = oy + share * y
                out_vel[i, k, j, 0] = share * vx
                out_vel[i, k, j, 1] = share * vy
                if j == 0:
                    out_pos[i, k, P, 0] = ox - star_share * x
                    out_pos[i, k, P, 1] = oy - star_share * y
                    out_vel[i, k, P, 0] = -star_share * vx
                    out_vel[i, k, P, 1] = -star_share * vy


def _orbit_arrays(batch: SystemBatch) -> tuple:
    return (batch.n_planets, batch.masses, batch.a, batch.e, batch.omega, batch.mean_anomaly0, batch.com,
            batch.star_frozen, batch.star_position, batch.dt)


def _check_analytic(batch: SystemBatch) -> None:
    batch.validate()
    if np.any((batch.n_planets > 1) & ~batch.star_frozen):
        raise ValueError("analytic orbits of several planets need a frozen star; use the nbody preset")


def analytic_tokens(batch: SystemBatch, seq_len: int, steps: int, spec: TokenizerSpec
                    ) -> tuple[np.ndarray, int]:
    """Token sequences (n, seq_len, 2) uint16 computed straight from Kepler orbits (at most ``steps``
    steps), and the count of coordinates outside the tokeniser range. Equal to
    ``tokenize(token_order(analytic_states(...)))``, without the intermediate arrays."""
    _check_analytic(batch)
    tokens = np.empty((len(batch), seq_len, 2), np.uint16)
    dt_ids = spec.num_bins + np.asarray(batch.dt_index, np.int64)
    outside = _fill_tokens(*_orbit_arrays(batch), dt_ids, steps, spec.lo, spec.width, spec.num_bins,
                           spec.pad_id, tokens)
    return tokens, int(outside)


def analytic_states(batch: SystemBatch, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (AU) and velocities (AU/yr), each (n, steps, P + 1, 2), at times k * dt, k < steps."""
    _check_analytic(batch)
    n, P = batch.a.shape
    pos = np.full((n, steps, P + 1, 2), np.nan)
    vel = np.full_like(pos, np.nan)
    _fill_states(*_orbit_arrays(batch), pos, vel)
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
