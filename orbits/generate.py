"""From systems to data: trajectories, forces and token sequences for a batch of systems.

Shapes: ``n`` sequences, ``S`` stored time steps, ``B = P + 1`` body slots (planets, then the star in
the last slot), ``L`` tokens per sequence. Units: AU, AU/yr, M_sun AU/yr^2, years.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from orbits.kepler import _orbit_state, _reduce, _solve_trajectories
from orbits.systems import G, SystemBatch
from orbits.tokenizer import TokenizerSpec, _bin


@numba.njit(cache=True, error_model="numpy")
def _eccentric_anomalies(i, N, steps, masses, a, e, M0, dt, buf):
    """sin E and cos E, each (N, steps), of the N planets of system i at t = k * dt, k < steps.

    ``buf`` is scratch space of at least 4 * N * steps floats; returns views into it and the planets'
    mean motions (rad/yr)."""
    P = a.shape[1]
    size = N * steps
    M = buf[:size].reshape(N, steps)
    E = buf[size:2 * size].reshape(N, steps)
    sE = buf[2 * size:3 * size].reshape(N, steps)
    cE = buf[3 * size:4 * size].reshape(N, steps)
    mean_motion = np.empty(N)
    for j in range(N):
        mean_motion[j] = math.sqrt(G * (masses[i, j] + masses[i, P]) / a[i, j] ** 3)
        for k in range(steps):
            M[j, k] = _reduce(M0[i, j] + mean_motion[j] * (k * dt[i]))
    _solve_trajectories(M, e[i, :N].copy(), E, sE, cE)
    return sE, cE, mean_motion


@numba.njit(cache=True, error_model="numpy")
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
    buf = np.empty(4 * P * steps)
    for i in range(n):
        N = n_planets[i]
        stride = N + 1
        steps_i = min(steps, (slots + N) // stride)
        out[i, 0, 0] = dt_ids[i]
        out[i, 0, 1] = dt_ids[i]
        for s in range(steps_i * stride, slots):
            out[i, s + 1, 0] = pad
            out[i, s + 1, 1] = pad
        sE, cE, _ = _eccentric_anomalies(i, N, steps_i, masses, a, e, M0, dt, buf)
        ms = masses[i, P]
        for j in range(N + 1):  # the planets, then the star
            body = j if j < N else 0  # the star's position follows from planet 1's orbit
            mp = masses[i, body]
            cw, sw = math.cos(omega[i, body]), math.sin(omega[i, body])
            ecc = e[i, body]
            ax, ay = a[i, body], a[i, body] * math.sqrt(1.0 - ecc ** 2)
            if frozen[i]:  # the planet orbits the pinned star
                ox, oy, share = star_pos[i, 0], star_pos[i, 1], 1.0
            else:  # planet and star orbit their centre of mass
                ox, oy = com[i, 0], com[i, 1]
                share = ms / (mp + ms) if j < N else -mp / (mp + ms)
            fits = min(steps_i, (slots - 1 - j) // stride + 1)  # steps whose slot for this body exists
            if frozen[i] and j == N:  # the pinned star: one token throughout
                bx, o1 = _bin(ox, lo, width, num_bins)
                by, o2 = _bin(oy, lo, width, num_bins)
                for k in range(fits):
                    out[i, 1 + k * stride + j, 0] = bx
                    out[i, 1 + k * stride + j, 1] = by
                outside += fits * (o1 + o2)
                continue
            for k in range(fits):
                px = ax * (cE[body, k] - ecc)
                py = ay * sE[body, k]
                x = cw * px - sw * py
                y = sw * px + cw * py
                bx, o1 = _bin(ox + share * x, lo, width, num_bins)
                by, o2 = _bin(oy + share * y, lo, width, num_bins)
                out[i, 1 + k * stride + j, 0] = bx
                out[i, 1 + k * stride + j, 1] = by
                outside += o1 + o2
    return outside


@numba.njit(cache=True, error_model="numpy")
def _fill_states(n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, out_pos, out_vel):
    """Positions (AU) and velocities (AU/yr), (n, steps, B, 2), of every planet and the star."""
    n, P = a.shape
    steps = out_pos.shape[1]
    buf = np.empty(4 * P * steps)
    for i in range(n):
        N = n_planets[i]
        ms = masses[i, P]
        sE, cE, mean_motion = _eccentric_anomalies(i, N, steps, masses, a, e, M0, dt, buf)
        for j in range(N):
            mp = masses[i, j]
            cw, sw = math.cos(omega[i, j]), math.sin(omega[i, j])
            if frozen[i]:
                ox, oy, share, star_share = star_pos[i, 0], star_pos[i, 1], 1.0, 0.0
            else:
                ox, oy, share, star_share = com[i, 0], com[i, 1], ms / (mp + ms), mp / (mp + ms)
            for k in range(steps):
                x, y, vx, vy = _orbit_state(a[i, j], e[i, j], mean_motion[j], sE[j, k], cE[j, k], cw, sw)
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


@numba.njit(cache=True, error_model="numpy")
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


@numba.njit(cache=True, error_model="numpy")
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
