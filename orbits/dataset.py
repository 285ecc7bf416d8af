"""Datasets on disk: sharded, resumable, atomic generation and a memory-mapped loader.

Layout of a dataset directory::

    DIR/manifest.json          format version, preset, generator parameters, seed, tokenizer, splits
    DIR/<split>/tokens.npy     (n, seq_len, 2) uint16, memory-mappable
    DIR/<split>/<field>.npy    per-sequence physics in float64 (see ``fields``)

Sequence ``i`` of a split depends only on (seed, split, i): sequences are generated in fixed blocks of
``SHARD_SIZE``, block ``b`` from a random stream keyed by (seed, split, b), so neither the number of
workers nor the order in which blocks finish changes a byte. A run writes into a staging directory
``.DIR.partial`` beside ``DIR``, records each finished block (after flushing it) in ``done.jsonl``, and
renames the staging directory to ``DIR`` only when every block is written and the manifest is in place:
a killed run re-run with the same command resumes and ends with the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import re
import shutil
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from orbitlaw.orbits import forcelaw, generate, nbody, presets
from orbitlaw.provenance import (
    OutputLock,
    code_version,
    dependency_versions,
    inside,
    naming,
    write_json_atomic,
)
from orbitlaw.orbits.systems import SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.orbits.workers import die_with_parent

FORMAT_VERSION = 1
SHARD_SIZE = 1024
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ----------------------------------------------------------------------------------------------------
# What a split holds


def fields(preset: str, params: dict, spec: TokenizerSpec) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Field name -> (dtype, per-sequence shape) of every array stored for ``preset``."""
    P = presets.planet_slots(preset, params)
    out = {
        "tokens": ("uint16", (int(params["seq_len"]), 2)),
        "n_planets": ("int64", ()),
        "masses": ("float64", (P + 1,)),
        "a": ("float64", (P,)),
        "e": ("float64", (P,)),
        "omega": ("float64", (P,)),
        "mean_anomaly0": ("float64", (P,)),
        "com": ("float64", (2,)),
        "dt": ("float64", ()),
        "dt_index": ("int64", ()),
        "star_frozen": ("bool", ()),
        "star_position": ("float64", (2,)),
    }
    if presets.RECORDS[preset].stores_states:
        S = presets.max_steps(preset, params)
        out.update(times=("float64", (S,)), positions=("float64", (S, P + 1, 2)),
                   velocities=("float64", (S, P + 1, 2)), forces=("float64", (S, P + 1, 2)))
    return out


MAX_BLOCK_BYTES = 8 << 30
"""A block of SHARD_SIZE sequences is built in memory: larger than this is refused before anything runs."""


def _sequence_bytes(preset: str, params: dict, spec: TokenizerSpec) -> int:
    """Bytes one sequence takes in the dataset's files (every field of :func:`fields`)."""
    return sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
               for dtype, shape in fields(preset, params, spec).values())


def _check_block_size(preset: str, params: dict, spec: TokenizerSpec) -> None:
    per_sequence = _sequence_bytes(preset, params, spec)
    if per_sequence * SHARD_SIZE > MAX_BLOCK_BYTES:
        block = per_sequence * SHARD_SIZE / 2**30
        raise ValueError(f"sequences of seq_len {params['seq_len']} and {params.get('steps')} steps need "
                         f"{per_sequence / 2**20:.0f} MiB each, {block:.0f} GiB per block of {SHARD_SIZE}: too "
                         f"large (at most {MAX_BLOCK_BYTES >> 30} GiB); lower seq_len or steps")


def split_key(split: str) -> int:
    """A stable 32-bit integer naming a split in the random-stream key."""
    return int.from_bytes(hashlib.sha256(split.encode()).digest()[:4], "little")


