"""Trajectories made elsewhere as a dataset every command reads: REBOUND simulations and archives, or a table.

    orbitlaw import --rebound run1.bin run2.bin --time-step six-months --out data/mine
    orbitlaw import --table orbits.csv --out data/mine --val 20

    import orbitlaw
    orbitlaw.import_trajectories([sim_a, sim_b], "data/mine", steps=200)   # rebound.Simulation objects

Sources (each system one sequence; units AU, years, solar masses; the plane z = 0):

- a ``rebound.Simulation``: a copy is integrated (its own integrator) for ``steps`` steps of the chosen time step;
- a REBOUND SimulationArchive file: the system sampled at every time step from the archive's first snapshot to
  its last (``Simulationarchive.getSimulation(t, mode="exact")``), at most ``steps``;
- a table (CSV or Parquet), one row per body per time: columns ``system``, ``t`` (yr), ``body``, ``x``, ``y`` (AU),
  and optionally ``mass`` (M_sun, constant per body), ``vx``, ``vy`` (AU/yr) and ``z`` (must be 0). Times must be
  evenly spaced by one of the tokeniser's time steps (a week or six months) and every body present at each.

The star is the heaviest body (the last body of a system when there are no masses), the planets the others in their
given order: the datasets' body order (planets, then the star). Where masses are known, the force labels are the
Newtonian forces of the positions (with a simulation's own G; the toolkit's G for a table) and, where the velocities
are given too, the orbital elements are the osculating ones of each planet about the star at the first step; a
planet unbound from its star (e >= 1) is refused. Without masses the dataset trains and evaluates, and its forces,
masses and elements are NaN. Velocities not given are differences of the positions (central inside a trajectory,
one-sided at its ends: a six-month step makes them coarse), and the elements are then NaN. A simulation must use G
in AU, yr and M_sun (``sim.units = ("yr", "AU", "Msun")``, which REBOUND gives as 39.4769 against the toolkit's 4
pi^2 = 39.4784).

The dataset's preset is ``imported``; its manifest records the source (kind, file names and sha256s), what was
derived and the checksum of every file, so ``orbitlaw verify`` checks it as any other. It is written under a
staging name and renamed when whole: a failed import leaves nothing.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orbitlaw.errors import first_line
from orbitlaw.orbits import generate
from orbitlaw.orbits.blocks import SHARD_SIZE
from orbitlaw.orbits.constants import G
from orbitlaw.orbits.manifest import build_manifest, check_split_names, config_hash, dataset_config
from orbitlaw.orbits.presets import IMPORTED
from orbitlaw.orbits.reader import write_checked_manifest
from orbitlaw.orbits.systems import empty_batch
from orbitlaw.orbits.tokenizer import TIME_STEPS, TokenizerSpec
from orbitlaw.provenance import atomic_path, staged_directory

TIME_STEP_NAMES = {"week": 0, "six-months": 1}
"""The tokeniser's time steps by name (:data:`~orbitlaw.orbits.tokenizer.TIME_STEPS`), for ``--time-step``."""
_PLANAR = 1e-9  # |z| and |vz| below this (AU, AU/yr) count as the plane


@dataclass
class Trajectory:
    """One system's states. positions, velocities: (S, B, 2) AU and AU/yr (velocities None: not given), bodies in
    the datasets' order (planets, then the star); masses: (B,) M_sun (NaN: unknown); dt: yr; G: the constant its
    forces follow (AU^3 M_sun^-1 yr^-2); name: where it came from, for errors."""

    positions: np.ndarray
    velocities: np.ndarray | None
    masses: np.ndarray
    dt: float
    G: float
    name: str


def _time_step_index(dt: float, where: str) -> int:
    for k, step in enumerate(TIME_STEPS):
        if math.isclose(dt, step, rel_tol=1e-6):
            return k
    known = ", ".join(f"{name} = {TIME_STEPS[k]:.6f} yr" for name, k in TIME_STEP_NAMES.items())
    raise ValueError(f"{where}: its states are {dt:.6g} yr apart, not one of the tokeniser's time steps ({known}); "
                     "sample it at one of them")


