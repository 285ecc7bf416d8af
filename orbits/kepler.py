"""Analytic two-body motion: Kepler's equation and the relative orbit, compiled with numba.

Units throughout: AU, years, solar masses (G = 4 pi^2 AU^3 / (M_sun yr^2)); angles in radians.

Kepler's equation ``M = E - e sin E`` is solved for elliptic orbits (0 <= e <= 0.99) to machine
precision: a starter from the Lagrange series ``E = M + e sin M + e^2 sin M cos M + ...`` clamped to
the bracket [M, M + e] (or [M - e, M]), one quartic Householder step, then Halley steps until the step
falls below 1e-6 rad (cubic convergence then leaves an error of order 1e-18, under the double-precision
floor). The iteration count is not fixed; a hard cap only guards against a bug. ``_solve_cold`` runs
the same steps for many mean anomalies in passes, for throughput.

Along a trajectory (``_solve_trajectories``, what the dataset generator uses) the mean anomaly advances by
a constant n dt per step, so when that is small the previous step's solution gives a starter accurate
to ~1e-6 rad or better (a fourth-order inverse series, no trigonometry), and one Householder step,
accepted only when its size shows the remaining error is below ~1e-17 rad, finishes the solve: one sine
and cosine per step instead of three. Each trajectory restarts cold every ``SEGMENT`` steps.

Speed comes from the trigonometry and from vectorisation. A sine or a cosine from libm costs about
15 ns on this machine, which would dominate the ten billion solves of the reference pretraining set, so
``_sincos`` evaluates both with minimax polynomials after a two-part (Cody-Waite) reduction by pi/2, and
picks the quadrant with selects rather than branches or table look-ups: about 2 ulp, and loops over it
compile to AVX2 code. The solvers run as passes over many independent elements (``_solve_cold``, and
``_warm_step`` for trajectories), so each pass vectorises and long dependency chains overlap.
Functions compile with ``error_model="numpy"``: no Python ZeroDivisionError check around each division
(no divisor here can be zero for e <= 0.99). IEEE arithmetic is unchanged (no fastmath: no reassociation
and no fused multiply-add), so results are the same on every x86-64 machine and NaN/inf behave as usual.
"""

from __future__ import annotations

import math

import numba
import numpy as np

TWO_PI = 2.0 * math.pi
E_MAX = 0.99
"""Largest eccentricity accepted: beyond it the orbit is too close to parabolic for the protocol."""

_INV_TWO_PI = 1.0 / TWO_PI
_TWO_OVER_PI = 2.0 / math.pi
_PIO2_HI = 1.57079632673412561417e+00
"""pi/2 to 33 bits: q * _PIO2_HI is exact for |q| < 2**20."""
_PIO2_LO = 6.07710050650619224932e-11
"""pi/2 - _PIO2_HI, rounded."""
_MAX_ITER = 64


@numba.njit(cache=True, inline="always", error_model="numpy")
def _reduce(x):
    """x modulo 2 pi, in [0, 2 pi)."""
    y = x - TWO_PI * np.floor(x * _INV_TWO_PI)
    return y if y < TWO_PI else 0.0