def build_block(preset: str, params: dict, spec: TokenizerSpec, seed: int, split: str, block: int,
                count: int) -> tuple[dict[str, np.ndarray], int]:
    """Arrays for sequences ``block * SHARD_SIZE`` .. ``+ count`` of ``split``, and the number of
    coordinates that fell outside the tokeniser range."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, split_key(split), block])))
    record = presets.RECORDS[preset]
    # Always draw a whole block and keep the first `count`, so that a sequence never depends on how
    # many sequences the split has.
    batch = record.sample(rng, SHARD_SIZE, params, first_index=block * SHARD_SIZE)
    batch = batch.subset(slice(0, count))  # validated by whichever engine computes it
    seq_len = int(params["seq_len"])
    arrays = batch.arrays()
    if record.stores_states:
        steps = presets.max_steps(preset, params)
        per_seq = np.minimum(presets.steps_in_sequence(batch.n_planets, seq_len), steps)
        law = params.get("force_law")
        if not forcelaw.is_newton(law):  # another world's gravity (orbits.forcelaw): integrated, not Kepler
            pos, vel = forcelaw.integrate(batch, steps, law)
        elif record.interacting(params):
            pos, vel = nbody.integrate(batch, per_seq)
            pos, vel = _pad_steps(pos, steps), _pad_steps(vel, steps)
        else:
            pos, vel = generate.analytic_states(batch, steps)
        xy = generate.token_order(pos, batch.n_planets, seq_len)
        forces = (generate.gravitational_forces(pos, batch.masses) if forcelaw.is_newton(law)
                  else forcelaw.pair_forces(pos, batch.masses, law))
        arrays.update(times=np.arange(steps)[None, :] * batch.dt[:, None], positions=pos, velocities=vel,
                      forces=forces)
        arrays["tokens"], outside = generate.tokenize(xy, batch.dt_index, spec)
    else:
        arrays["tokens"], outside = generate.analytic_tokens(batch, seq_len, int(params["steps"]), spec)
    return arrays, outside


def _pad_steps(a: np.ndarray, steps: int) -> np.ndarray:
    if a.shape[1] == steps:
        return a
    out = np.full((a.shape[0], steps) + a.shape[2:], np.nan)
    out[:, : a.shape[1]] = a
    return out


# ----------------------------------------------------------------------------------------------------
# Writing


def parse_splits(text: str) -> dict[str, int]:
    """``"train=1000,val=100"`` -> {"train": 1000, "val": 100}; ValueError on anything malformed."""
    splits: dict[str, int] = {}
    for part in text.split(","):
        name, sep, count = part.strip().partition("=")
        if not sep or not _SPLIT_NAME.match(name):
            raise ValueError(f"malformed --splits entry {part!r}: expected NAME=N, e.g. train=1000,val=100")
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"malformed --splits entry {part!r}: N must be an integer") from None
        if n <= 0:
            raise ValueError(f"split {name!r} has N = {n}; N must be > 0")
        if name in splits:
            raise ValueError(f"split {name!r} given twice")
        splits[name] = n
    check_split_names(splits)
    return splits


RESERVED_NAMES = ("manifest.json", "config.json", "done.jsonl")
"""Files at a dataset's top level (or in its staging directory): no split may take their name."""


def check_split_names(splits: dict) -> None:
    for name in splits:
        if not isinstance(name, str) or not _SPLIT_NAME.match(name) or name in RESERVED_NAMES:
            raise ValueError(f"split name {name!r} is not allowed: use letters, digits, '_', '-' and '.', and "
                             f"none of {', '.join(RESERVED_NAMES)}")


def _config(preset, params, spec, seed, splits) -> dict:
    return {"format_version": FORMAT_VERSION, "preset": preset, "params": params, "seed": int(seed),
            "splits": dict(splits), "tokenizer": spec.to_dict(), "shard_size": SHARD_SIZE}