def _star_last(masses: np.ndarray, star: int | None = None) -> list[int]:
    """Body order with the star (the heaviest, or the last without masses) moved to the end."""
    B = len(masses)
    if star is None:
        star = int(np.nanargmax(masses)) if np.isfinite(masses).all() else B - 1
    return [b for b in range(B) if b != star] + [star]


# --- sources ---------------------------------------------------------------------------------------------------

def _rebound():
    import rebound

    return rebound


def _check_units(sim, where: str) -> float:
    if not math.isclose(sim.G, G, rel_tol=1e-4):
        raise ValueError(f"{where}: G is {sim.G:g}, not in AU, yr and M_sun ({G:.4f}); set "
                         "sim.units = ('yr', 'AU', 'Msun') before adding particles")
    return float(sim.G)


def _masses(sim, where: str) -> np.ndarray:
    masses = np.array([p.m for p in sim.particles], dtype=np.float64)
    if len(masses) < 2 or not np.all(masses > 0):
        raise ValueError(f"{where}: needs at least two bodies, each with a positive mass (M_sun); a test particle "
                         "(m = 0) has no force to learn")
    return masses


def _state(sim, where: str, bodies: int) -> tuple[np.ndarray, np.ndarray]:
    ps = sim.particles
    if len(ps) != bodies:
        raise ValueError(f"{where}: its number of bodies changes ({bodies}, then {len(ps)} at t = {sim.t:g} yr)")
    xyz = np.array([[p.x, p.y, p.z, p.vx, p.vy, p.vz] for p in ps], dtype=np.float64)
    if np.abs(xyz[:, [2, 5]]).max() > _PLANAR:
        raise ValueError(f"{where}: a body leaves the plane z = 0 (the toolkit's orbits are planar); rotate the "
                         "system into its orbital plane first")
    return xyz[:, :2], xyz[:, 3:5]


def from_simulation(sim, steps: int, time_step: str = "six-months", name: str = "simulation") -> Trajectory:
    """``steps`` states of a copy of the REBOUND simulation ``sim`` (its own integrator), ``time_step`` apart."""
    if steps < 2:
        raise ValueError(f"steps must be at least 2, got {steps}")
    G_sim = _check_units(sim, name)
    dt = TIME_STEPS[TIME_STEP_NAMES[time_step]]
    sim = sim.copy()
    t0 = sim.t
    masses = _masses(sim, name)
    pos, vel = [], []
    for k in range(steps):
        sim.integrate(t0 + k * dt, exact_finish_time=1)
        p, v = _state(sim, name, len(masses))
        pos.append(p)
        vel.append(v)
    order = _star_last(masses)
    return Trajectory(np.array(pos)[:, order], np.array(vel)[:, order], masses[order], dt, G_sim, name)


def from_archive(path: str | Path, time_step: str = "six-months", steps: int | None = None) -> Trajectory:
    """The system of a REBOUND SimulationArchive file, sampled every ``time_step`` from its first snapshot to its
    last (at most ``steps`` states)."""
    rebound = _rebound()
    path = Path(path)
    try:
        with warnings.catch_warnings():  # REBOUND warns, and reads on, where a file is damaged: refuse it instead
            warnings.simplefilter("error", RuntimeWarning)
            archive = rebound.Simulationarchive(str(path))
            first = archive[0]
    except Exception as exc:  # REBOUND raises its own and the OS's errors for a file that is not an archive
        raise ValueError(f"{path}: not a REBOUND SimulationArchive, or a damaged one ({first_line(exc)})") from None
    G_sim = _check_units(first, str(path))
    dt = TIME_STEPS[TIME_STEP_NAMES[time_step]]
    available = int(math.floor((archive.tmax - archive.tmin) / dt + 1e-9)) + 1
    count = available if steps is None else min(steps, available)
    if count < 2:
        raise ValueError(f"{path}: it spans {archive.tmax - archive.tmin:g} yr, less than two {time_step} steps")
    masses = _masses(first, str(path))
    pos, vel = [], []
    for k in range(count):
        sim = archive.getSimulation(archive.tmin + k * dt, mode="exact")
        p, v = _state(sim, str(path), len(masses))
        pos.append(p)
        vel.append(v)
    order = _star_last(masses)
    return Trajectory(np.array(pos)[:, order], np.array(vel)[:, order], masses[order], dt, G_sim, path.name)