@numba.njit(cache=True, inline="always", error_model="numpy")
def _sincos(x):
    """sin(x), cos(x) for |x| < 1e5, to about 2 ulp (absolute error below 3e-16).

    x = q pi/2 + r with |r| <= pi/4 (two-part reduction, r exact to ~1e-21), then the minimax polynomials
    of degree 13 (sine) and 14 (cosine) on [-pi/4, pi/4] (the coefficients of fdlibm's kernels), and the
    quadrant q mod 4 chosen by selects so that a loop over this function vectorises."""
    q = np.floor(x * _TWO_OVER_PI + 0.5)
    r = (x - q * _PIO2_HI) - q * _PIO2_LO
    z = r * r
    s = r + r * z * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 + z * (
        -1.98412698298579493134e-04 + z * (2.75573137070700676789e-06 + z * (
            -2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    c = 1.0 - 0.5 * z + z * z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (
        2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 + z * (
            2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))))
    quadrant = q - 4.0 * np.floor(q * 0.25)  # 0, 1, 2 or 3: sin x = s, c, -s, -c; cos x = c, -s, -c, s
    odd = (quadrant == 1.0) | (quadrant == 3.0)
    sin_part = c if odd else s
    cos_part = s if odd else c
    return (-sin_part if quadrant >= 2.0 else sin_part,
            -cos_part if (quadrant == 1.0) | (quadrant == 2.0) else cos_part)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _householder(E, e, M):
    """One third-order Householder step for E - e sin E = M from E: (new E, step, sin E, cos E at old E)."""
    sE, cE = _sincos(E)
    f = E - e * sE - M
    fp = 1.0 - e * cE
    fpp = e * sE
    fppp = e * cE
    # Householder's third-order step in closed form (one division).
    d = -f * (fp * fp - 0.5 * f * fpp) / (fp * (fp * fp - f * fpp) + f * f * fppp * (1.0 / 6.0))
    return E + d, d, sE, cE


@numba.njit(cache=True, inline="always", error_model="numpy")
def _halley(E, e, M):
    """One Halley step (cubic convergence, one division): (new E, step, sin E, cos E at old E)."""
    sE, cE = _sincos(E)
    f = E - e * sE - M
    fp = 1.0 - e * cE
    d = -f * fp / (fp * fp - 0.5 * f * e * sE)
    return E + d, d, sE, cE


@numba.njit(cache=True, inline="always", error_model="numpy")
def _finish(E, d, sE, cE):
    """E after its last step ``d``, with sin E and cos E rotated from the pre-step values by d (< 1e-6)."""
    d2 = d * d
    cd = 1.0 - 0.5 * d2
    sd = d * (1.0 - d2 / 6.0)
    return E, sE * cd + cE * sd, cE * cd - sE * sd


@numba.njit(cache=True, error_model="numpy")
def _solve(M, e):
    """Eccentric anomaly E in [0, 2 pi) with sin E and cos E, for mean anomaly M (any real) and 0 <= e < 1."""
    M = _reduce(M)
    sM, cM = _sincos(M)
    # Starter: the Lagrange series to second order, clamped to the bracket [M, M + e] (or [M - e, M]).
    E = M + e * sM * (1.0 + e * cM)
    if M < math.pi:
        E = min(max(E, M), M + e)
    else:
        E = min(max(E, M - e), M)
    E = _householder(E, e, M)[0]
    for _ in range(_MAX_ITER):
        E, d, sE, cE = _halley(E, e, M)
        if abs(d) < 1e-6:
            # The last step was small: its residual error is of order d^3 < 1e-18.
            return _finish(E, d, sE, cE)
    raise RuntimeError("Kepler solver did not converge")


@numba.njit(cache=True, error_model="numpy")
def _solve_cold(M, e, E_out, s_out, c_out):
    """Solve Kepler's equation for many mean anomalies ``M`` (1-D, reduced in place), eccentricities
    ``e`` (same shape), from scratch.

    Same method, stopping rule and bits as ``_solve`` (which always takes at least two steps), arranged
    for throughput: the starter and the first two steps each run as a pass over all elements, so the
    long dependency chain of one solve overlaps with the others in the CPU pipeline (2x faster than
    one solve after another); only elements whose second step was not yet below 1e-6 rad are solved
    again, one by one, until the step is.
    """
    n = M.size
    for k in range(n):
        Mk = _reduce(M[k])
        sM, cM = _sincos(Mk)
        ek = e[k]
        E0 = Mk + ek * sM * (1.0 + ek * cM)
        lo = Mk if Mk < math.pi else Mk - ek
        M[k] = Mk
        E_out[k] = min(max(E0, lo), lo + ek)
    for k in range(n):
        E_out[k] = _householder(E_out[k], e[k], M[k])[0]
    for k in range(n):
        E, d, sE, cE = _halley(E_out[k], e[k], M[k])
        if abs(d) < 1e-6:
            E_out[k], s_out[k], c_out[k] = _finish(E, d, sE, cE)
        else:
            E_out[k], s_out[k], c_out[k] = _solve(M[k], e[k])


@numba.njit(cache=True, error_model="numpy")
def _solve_block(M, e, E_out, s_out, c_out):
    """``_solve_cold`` for mean anomalies ``M`` of one orbit of eccentricity ``e``."""
    _solve_cold(M, np.full(M.size, e), E_out, s_out, c_out)


# ----------------------------------------------------------------------------------------------------
# Along a trajectory: warm starts from the previous time step


SEGMENT = 32
"""Time steps per warm-started segment: step k is solved from scratch when k % SEGMENT == 0, and from
step k - 1's solution otherwise, so each result is a function of (orbit, k) alone and rounding cannot
build up over more than SEGMENT steps."""
WARM_MAX_STEP = 0.5
"""Largest change of mean anomaly per step (rad, modulo 2 pi) for which an orbit is warm-started."""
_WARM_ACCEPT = 1e-4
_WARM_MAX_ITER = 8


@numba.njit(cache=True, inline="always", error_model="numpy")
def _warm_started(M0, M1):
    """Whether an orbit at reduced mean anomalies M0, M1 on its first two steps is solved with warm starts:
    when its mean anomaly advances by less than WARM_MAX_STEP per step, modulo 2 pi."""
    dM = M1 - M0
    dM -= TWO_PI * np.floor(dM * _INV_TWO_PI + 0.5)
    return abs(dM) < WARM_MAX_STEP


@numba.njit(cache=True, inline="always", error_model="numpy")
def _warm_starter(M, e, E0, s0, c0):
    """Starter for E at mean anomaly M in [0, 2 pi), from a solution E0 (sin E0 = s0, cos E0 = c0) at a
    nearby mean anomaly M0 = E0 - e s0: the inverse Taylor series of M(E) about E0 to fourth order in
    the change of M (taken modulo 2 pi into [-pi, pi)), moved to M's branch and clamped into the bracket
    [M, M + e] (or [M - e, M]) like the cold starter. Trigonometry-free: one division."""
    D = M - (E0 - e * s0)
    if D >= math.pi:
        D -= TWO_PI
    elif D < -math.pi:
        D += TWO_PI
    inv = 1.0 / (1.0 - e * c0)
    # M(E0 + x) - M0 = a1 x + a2 x^2 + a3 x^3 + a4 x^4 + ..., with ak / a1 = p, q, r below.
    p = 0.5 * e * s0 * inv
    q = (1.0 / 6.0) * e * c0 * inv
    r = (-1.0 / 24.0) * e * s0 * inv
    u = D * inv
    x = u * (1.0 + u * (-p + u * ((2.0 * p * p - q) + u * (5.0 * p * q - r - 5.0 * p * p * p))))
    E = E0 + x
    if E - M > math.pi:
        E -= TWO_PI
    elif E - M < -math.pi:
        E += TWO_PI
    lo = M if M < math.pi else M - e
    return min(max(E, lo), lo + e)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _householder_accept(E, sE, cE, e, M):
    """One Householder step from E (with sin E, cos E): (E, sin E, cos E, accepted).

    Accepted when |step| (1 + e / (1 - e cos E)) < 1e-4: the error left by this fourth-order step is
    then below about 1e-17 rad, and sin and cos are rotated from E by the step (Taylor series, exact to
    1e-22). Otherwise returns E + step, unrotated, for another iteration."""
    f = E - e * sE - M
    fp = 1.0 - e * cE
    fpp = e * sE
    d = -f * (fp * fp - 0.5 * f * fpp) / (fp * (fp * fp - f * fpp) + f * f * cE * (e / 6.0))
    if abs(d) * (1.0 + e / fp) < _WARM_ACCEPT:
        d2 = d * d
        cd = 1.0 - d2 * (0.5 - d2 * (1.0 / 24.0))
        sd = d * (1.0 - d2 * (1.0 / 6.0))
        return E + d, sE * cd + cE * sd, cE * cd - sE * sd, True
    return E + d, sE, cE, False


@numba.njit(cache=True, error_model="numpy")
def _refine(E, e, M):
    """(E, sin E, cos E) for mean anomaly M by Householder steps from E until one is accepted; the cold
    solver if that takes more than a few steps."""
    for _ in range(_WARM_MAX_ITER):
        sE, cE = _sincos(E)
        E, sE, cE, ok = _householder_accept(E, sE, cE, e, M)
        if ok:
            return E, sE, cE
    return _solve(M, e)


@numba.njit(cache=True, error_model="numpy")
def _solve_trajectories(M, e, E, s, c):
    """Kepler's equation along P orbits of S consecutive equal time steps: rows of M (P, S), mean
    anomalies already reduced to [0, 2 pi), eccentricities e (P,); writes E, sin E, cos E (P, S).

    An orbit whose mean anomaly advances by less than WARM_MAX_STEP per step (modulo 2 pi) is solved
    from scratch only every SEGMENT steps; the steps in between start from the previous step's solution
    (``_warm_starter``) and usually need a single Householder step to reach machine precision, one sine
    and cosine instead of three. Other orbits are solved from scratch at every step (``_solve_cold``).
    Segments of all orbits advance together, one pass per stage, so independent solves overlap in the
    CPU pipeline. Each result depends only on (orbit, step), not on P or on which orbits are solved
    together, and agrees with the cold solver to about 1e-15 rad.
    """
    P, S = M.shape
    if P == 0 or S == 0:
        return
    Mf, Ef, sf, cf = M.reshape(-1), E.reshape(-1), s.reshape(-1), c.reshape(-1)
    n_seg = (S + SEGMENT - 1) // SEGMENT
    last = S - (n_seg - 1) * SEGMENT  # length of each orbit's last segment
    # Cold elements (every step of an orbit that is not warm-started, and the first step of each
    # segment) are solved together from scratch. Lanes are the segments of warm orbits, full-length
    # ones first, so the lanes still running at offset t are a prefix.
    cold, Mc, ec = np.empty(P * S, np.int64), np.empty(P * S), np.empty(P * S)
    base = np.empty(P * n_seg, np.int64)
    ecc = np.empty(P * n_seg)
    n_cold = n_full = n_lanes = 0
    for full in (True, False):
        for p in range(P):
            warm = _warm_started(M[p, 0], M[p, 1] if S > 1 else M[p, 0])
            for g in range(n_seg):
                if (g < n_seg - 1 or last == SEGMENT) != full:
                    continue
                k0 = p * S + g * SEGMENT
                if warm:
                    base[n_lanes] = k0
                    ecc[n_lanes] = e[p]
                    n_lanes += 1
                    cold[n_cold], Mc[n_cold], ec[n_cold] = k0, Mf[k0], e[p]
                    n_cold += 1
                else:
                    for k in range(k0, min(k0 + SEGMENT, (p + 1) * S)):
                        cold[n_cold], Mc[n_cold], ec[n_cold] = k, Mf[k], e[p]
                        n_cold += 1
        if full:
            n_full = n_lanes
    Ec, sc, cc = np.empty(n_cold), np.empty(n_cold), np.empty(n_cold)
    _solve_cold(Mc[:n_cold], ec[:n_cold], Ec, sc, cc)
    for k in range(n_cold):
        Ef[cold[k]], sf[cold[k]], cf[cold[k]] = Ec[k], sc[k], cc[k]
    # Lane state: the last solution (E, sin E, cos E) of each lane, kept contiguous so the passes vectorise.
    El, sl, cl = np.empty(n_lanes), np.empty(n_lanes), np.empty(n_lanes)
    for i in range(n_lanes):
        El[i], sl[i], cl[i] = Ef[base[i]], sf[base[i]], cf[base[i]]
    Ml, scratch, ok = np.empty(n_lanes), np.empty((3, n_lanes)), np.empty(n_lanes, np.bool_)
    for t in range(1, SEGMENT):
        m = n_lanes if t < last else n_full
        for i in range(m):
            Ml[i] = Mf[base[i] + t]
        _warm_step(Ml[:m], ecc[:m], El[:m], sl[:m], cl[:m], scratch, ok)
        for i in range(m):
            j = base[i] + t
            Ef[j], sf[j], cf[j] = El[i], sl[i], cl[i]


@numba.njit(cache=True, error_model="numpy")
def _warm_step(M, e, E, s, c, scratch, ok):
    """Move m orbits one step along their trajectories: on entry (E, s, c) hold each orbit's solution
    (E, sin E, cos E) at its previous mean anomaly; on exit, the solution at mean anomaly M (reduced to
    [0, 2 pi)). M, e, E, s, c: (m,); scratch (3, >= m) and ok (>= m,) are work space.

    Each stage is one pass over all m orbits (starter, sine and cosine, Householder step, then the rare
    orbit whose step was not accepted), so that the passes vectorise."""
    m = M.size
    Eg, sg, cg = scratch[0], scratch[1], scratch[2]
    for i in range(m):
        Eg[i] = _warm_starter(M[i], e[i], E[i], s[i], c[i])
    for i in range(m):
        sg[i], cg[i] = _sincos(Eg[i])
    for i in range(m):
        E[i], s[i], c[i], ok[i] = _householder_accept(Eg[i], sg[i], cg[i], e[i], M[i])
    for i in range(m):
        if not ok[i]:
            E[i], s[i], c[i] = _refine(E[i], e[i], M[i])


@numba.njit(cache=True, inline="always", error_model="numpy")
def _orbit_state(a, e, mean_motion, sE, cE, cos_w, sin_w):
    """Relative position and velocity (x, y, vx, vy) in AU and AU/yr on an elliptic orbit.

    The orbit has semi-major axis ``a``, eccentricity ``e``, mean motion ``mean_motion`` (rad/yr) and
    periapsis direction (cos_w, sin_w); motion is counter-clockwise; (sE, cE) are sin and cos of the
    eccentric anomaly.
    """
    b_over_a = math.sqrt(1.0 - e * e)
    px = a * (cE - e)
    py = a * b_over_a * sE
    rate = a * mean_motion / (1.0 - e * cE)
    pvx = -rate * sE
    pvy = rate * b_over_a * cE
    return (cos_w * px - sin_w * py, sin_w * px + cos_w * py,
            cos_w * pvx - sin_w * pvy, sin_w * pvx + cos_w * pvy)


@numba.njit(cache=True, error_model="numpy")
def _solve_many(M, e, out):
    for i in range(M.size):
        out[i] = _solve(M[i], e[i])[0]


@numba.njit(cache=True, error_model="numpy")
def _states_many(a, e, n, M, w, pos, vel):
    for i in range(a.size):
        _, sE, cE = _solve(M[i], e[i])
        x, y, vx, vy = _orbit_state(a[i], e[i], n[i], sE, cE, math.cos(w[i]), math.sin(w[i]))
        pos[i, 0] = x
        pos[i, 1] = y
        vel[i, 0] = vx
        vel[i, 1] = vy


def check_elliptic(e) -> None:
    """Raise ValueError unless every eccentricity is finite and in [0, E_MAX]."""
    e = np.asarray(e, dtype=np.float64)
    if not np.all(np.isfinite(e)):
        raise ValueError("eccentricity must be finite")
    if np.any(e < 0):
        raise ValueError(f"eccentricity must be >= 0, got {e.min():g}")
    if np.any(e >= 1):
        raise ValueError(f"eccentricity {e.max():g} >= 1: parabolic and hyperbolic orbits are not supported")
    if np.any(e > E_MAX):
        raise ValueError(f"eccentricity {e.max():g} exceeds the supported maximum {E_MAX}")


def solve_kepler(mean_anomaly, e) -> np.ndarray:
    """Eccentric anomaly E in [0, 2 pi) solving M = E - e sin E, broadcasting M and e (radians)."""
    M, e = np.broadcast_arrays(np.asarray(mean_anomaly, np.float64), np.asarray(e, np.float64))
    check_elliptic(e)
    out = np.empty(M.shape)
    _solve_many(np.ascontiguousarray(M).ravel(), np.ascontiguousarray(e).ravel(), out.reshape(-1))
    return out


def relative_states(a, e, omega, mean_anomaly, mu):
    """Relative position (AU) and velocity (AU/yr) of elliptic Kepler orbits, broadcasting all inputs.

    a: semi-major axis (AU); e: eccentricity; omega: periapsis angle from +x (rad); mean_anomaly (rad);
    mu = G (m1 + m2) (AU^3/yr^2). Returns ``(pos, vel)``, each of shape ``broadcast_shape + (2,)``.
    """
    arrays = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, e, omega, mean_anomaly, mu)))
    a, e, w, M, mu = (np.ascontiguousarray(x).ravel() for x in arrays)
    check_elliptic(e)
    if np.any(~(a > 0)) or np.any(~(mu > 0)):
        raise ValueError("semi-major axis and mu must be positive")
    n = np.sqrt(mu / a**3)
    pos = np.empty(arrays[0].shape + (2,))
    vel = np.empty_like(pos)
    _states_many(a, e, n, M, w, pos.reshape(-1, 2), vel.reshape(-1, 2))
    return pos, vel