def _config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def _check_disk(out: Path, preset: str, params: dict, spec: TokenizerSpec, splits: dict[str, int]) -> None:
    """Refuse splits whose files cannot fit on the disk that will hold ``out`` (an OSError, as a full disk is: one
    line naming the split and the sizes), before anything is written (the files are allocated at full size up
    front)."""
    need = _sequence_bytes(preset, params, spec) * sum(splits.values())
    where = Path(out).absolute().parent
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    if need > free:
        name = max(splits, key=splits.get)
        raise OSError(f"No space left for --splits {name}={splits[name]}: the dataset needs {_bytes_text(need)}, "
                      f"{where} has {_bytes_text(free)} free; lower the split sizes or choose an --out with more space")


def _bytes_text(n: int) -> str:
    """``n`` bytes as a short text: '3.2 GiB', '98 TiB'."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024


def _blocks(splits: dict[str, int]):
    for split, n in splits.items():
        for block in range(-(-n // SHARD_SIZE)):
            yield split, block, min(SHARD_SIZE, n - block * SHARD_SIZE)


def _allocate(stage: Path, config: dict, dest: Path | None = None) -> None:
    """Create every output file at full size up front, so a full disk fails now, not mid-run; a full disk is
    reported naming the file as it will be called in ``dest`` (the dataset directory)."""
    spec = TokenizerSpec.from_dict(config["tokenizer"])
    schema = fields(config["preset"], config["params"], spec)
    for split, n in config["splits"].items():
        (stage / split).mkdir(parents=True, exist_ok=True)
        for name, (dtype, shape) in schema.items():
            path = stage / split / f"{name}.npy"
            mm = open_memmap(path, mode="w+", dtype=np.dtype(dtype), shape=(n, *shape))
            size = path.stat().st_size
            del mm
            fd = os.open(path, os.O_RDWR)
            try:
                with naming(Path(dest) / split / path.name if dest else path):  # the OS names no file
                    os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)


def _npy_layouts(stage: Path, config: dict) -> dict[str, dict[str, tuple[tuple[int, ...], np.dtype, int]]]:
    """Shape, dtype and data offset (bytes) of every preallocated .npy file, per split and field, read from
    the headers once (numpy parses a header with ``ast``: too slow to repeat for every block)."""
    schema = fields(config["preset"], config["params"], TokenizerSpec.from_dict(config["tokenizer"]))
    layouts = {}
    for split in config["splits"]:
        layouts[split] = {}
        for name in schema:
            with open(stage / split / f"{name}.npy", "rb") as f:
                version = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read(f)
                layouts[split][name] = (shape, dtype, f.tell())
    return layouts


def _write_block(task) -> dict:
    """Worker: build one block, write it at its offset in the preallocated files, return its digests.

    The bytes reach the page cache before the block is recorded as done, so they survive a killed
    process; ``simulate`` fsyncs every file once at the end, before the manifest is written.
    """
    stage, config, layout, split, block, count = task
    spec = TokenizerSpec.from_dict(config["tokenizer"])
    arrays, outside = build_block(config["preset"], config["params"], spec, config["seed"], split, block,
                                  count)
    digests = {}
    for name, values in arrays.items():
        path = Path(stage) / split / f"{name}.npy"
        shape, dtype, start = layout[name]
        values = np.ascontiguousarray(values, dtype=dtype)
        data = memoryview(values).cast("B")  # the array's bytes, without a copy
        offset = start + block * SHARD_SIZE * dtype.itemsize * math.prod(shape[1:])
        fd = os.open(path, os.O_RDWR)
        try:
            if os.pwrite(fd, data, offset) != len(data):
                raise OSError(f"short write to {path}")
            # Start writing these pages to disk now, in the background (and let the kernel drop them
            # once clean), so the final fsync has little left to wait for and the page cache does
            # not fill with the whole dataset.
            os.posix_fadvise(fd, offset, len(data), os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        digests[name] = hashlib.sha256(data).hexdigest()
    return {"split": split, "block": block, "count": count, "outside": outside, "sha256": digests}


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*.npy")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _read_done(path: Path) -> dict[tuple[str, int], dict]:
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill: that block is simply redone
            done[(rec["split"], rec["block"])] = rec
    return done


def simulate(preset: str, splits: dict[str, int] | str, seed: int, out: str | Path, workers: int = 1,
             overrides: dict | None = None, progress: bool = True) -> Path:
    """Generate a dataset into ``out`` (see the module docstring); returns its path.

    Re-running with the same arguments after a kill resumes; re-running after completion is a no-op.
    Refuses (ValueError) to touch an existing different dataset or a non-dataset directory.
    """
    if isinstance(splits, str):
        splits = parse_splits(splits)
    if not splits:
        raise ValueError("no splits given")
    check_split_names(splits)
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    params = presets.preset_params(preset, overrides)
    spec = TokenizerSpec()
    _check_block_size(preset, params, spec)
    config = _config(preset, params, spec, seed, splits)
    digest = _config_hash(config)
    out = Path(out)
    if out.name in ("", ".", ".."):  # "." or "dir/..": name the directory itself
        out = out.resolve()
    if (out / "manifest.json").exists():
        existing = json.loads((out / "manifest.json").read_text())
        if existing.get("config_hash") == digest:
            return out
        raise ValueError(f"{out} holds a different dataset (preset {existing.get('preset')}, seed "
                         f"{existing.get('seed')}, splits {existing.get('splits')}); refusing to overwrite "
                         "it")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an orbitlaw dataset; refusing to overwrite it")
    with OutputLock.beside(out, f"dataset {out}"):
        return _simulate_locked(preset, splits, seed, out, workers, params, spec, config, digest, progress)


def _simulate_locked(preset, splits, seed, out: Path, workers, params, spec, config, digest, progress) -> Path:
    if (out / "manifest.json").exists():  # another process finished it while this one waited to start
        return out
    stage = out.parent / f".{out.name}.partial"
    config_path = stage / "config.json"
    staged_manifest = stage / "manifest.json"
    if staged_manifest.exists() and json.loads(staged_manifest.read_text()).get("config_hash") == digest:
        return _publish(stage, out)  # killed after finishing, before the final rename
    if stage.exists() and config_path.exists():
        staged = json.loads(config_path.read_text())
        if _config_hash(staged) != digest:
            raise ValueError(f"{stage} holds an unfinished run of a different dataset; remove it or re-run "
                             "that command to finish it")
    else:
        if stage.exists():
            shutil.rmtree(stage)  # killed before its config was written: nothing to keep
        _check_disk(out, preset, params, spec, splits)
        # Generate a couple of sequences first, so that a bad parameter fails now, before any file exists.
        first = next(iter(splits))
        build_block(preset, params, spec, int(seed), first, 0, min(2, splits[first]))
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_stage = out.parent / f".{out.name}.partial.new"
        shutil.rmtree(tmp_stage, ignore_errors=True)
        tmp_stage.mkdir()
        try:
            _allocate(tmp_stage, config, out)
            write_json_atomic(tmp_stage / "config.json", config)
        except BaseException:
            shutil.rmtree(tmp_stage, ignore_errors=True)
            raise
        os.replace(tmp_stage, stage)

    done_path = stage / "done.jsonl"
    done = _read_done(done_path)
    layouts = _npy_layouts(stage, config)
    todo = [(str(stage), config, layouts[s], s, b, c) for s, b, c in _blocks(splits) if (s, b) not in done]
    total = sum(splits.values())
    _run_blocks(todo, done, done_path, workers, total, progress, preset)

    _fsync_tree(stage)
    manifest = _manifest(config, digest, done, spec, params, preset)
    write_json_atomic(stage / "manifest.json", manifest)
    return _publish(stage, out)


def _publish(stage: Path, out: Path) -> Path:
    """Drop the staging bookkeeping and move the finished dataset into place."""
    for name in ("config.json", "done.jsonl"):
        (stage / name).unlink(missing_ok=True)
    if out.exists():
        out.rmdir()
    os.replace(stage, out)
    return out


def _run_blocks(todo, done, done_path, workers, total, progress, preset) -> None:
    from tqdm import tqdm

    bar = tqdm(total=total, initial=sum(r["count"] for r in done.values()), unit="seq", unit_scale=True,
               desc=f"simulate {preset}", disable=not progress, smoothing=0.1)
    with open(done_path, "a") as log:
        def record(rec):
            log.write(json.dumps(rec, sort_keys=True) + "\n")
            log.flush()
            done[(rec["split"], rec["block"])] = rec
            bar.update(rec["count"])

        if workers == 1 or len(todo) <= 1:
            for task in todo:
                record(_write_block(task))
        else:
            ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(min(workers, len(todo)), mp_context=ctx, initializer=die_with_parent,
                                       initargs=(os.getpid(),))
            try:
                for future in as_completed([pool.submit(_write_block, task) for task in todo]):
                    record(future.result())
            except BrokenProcessPool:
                raise RuntimeError("a worker process died (killed, or out of memory); the finished blocks "
                                   "are kept: re-run the same command to resume") from None
            finally:  # on an error or Ctrl-C, do not wait for the queued blocks
                pool.shutdown(wait=True, cancel_futures=True)
    bar.close()


def _manifest(config, digest, done, spec, params, preset) -> dict:
    schema = fields(preset, params, spec)
    split_info = {}
    for split, n in config["splits"].items():
        recs = sorted((r for (s, _), r in done.items() if s == split), key=lambda r: r["block"])
        files = {}
        for name, (dtype, shape) in schema.items():
            joined = "".join(r["sha256"][name] for r in recs)
            files[name] = {"file": f"{split}/{name}.npy", "dtype": dtype, "shape": [n, *shape],
                           "sha256_of_blocks": hashlib.sha256(joined.encode()).hexdigest()}
        outside = int(sum(r["outside"] for r in recs))
        split_info[split] = {"count": n, "outside_range": outside, "files": files}
    return {
        **config,
        "config_hash": digest,
        "code_version": code_version(),
        "dependency_versions": dependency_versions(),
        "units": {"length": "AU", "time": "yr", "mass": "M_sun", "velocity": "AU/yr",
                  "force": "M_sun AU/yr^2", "G": presets.G},
        "body_order": "planets 1..N, then the star (last body slot); absent planets are NaN",
        "checksum": "per file: sha256 of the concatenated hex sha256 digests of its blocks of shard_size "
                    "sequences, in order",
        "split_info": split_info,
    }


# ----------------------------------------------------------------------------------------------------
# Reading


ARRAY_FIELDS = ("tokens", "n_planets", "masses", "a", "e", "omega", "mean_anomaly0", "com", "dt", "dt_index",
                "star_frozen", "star_position", "times", "positions", "velocities", "forces")
"""Every array a split may store (see ``fields``); the last four only for presets that store states."""

OPTIONAL_FIELDS = ("times", "positions", "velocities", "forces")

_CONFIG_KEYS = ("format_version", "preset", "params", "seed", "splits", "tokenizer", "shard_size")
"""The manifest keys its ``config_hash`` covers (``_config``)."""

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Split:
    """One split of a dataset, arrays memory-mapped read-only. Fields not stored for a preset are None.

    tokens: (n, seq_len, 2) uint16. positions, velocities: (n, steps, bodies, 2) AU and AU/yr.
    forces: (n, steps, bodies, 2) net gravitational force, M_sun AU/yr^2. masses: (n, bodies) M_sun.
    times: (n, steps) yr. Body order: planets, then the star. Orbital elements: a, e, omega,
    mean_anomaly0 (n, planets); n_planets, dt (yr), dt_index, com, star_frozen, star_position (n, ...).

    Each array's file is opened the first time the attribute is read, and (unless the dataset was opened
    with ``verify=False``) checked against the manifest's checksum then: a caller pays for hashing only the
    files it reads, and never computes on a damaged one (one-line ValueError naming the file).
    """

    tokens: np.ndarray
    n_planets: np.ndarray
    masses: np.ndarray
    a: np.ndarray
    e: np.ndarray
    omega: np.ndarray
    mean_anomaly0: np.ndarray
    com: np.ndarray
    dt: np.ndarray
    dt_index: np.ndarray
    star_frozen: np.ndarray
    star_position: np.ndarray
    times: np.ndarray | None
    positions: np.ndarray | None
    velocities: np.ndarray | None
    forces: np.ndarray | None

    def __init__(self, name: str, manifest: dict, root: Path, verify: bool = True):
        self.name = name
        self.manifest = manifest
        self._root = root
        self._verify = verify

    def __getattr__(self, field: str):
        """Open ``field``'s file on first read (Python calls this only while the attribute is unset)."""
        if field not in ARRAY_FIELDS or "_root" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {field!r}")
        meta = self.manifest["split_info"][self.name]["files"].get(field)
        arr = None if meta is None else _open_file(self._root, meta, self.manifest["shard_size"], self._verify)
        self.__dict__[field] = arr
        return arr

    def __repr__(self) -> str:
        return f"Split({self.name!r}, {len(self)} sequences of {self._root})"

    def __len__(self) -> int:
        return int(self.manifest["split_info"][self.name]["count"])  # equal to every file's first dimension

    def open_all(self) -> None:
        """Open (and check, unless opened with ``verify=False``) every file of the split now."""
        for field in ARRAY_FIELDS:
            getattr(self, field)

    @property
    def tokenizer(self) -> TokenizerSpec:
        return TokenizerSpec.from_dict(self.manifest["tokenizer"])

    def systems(self, rows=slice(None)) -> SystemBatch:
        """The initial conditions of the selected sequences, as the generator drew them."""
        return SystemBatch(**{name: np.asarray(getattr(self, name)[rows]) for name in SystemBatch.__dataclass_fields__})

    def continuous(self, rows=slice(None)) -> np.ndarray:
        """The continuous representation for regression models: (n, seq_len - 1, 2) float64 body
        positions in AU in token order (per step planets 1..N, then the star; NaN where a sequence
        pads), exact rather than binned. Stored positions are reordered; for presets that keep only
        orbital elements (vafa2025) the Kepler orbits are recomputed bit for bit."""
        if isinstance(rows, (int, np.integer)):  # one sequence: (seq_len - 1, 2)
            return self.continuous(slice(int(rows), int(rows) + 1 or None))[0]
        seq_len = int(self.manifest["params"]["seq_len"])
        if self.positions is not None:
            return generate.token_order(np.asarray(self.positions[rows]), np.asarray(self.n_planets[rows]), seq_len)
        batch = self.systems(rows)
        return generate.token_order(generate.analytic_states(batch, int(self.manifest["params"]["steps"]))[0],
                                    batch.n_planets, seq_len)