TABLE_COLUMNS = ("system", "t", "body", "x", "y")


def _cube(grid, columns: tuple[str, ...], times: int) -> np.ndarray:
    """Columns of a system's rows (ordered time-major, then body) as an array (times, bodies, len(columns))."""
    return grid[list(columns)].to_numpy(np.float64).reshape(times, -1, len(columns))


def from_table(path: str | Path) -> list[Trajectory]:
    """The systems of a CSV or Parquet table (module docstring), in the order they first appear."""
    import pandas as pd

    path = Path(path)
    try:
        table = pd.read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else pd.read_csv(path)
    except ImportError:
        raise ValueError(f"{path}: reading Parquet needs pyarrow: pip install 'orbitlaw[data]'") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{path}: not a readable table ({first_line(exc)})") from None
    missing = [c for c in TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path} has no column {', '.join(missing)}; a table needs {', '.join(TABLE_COLUMNS)} "
                         "(and optionally mass, vx, vy)")
    numeric = [c for c in ("t", "x", "y", "z", "mass", "vx", "vy") if c in table.columns]
    for c in numeric:
        values = pd.to_numeric(table[c], errors="coerce").to_numpy(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}: column {c!r} has a missing, non-numeric or non-finite value (row {row + 2} "
                             f"of the file: {table[c].iloc[row]!r})")
        table[c] = values
    if table["system"].isna().any():
        row = int(np.flatnonzero(table["system"].isna().to_numpy())[0])
        raise ValueError(f"{path}: column 'system' is missing on row {row + 2} of the file")
    if "z" in table.columns and np.abs(table["z"]).max() > _PLANAR:
        raise ValueError(f"{path}: column 'z' is not 0 (the toolkit's orbits are planar); rotate the systems into "
                         "their orbital planes first")
    out = []
    for system, rows in table.groupby("system", sort=False):
        where = f"{path}, system {system!r}"
        bodies = list(dict.fromkeys(rows["body"]))
        times = np.unique(rows["t"].to_numpy())
        if len(rows) != len(times) * len(bodies) or rows.duplicated(["t", "body"]).any():
            raise ValueError(f"{where}: every body needs exactly one row at each time ({len(bodies)} bodies, "
                             f"{len(times)} times, {len(rows)} rows)")
        if len(bodies) < 2 or len(times) < 2:
            raise ValueError(f"{where}: needs at least two bodies and two times")
        steps = np.diff(times)
        if not np.allclose(steps, steps[0], rtol=1e-6, atol=0):
            raise ValueError(f"{where}: its times are not evenly spaced ({steps.min():g} to {steps.max():g} yr)")
        _time_step_index(float(steps[0]), where)
        rows = rows.set_index(["t", "body"]).sort_index(level="t", sort_remaining=False)
        grid = rows.reindex(pd.MultiIndex.from_product([times, bodies], names=["t", "body"]))

        masses = np.full(len(bodies), np.nan)
        if "mass" in grid.columns:
            per_body = grid["mass"].to_numpy().reshape(len(times), len(bodies))
            if not np.all(per_body == per_body[0]):
                raise ValueError(f"{where}: a body's mass changes between rows (masses must be constant)")
            masses = per_body[0].astype(np.float64)
            if np.any(masses <= 0):
                raise ValueError(f"{where}: masses must be positive (solar masses)")
        order = _star_last(masses)
        vel = _cube(grid, ("vx", "vy"), len(times))[:, order] if {"vx", "vy"} <= set(grid.columns) else None
        out.append(Trajectory(_cube(grid, ("x", "y"), len(times))[:, order], vel, masses[order], float(steps[0]), G,
                              where))
    return out


# --- the dataset -----------------------------------------------------------------------------------------------

