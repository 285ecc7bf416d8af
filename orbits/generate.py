"""From systems to data: trajectories, forces and token sequences for a batch of systems.

Shapes: ``n`` sequences, ``S`` stored time steps, ``B = P + 1`` body slots (planets, then the star in
the last slot), ``L`` tokens per sequence. Units: AU, AU/yr, M_sun AU/yr^2, years.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from orbitlaw.orbits.constants import G
from orbitlaw.orbits.kepler import (
    SEGMENT,
    _orbit_state,
    _reduce,
    _solve_cold,
    _solve_trajectories,
    _warm_started,
    _warm_step,
)
from orbitlaw.orbits.systems import SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec, _bin


@numba.njit(cache=True, error_model="numpy")
def _eccentric_anomalies(i, N, steps, masses, a, e, M0, dt, buf):
    """sin E and cos E, each (N, steps), of the N planets of system i at t = k * dt, k < steps.

    ``buf`` is scratch space of at least 4 * N * steps floats; returns views into it and the planets'
    mean motions (rad/yr)."""
    size = N * steps
    M = buf[:size].reshape(N, steps)
    E = buf[size:2 * size].reshape(N, steps)
    sE = buf[2 * size:3 * size].reshape(N, steps)
    cE = buf[3 * size:4 * size].reshape(N, steps)
    mean_motion = np.empty(N)
    for j in range(N):
        mean_motion[j] = _mean_motion(masses, a, i, j)
        for k in range(steps):
            M[j, k] = _reduce(M0[i, j] + mean_motion[j] * (k * dt[i]))
    _solve_trajectories(M, e[i, :N].copy(), E, sE, cE)
    return sE, cE, mean_motion


LANES = 2048
"""Lanes solved together by ``_fill_tokens``: enough for long vector loops, few enough to stay in cache."""
# Rows of ``_fill_tokens``'s lane tables: float parameters of the lane's orbit and of its tokens...
_M0, _MOTION, _DT, _K0, _ECC, _AX, _AY, _COS_W, _SIN_W, _OX, _OY, _SHARE = range(12)
# ...and integers: flat index of its first x token in the output, and the token stride per step.
_DEST, _STRIDE = range(2)


@numba.njit(cache=True, error_model="numpy")
def _fill_tokens(n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, dt_ids, steps, lo, width,
                 num_bins, pad, out):
    """Token sequences (n, L, 2) straight from the orbits: the fast path for token-only presets.

    Computes only positions (no velocities) and only the steps whose token fits in the sequence, with
    the arithmetic of ``_fill_states`` (the same Kepler solution per orbit and step as
    ``_solve_trajectories``, the same position formula), so the tokens equal those of the general path.
    Returns the number of coordinates outside the tokeniser range.

    The work is arranged in *lanes* so that it vectorises: a lane is one body's run of up to SEGMENT
    consecutive steps, either a warm-started segment of a slowly advancing orbit or a single step of an
    orbit solved from scratch at every step (as in ``_solve_trajectories``). Systems are taken in chunks
    of about LANES lanes. Lanes are stored longest first, so the lanes still running at step t of their
    segment are a prefix, and each stage of a step is one pass over that prefix.
    """
    n, P = a.shape
    flat = out.reshape(-1)
    cap = LANES + (P + 1) * steps  # a chunk's lanes, at most: LANES plus one more system's
    lane_f, lane_i = np.empty((12, cap)), np.empty((2, cap), np.int64)
    M, E, s, c = np.empty(cap), np.empty(cap), np.empty(cap), np.empty(cap)
    scratch, ok = np.empty((3, cap)), np.empty(cap, np.bool_)
    bx, by = np.empty(cap, np.int32), np.empty(cap, np.int32)
    seg_len = np.empty((LANES, P + 1), np.int64)  # per body of the chunk: SEGMENT (warm), 1 (cold), 0
    fits = np.empty((LANES, P + 1), np.int64)  # per body of the chunk: steps whose token fits
    outside = 0
    i = 0
    while i < n:
        first, n_lanes = i, 0
        count = np.zeros(SEGMENT + 1, np.int64)  # lanes per length
        while i < n and n_lanes < LANES and i - first < LANES:  # (a system may have no lanes)
            outside += _plan_system(i, n_planets, masses, a, M0, star_pos, frozen, dt, dt_ids, steps, lo,
                                    width, num_bins, pad, out, seg_len[i - first], fits[i - first], count)
            n_lanes = count.sum()
            i += 1
        active = np.cumsum(count[::-1])[::-1][1:]  # active[t]: lanes longer than t steps
        start = active - count[1:]  # where the lanes of each length begin, longest first
        for sys in range(first, i):
            _place_lanes(sys, n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, out.shape[1],
                         seg_len[sys - first], fits[sys - first], start, lane_f, lane_i)
        ecc = lane_f[_ECC]
        for t in range(SEGMENT):
            m = active[t]
            if m == 0:
                break
            for q in range(m):
                M[q] = _reduce(lane_f[_M0, q] + lane_f[_MOTION, q] * ((lane_f[_K0, q] + t) * lane_f[_DT, q]))
            if t == 0:
                _solve_cold(M[:m], ecc[:m], E[:m], s[:m], c[:m])
            else:
                _warm_step(M[:m], ecc[:m], E[:m], s[:m], c[:m], scratch, ok)
            outside += _lane_bins(lane_f, s, c, m, lo, width, num_bins, bx, by)
            for q in range(m):
                k = lane_i[_DEST, q] + t * lane_i[_STRIDE, q]
                flat[k] = bx[q]
                flat[k + 1] = by[q]
    return outside


@numba.njit(cache=True, inline="always", error_model="numpy")
def _mean_motion(masses, a, i, body):
    """Mean motion (rad/yr) of body ``body`` of system i about the star (the last mass)."""
    return math.sqrt(G * (masses[i, body] + masses[i, a.shape[1]]) / a[i, body] ** 3)


@numba.njit(cache=True, error_model="numpy")
def _plan_system(i, n_planets, masses, a, M0, star_pos, frozen, dt, dt_ids, steps, lo, width, num_bins,
                 pad, out, seg_len, fits, count):
    """Write system i's time-step token, padding and pinned-star tokens into ``out``; for each body
    slot j (planets, then the star) set ``fits[j]`` (its steps in the sequence) and ``seg_len[j]``
    (SEGMENT if warm-started as ``_solve_trajectories`` decides, 1 if solved from scratch, 0 for a
    pinned star), and add its lanes to ``count`` (lanes per length). Returns the pinned star's count
    of outside coordinates."""
    slots = out.shape[1] - 1
    N = n_planets[i]
    stride = N + 1
    steps_i = min(steps, (slots + N) // stride)
    out[i, 0, 0] = dt_ids[i]
    out[i, 0, 1] = dt_ids[i]
    for slot in range(steps_i * stride, slots):
        out[i, slot + 1, 0] = pad
        out[i, slot + 1, 1] = pad
    outside = 0
    for j in range(N + 1):  # the planets, then the star
        fits[j] = min(steps_i, (slots - 1 - j) // stride + 1)  # steps whose slot for this body exists
        if frozen[i] and j == N:  # the pinned star: one token throughout
            bx, o1 = _bin(star_pos[i, 0], lo, width, num_bins)
            by, o2 = _bin(star_pos[i, 1], lo, width, num_bins)
            for k in range(fits[j]):
                out[i, 1 + k * stride + j, 0] = bx
                out[i, 1 + k * stride + j, 1] = by
            outside += fits[j] * (o1 + o2)
            seg_len[j] = 0
            continue
        body = j if j < N else 0  # the star's position follows from planet 1's orbit
        motion = _mean_motion(masses, a, i, body)
        M_first = _reduce(M0[i, body] + motion * (0 * dt[i]))
        M_second = _reduce(M0[i, body] + motion * (1 * dt[i])) if steps_i > 1 else M_first
        seg_len[j] = SEGMENT if _warm_started(M_first, M_second) else 1
        full, rest = divmod(fits[j], seg_len[j])
        count[seg_len[j]] += full
        count[rest] += rest > 0
    return outside


@numba.njit(cache=True, error_model="numpy")
def _place_lanes(i, n_planets, masses, a, e, omega, M0, com, frozen, star_pos, dt, L, seg_len, fits,
                 start, lane_f, lane_i):
    """Write the lanes of system i, as planned by ``_plan_system``, into the lane tables: a lane of
    length k goes to column ``start[k - 1]``, which then advances."""
    P = a.shape[1]
    N = n_planets[i]
    stride = N + 1
    ms = masses[i, P]
    for j in range(N + 1):
        if seg_len[j] == 0:
            continue
        body = j if j < N else 0
        mp = masses[i, body]
        if frozen[i]:  # the planet orbits the pinned star
            ox, oy, share = star_pos[i, 0], star_pos[i, 1], 1.0
        else:  # planet and star orbit their centre of mass
            ox, oy = com[i, 0], com[i, 1]
            share = ms / (mp + ms) if j < N else -mp / (mp + ms)
        ecc = e[i, body]
        params = (M0[i, body], _mean_motion(masses, a, i, body), dt[i], 0.0, ecc, a[i, body],
                  a[i, body] * math.sqrt(1.0 - ecc ** 2), math.cos(omega[i, body]), math.sin(omega[i, body]),
                  ox, oy, share)
        for k0 in range(0, fits[j], seg_len[j]):
            q = start[min(seg_len[j], fits[j] - k0) - 1]
            start[min(seg_len[j], fits[j] - k0) - 1] += 1
            for row in range(len(params)):
                lane_f[row, q] = params[row]
            lane_f[_K0, q] = k0
            lane_i[_DEST, q] = 2 * (i * L + 1 + k0 * stride + j)
            lane_i[_STRIDE, q] = 2 * stride


@numba.njit(cache=True, error_model="numpy")
def _lane_bins(lane_f, s, c, m, lo, width, num_bins, bx, by):
    """Bin ids (bx, by) of the first m lanes' body positions, from sin E and cos E of their orbits; returns
    how many coordinates fell outside the range. A pass without stores to the output, so it vectorises."""
    outside = 0
    for q in range(m):
        ecc = lane_f[_ECC, q]
        px = lane_f[_AX, q] * (c[q] - ecc)
        py = lane_f[_AY, q] * s[q]
        cw, sw, share = lane_f[_COS_W, q], lane_f[_SIN_W, q], lane_f[_SHARE, q]
        x = cw * px - sw * py
        y = sw * px + cw * py
        bx[q], o1 = _bin(lane_f[_OX, q] + share * x, lo, width, num_bins)
        by[q], o2 = _bin(lane_f[_OY, q] + share * y, lo, width, num_bins)
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


def gravitational_forces(positions: np.ndarray, masses: np.ndarray, strength=None) -> np.ndarray:
    """Net Newtonian force on each body, (n, S, B, 2) in M_sun AU / yr^2; NaN for absent bodies.

    positions: (n, S, B, 2) AU with NaN for absent bodies; masses: (n, B) M_sun with NaN likewise.
    F_i = sum_{j != i} G m_i m_j (r_j - r_i) / |r_j - r_i|^3; with ``strength`` (a function of the distance r,
    :func:`orbitlaw.orbits.forcelaw.strength`) another law, F_i = sum_j m_i m_j f(r_ij) (r_j - r_i) / r_ij.
    """
    present = np.isfinite(masses)[:, None, :] & np.all(np.isfinite(positions), axis=-1)
    m = np.where(np.isfinite(masses), masses, 0.0)[:, None, :]
    r = np.where(present[..., None], positions, 0.0)
    sep = r[:, :, None, :, :] - r[:, :, :, None, :]  # (n, S, i, j, 2): r_j - r_i
    dist = np.sqrt(np.sum(sep**2, axis=-1))
    pair = present[:, :, :, None] & present[:, :, None, :] & (dist > 0)
    if strength is None:
        inv3 = np.where(pair, 1.0 / np.where(pair, dist, 1.0) ** 3, 0.0)
        coeff = G * m[:, :, :, None] * m[:, :, None, :] * inv3
    else:
        safe = np.where(pair, dist, 1.0)
        coeff = np.where(pair, m[:, :, :, None] * m[:, :, None, :] * strength(safe) / safe, 0.0)
    forces = np.einsum("nsij,nsijc->nsic", coeff, sep)
    return np.where(present[..., None], forces, np.nan)