def load_dataset(path: str | Path, verify: bool | str = "on-read") -> dict[str, Split]:
    """Open a dataset directory: {split name: Split}, arrays memory-mapped read-only.

    ``verify``: ``"on-read"`` (the default) checks each file against the manifest's checksum the first time
    its array is read (``Split``), so a command hashes exactly the files it uses, once, at about 1.5 GB/s:
    the 81 MB of tokens a ``cpu``-size train start reads (two-body, 20,000 + 256 sequences) hash in about
    50 ms, where hashing every file at open (1 GB with the stored states, which token training never
    reads) took 640 ms. ``True`` checks every file now (``orbitlaw verify``). ``False`` skips the checksums
    (shapes and dtypes are still checked): only for a caller that has just verified the dataset.

    Raises a one-line ValueError naming the file for a missing, unreadable or malformed manifest
    (:func:`check_manifest`), a file that leads outside the dataset (a link or '..'), and a file whose
    size, dtype, shape or checksum does not match the manifest (truncated or corrupted).
    """
    if verify not in (True, False, "on-read"):
        raise ValueError(f"verify must be True, False or 'on-read', got {verify!r}")
    path = Path(path)
    manifest_path = inside(path, path / "manifest.json", "dataset")
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except FileNotFoundError:
        raise ValueError(f"{path} is not an orbitlaw dataset (no manifest.json)") from None
    except IsADirectoryError:
        raise ValueError(f"{path}/manifest.json is a directory, not a manifest") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}/manifest.json is corrupted: not UTF-8 text") from None
    except json.JSONDecodeError as exc:  # its message gives the position, never the text
        raise ValueError(f"{path}/manifest.json is corrupted: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path}/manifest.json is corrupted: nested too deeply to be a manifest") from None
    check_manifest(manifest, path)
    splits = {name: Split(name, manifest, path, verify=bool(verify)) for name in manifest["split_info"]}
    if verify is True:
        for split in splits.values():
            split.open_all()
    return splits