def _elements(traj: Trajectory) -> tuple[np.ndarray, ...]:
    """(a, e, omega, mean_anomaly0) of each planet about the star at the first step (osculating, two-body)."""
    r = traj.positions[0, :-1] - traj.positions[0, -1]
    v = traj.velocities[0, :-1] - traj.velocities[0, -1]
    mu = traj.G * (traj.masses[:-1] + traj.masses[-1])
    dist = np.hypot(r[:, 0], r[:, 1])
    v2 = np.sum(v * v, axis=1)
    energy = v2 / 2 - mu / dist
    rv = np.sum(r * v, axis=1)
    ecc = ((v2 - mu / dist)[:, None] * r - rv[:, None] * v) / mu[:, None]
    e = np.hypot(ecc[:, 0], ecc[:, 1])
    unbound = np.flatnonzero((energy >= 0) | (e >= 1))
    if len(unbound):
        j = int(unbound[0])
        raise ValueError(f"{traj.name}: planet {j + 1} is not bound to its star (e = {e[j]:.3g}): the toolkit's "
                         "datasets are bound orbits")
    a = -mu / (2 * energy)
    omega = np.mod(np.arctan2(ecc[:, 1], ecc[:, 0]), 2 * np.pi)  # [0, 2 pi), as the presets draw it
    h = r[:, 0] * v[:, 1] - r[:, 1] * v[:, 0]
    f = np.arctan2(r[:, 1], r[:, 0]) - omega
    f = np.where(h < 0, -f, f)  # a retrograde orbit's anomaly runs the other way
    E = 2 * np.arctan2(np.sqrt(1 - e) * np.sin(f / 2), np.sqrt(1 + e) * np.cos(f / 2))
    return a, e, omega, np.mod(E - e * np.sin(E), 2 * np.pi)


def _arrays(trajs: list[Trajectory], steps: int, P: int, seq_len: int, spec: TokenizerSpec) -> tuple[dict, int]:
    n = len(trajs)
    batch = empty_batch(n, P)
    pos = np.full((n, steps, P + 1, 2), np.nan)
    vel = np.full_like(pos, np.nan)
    forces = np.full_like(pos, np.nan)
    for i, traj in enumerate(trajs):
        N = traj.positions.shape[1] - 1
        slots = [*range(N), P]
        p = traj.positions[:steps]
        v = traj.velocities[:steps] if traj.velocities is not None else np.gradient(traj.positions, traj.dt,
                                                                                   axis=0)[:steps]
        pos[i][:, slots], vel[i][:, slots] = p, v
        batch.n_planets[i] = N
        batch.dt[i] = traj.dt
        batch.dt_index[i] = _time_step_index(traj.dt, traj.name)
        if np.isfinite(traj.masses).all():
            batch.masses[i, slots] = traj.masses
            if traj.velocities is not None:  # the elements need the true velocities (differences are too coarse)
                batch.a[i, :N], batch.e[i, :N], batch.omega[i, :N], batch.mean_anomaly0[i, :N] = _elements(traj)
            else:  # still refuse an unbound planet, by the central difference at the second state
                _elements(Trajectory(traj.positions[1:], v[1:], traj.masses, traj.dt, traj.G, traj.name))
            batch.com[i] = traj.masses @ p[0] / traj.masses.sum()
            forces[i] = generate.gravitational_forces(pos[i:i + 1], batch.masses[i:i + 1],
                                                      strength=lambda r, g=traj.G: g / r**2)[0]
        else:
            batch.com[i] = np.nan
    xy = generate.token_order(pos, batch.n_planets, seq_len)
    tokens, outside = generate.tokenize(xy, batch.dt_index, spec)
    arrays = {**batch.arrays(), "tokens": tokens, "times": np.arange(steps)[None, :] * batch.dt[:, None],
              "positions": pos, "velocities": vel, "forces": forces}
    return arrays, outside


def _block_records(split: str, arrays: dict, outside: int) -> dict:
    n = len(arrays["tokens"])
    done = {}
    for b, start in enumerate(range(0, n, SHARD_SIZE)):
        sums = {k: hashlib.sha256(memoryview(np.ascontiguousarray(v[start:start + SHARD_SIZE]))).hexdigest()
                for k, v in arrays.items()}
        done[(split, b)] = {"block": b, "sha256": sums, "outside": outside if b == 0 else 0}
    return done