def check_manifest(manifest, path: Path) -> None:
    """One-line ValueError (``PATH/manifest.json is corrupted: ...``) unless ``manifest`` is a dataset's
    manifest: every key a reader needs, with the right types (the schema below); a ``config_hash`` that is
    the digest of its preset, params, seed, splits, tokenizer and shard size (so none of them was edited);
    one ``split_info`` entry per split, each file entry a known field whose shape starts with the split's
    count and whose recorded path stays inside the dataset directory ``path`` (no absolute path, no '..' out
    of it; a link out of it is refused when the file is opened).

    Schema: format_version 1; config_hash, preset: str; seed, shard_size: int; params, tokenizer: object;
    splits: {name: int > 0}; split_info: {split: {count: int, files: {field: {file: str, dtype: str,
    shape: [int, ...], sha256_of_blocks: 64 hex digits}}}}.
    """
    where = f"{path}/manifest.json"

    def bad(why: str) -> ValueError:
        return ValueError(f"{where} is corrupted: {why}")

    if not isinstance(manifest, dict):
        raise bad(f"it holds a JSON {_json_type(manifest)}, not an object")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: dataset format {str(manifest.get('format_version'))[:20]} is not supported "
                         f"(this orbitlaw reads format {FORMAT_VERSION})")
    schema = {"config_hash": str, "preset": str, "seed": int, "params": dict, "splits": dict, "tokenizer": dict,
              "shard_size": int, "split_info": dict}
    for key, kind in schema.items():
        if key not in manifest:
            raise bad(f"it has no {key!r}")
        if not _is(manifest[key], kind):
            raise bad(f"{key!r} is a JSON {_json_type(manifest[key])}, not {_json_name(kind)}")
    if manifest["shard_size"] < 1:
        raise bad(f"shard_size {manifest['shard_size']} is not >= 1")
    for name, n in manifest["splits"].items():
        if not _SPLIT_NAME.match(name) or name in RESERVED_NAMES or not _is(n, int) or n < 1:
            raise bad(f"'splits' entry {name[:40]!r} is not a split name with a count >= 1")
    try:
        TokenizerSpec.from_dict(manifest["tokenizer"])
    except (KeyError, TypeError, ValueError):
        raise bad("'tokenizer' lacks num_bins, lo, hi or time_steps, or holds a value of the wrong type") from None
    if manifest["config_hash"] != _config_hash({k: manifest[k] for k in _CONFIG_KEYS}):
        raise bad("its config_hash is not the digest of its preset, params, seed, splits and tokenizer (one of "
                  "them was changed)")
    if list(manifest["split_info"]) != list(manifest["splits"]):
        raise bad(f"'split_info' describes splits {list(manifest['split_info'])[:8]}, 'splits' "
                  f"{list(manifest['splits'])}")
    for split, info in manifest["split_info"].items():
        _check_split_info(split, info, manifest["splits"][split], path, bad)