def write_dataset(trajectories: list[Trajectory], out: str | Path, *, val: int = 0, steps: int | None = None,
                  source: dict | None = None) -> Path:
    """Write ``trajectories`` as the dataset directory ``out`` (module docstring): split ``train``, and the last
    ``val`` systems as split ``val``; ``steps`` states per system (default: the fewest any system has); ``source``:
    what the manifest records of where they came from. Returns ``out``."""
    out = Path(out)
    if out.exists():
        raise ValueError(f"{out} exists; choose another directory or remove it")
    if not trajectories:
        raise ValueError("no systems to import")
    if not 0 <= val < len(trajectories):
        raise ValueError(f"--val {val} must leave at least one of the {len(trajectories)} systems for training")
    fewest = min(t.positions.shape[0] for t in trajectories)
    steps = fewest if steps is None else steps
    if not 2 <= steps <= fewest:
        raise ValueError(f"steps {steps} must be between 2 and {fewest}, the fewest states a system has")
    for t in trajectories:
        if not np.isfinite(t.positions).all() or (t.velocities is not None and not np.isfinite(t.velocities).all()):
            raise ValueError(f"{t.name}: its states have NaN or infinite values")
    planets = [t.positions.shape[1] - 1 for t in trajectories]
    P = max(planets)
    seq_len = 1 + steps * (P + 1)
    spec = TokenizerSpec()
    known = [bool(np.isfinite(t.masses).all()) for t in trajectories]
    params = {"seq_len": seq_len, "steps": steps, "planets": [min(planets), P],
              "source": source or {"kind": "trajectories", "files": []},
              "derived": {"masses_known": f"{sum(known)} of {len(known)} systems",
                          "velocities": "given" if all(t.velocities is not None for t in trajectories)
                          else "central differences of the positions where not given",
                          "G": sorted({t.G for t in trajectories})}}
    groups = {"train": trajectories[:len(trajectories) - val], **({"val": trajectories[-val:]} if val else {})}
    splits = {name: len(group) for name, group in groups.items()}
    check_split_names(splits)
    config = dataset_config(IMPORTED, params, spec, 0, splits)
    digest = config_hash(config)
    with staged_directory(out) as stage:
        done = {}
        for name, group in groups.items():
            arrays, outside = _arrays(group, steps, P, seq_len, spec)
            (stage / name).mkdir()
            for field, arr in arrays.items():
                with atomic_path(stage / name / f"{field}.npy") as tmp:
                    np.save(tmp, arr)
            done.update(_block_records(name, arrays, outside))
        manifest = build_manifest(config, digest, done)
        write_checked_manifest(stage, manifest)
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def import_trajectories(source, out: str | Path, *, time_step: str = "six-months", steps: int | None = None,
                        val: int = 0, progress: bool = False) -> Path:
    """Write the systems of ``source`` as a dataset directory ``out``: a ``rebound.Simulation`` or a list of them
    (integrated for ``steps`` steps of ``time_step``, 100 if not given), SimulationArchive paths (a path or a
    list), or a CSV/Parquet table path (module docstring). The last ``val`` systems form split ``val``."""
    if time_step not in TIME_STEP_NAMES:
        raise ValueError(f"time step must be one of {', '.join(TIME_STEP_NAMES)}, got {time_step!r}")
    items = source if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise ValueError("no systems to import")
    paths = [Path(x) for x in items if isinstance(x, (str, Path))]
    if paths and len(paths) != len(items):
        raise ValueError("give simulations or files, not both")
    from tqdm import tqdm

    if not paths:
        trajs = [from_simulation(s, steps or 100, time_step, name=f"simulation {i}")
                 for i, s in enumerate(tqdm(items, desc="import", disable=not progress))]
        record = {"kind": "rebound-simulation", "files": [], "time_step": time_step}
    else:
        for p in paths:
            if not p.is_file():
                raise ValueError(f"{p}: no such file")
        tables = [p for p in paths if p.suffix.lower() in (".csv", ".parquet", ".pq")]
        if tables and len(tables) != len(paths):
            raise ValueError("give tables (.csv, .parquet) or REBOUND archives, not both")
        if tables:
            trajs = [t for p in tables for t in from_table(p)]
            kind = "table"
        else:
            trajs = [from_archive(p, time_step, steps) for p in tqdm(paths, desc="import", disable=not progress)]
            kind = "rebound-archive"
        record = {"kind": kind, "files": [{"name": p.name, "sha256": _sha256(p)} for p in paths],
                  **({"time_step": time_step} if kind == "rebound-archive" else {})}
    return write_dataset(trajs, out, val=val, steps=steps, source=record)