def _check_split_info(split: str, info, count: int, path: Path, bad) -> None:
    """The schema of one ``split_info`` entry (see :func:`check_manifest`); ``bad(why)`` makes the error."""
    if not _is(info, dict) or not _is(info.get("files"), dict) or info.get("count") != count:
        raise bad(f"split_info[{split!r}] needs 'count' equal to splits[{split!r}] and an object 'files'")
    files = info["files"]
    missing = [f for f in ARRAY_FIELDS if f not in OPTIONAL_FIELDS and f not in files]
    unknown = [f for f in files if f not in ARRAY_FIELDS]
    if missing or unknown:
        raise bad(f"split_info[{split!r}] files: missing {missing}, unknown {[f[:40] for f in unknown[:4]]}")
    for field, meta in files.items():
        entry = f"split_info[{split!r}] file {field!r}"
        if not _file_entry_typed(meta):
            raise bad(f"{entry} needs 'file', 'dtype', 'shape' (non-negative integers) and a sha256 "
                      "'sha256_of_blocks'")
        if meta["shape"][0] != count:
            raise bad(f"{entry} has {meta['shape'][0]} sequences, the split {count}")
        try:
            np.dtype(meta["dtype"])
        except (TypeError, ValueError):
            raise bad(f"{entry} has an unknown dtype {meta['dtype'][:40]!r}") from None
        name = os.path.normpath(meta["file"])  # links are resolved when the file is opened (_open_file)
        if os.path.isabs(name) or name.split(os.sep)[0] in ("..", ".") or "\0" in name:
            raise bad(f"{entry} leads outside the dataset directory (an absolute path or '..')")


def _file_entry_typed(meta) -> bool:
    """Whether a ``files`` entry has its four keys with the right JSON types."""
    return (_is(meta, dict) and _is(meta.get("file"), str) and _is(meta.get("dtype"), str)
            and _is(meta.get("shape"), list) and bool(meta["shape"])
            and all(_is(d, int) and d >= 0 for d in meta["shape"])
            and _is(meta.get("sha256_of_blocks"), str) and bool(_HEX64.match(meta["sha256_of_blocks"])))


def _is(value, kind: type) -> bool:
    """``isinstance`` for JSON values, where a boolean is not an integer."""
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _json_type(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _json_name(kind: type) -> str:
    return {dict: "an object", str: "a string", int: "an integer"}[kind]


def _open_file(root: Path, meta: dict, shard_size: int, verify: bool) -> np.ndarray:
    """Memory-map one file of a dataset read-only, after checking that it stays inside ``root``, and that
    its shape and dtype (and with ``verify`` its checksum: sha256 of its blocks of ``shard_size``
    sequences, as written) match the manifest entry ``meta``."""
    file = root / meta["file"]
    real = inside(root, file, "dataset")
    try:
        arr = np.load(real, mmap_mode="r")  # never unpickles (allow_pickle is False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{file} is missing or corrupted: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(arr, np.memmap) or list(arr.shape) != meta["shape"] or arr.dtype != np.dtype(meta["dtype"]):
        raise ValueError(f"{file} is corrupted: shape {getattr(arr, 'shape', '?')} {getattr(arr, 'dtype', '')}, "
                         f"manifest says {tuple(meta['shape'])} {meta['dtype']}")
    if verify and _file_digest(arr, shard_size) != meta["sha256_of_blocks"]:
        raise ValueError(f"{file} is corrupted: checksum mismatch (it differs from what was written; re-run the "
                         "simulate command that made the dataset to regenerate it)")
    return arr


def _file_digest(arr: np.ndarray, shard_size: int) -> str:
    """sha256 of the concatenated hex sha256 digests of ``arr``'s blocks of ``shard_size`` sequences: the
    manifest's ``sha256_of_blocks``. Hashes the memory map in place (no copy), about 1 GB/s."""
    blocks = [hashlib.sha256(memoryview(np.ascontiguousarray(arr[i:i + shard_size]))).hexdigest()
              for i in range(0, arr.shape[0], shard_size)]
    return hashlib.sha256("".join(blocks).encode()).hexdigest()
