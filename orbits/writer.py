"""Writing a dataset: sharded, resumable and atomic, with worker processes.

Layout of a dataset directory::

    DIR/manifest.json          format version, preset, generator parameters, seed, tokenizer, splits
    DIR/<split>/tokens.npy     (n, seq_len, 2) uint16, memory-mappable
    DIR/<split>/<field>.npy    per-sequence physics in float64 (see ``blocks.fields``)

The blocks of :mod:`orbitlaw.orbits.blocks` are built by ``workers`` processes, each written at its offset in
files allocated at full size up front. A run writes into a staging directory ``.DIR.partial`` beside ``DIR``,
records each finished block (after flushing it) in ``done.jsonl``, and renames the staging directory to ``DIR``
only when every block is written and the manifest (:mod:`orbitlaw.orbits.manifest`) is in place: a killed run
re-run with the same command resumes and ends with the same bytes. A resumed run first checks every block it
keeps against the digest recorded when it was written, and redoes a block damaged while the run was stopped.

A finished dataset that fails its checksums (a flipped byte, a file cut short) is rebuilt by the same command
with ``repair=True`` (``simulate --repair``): it verifies every file, and only where one fails writes the whole
dataset again in the staging directory, the damaged copy left in place until the rebuilt one is finished, then
swaps them (a kill leaves one complete copy or the other, and a re-run finishes). Every sequence depends only on
the seed, split and index, so with the same code the rebuilt dataset is byte for byte the one first written; a
file that comes out otherwise (other code or library versions) is named in a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from numpy.lib.format import open_memmap

from orbitlaw.orbits import presets
from orbitlaw.orbits.blocks import SHARD_SIZE, blocks, build_block, check_block_size, fields, sequence_bytes
from orbitlaw.orbits.manifest import (
    build_manifest,
    check_split_names,
    config_hash,
    dataset_config,
    parse_splits,
    read_manifest,
)
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.orbits.workers import die_with_parent
from orbitlaw.provenance import OutputLock, naming, write_json_atomic
from orbitlaw.validate import at_least


def simulate(preset: str, splits: dict[str, int] | str, seed: int, out: str | Path, workers: int = 1,
             overrides: dict | None = None, progress: bool = True, repair: bool = False) -> Path:
    """Generate a dataset into ``out`` (see the module docstring); returns its path.

    Re-running with the same arguments after a kill resumes; re-running after completion is a no-op, or with
    ``repair`` verifies every file and rebuilds a dataset that fails its checksums.
    Refuses (ValueError) to touch an existing different dataset or a non-dataset directory.
    """
    if isinstance(splits, str):
        splits = parse_splits(splits)
    if not splits:
        raise ValueError("no splits given")
    check_split_names(splits)
    at_least(SimpleNamespace(workers=workers), 1, "workers")
    at_least(SimpleNamespace(seed=seed), 0, "seed")
    params = presets.preset_params(preset, overrides)
    spec = TokenizerSpec()
    check_block_size(preset, params)
    config = dataset_config(preset, params, spec, seed, splits)
    digest = config_hash(config)
    out = Path(out)
    if out.name in ("", ".", ".."):  # "." or "dir/..": name the directory itself
        out = out.resolve()
    if (out / "manifest.json").exists():
        try:
            existing = read_manifest(out)
            if not isinstance(existing, dict):
                raise ValueError
        except ValueError:  # a directory, not UTF-8, not JSON, or not an object
            raise ValueError(f"{out}/manifest.json is corrupted, so {out} cannot be told to be this dataset; remove "
                             "the directory and re-run the same command to write it again") from None
        if existing.get("config_hash") == digest:
            if not repair or intact(out):
                shutil.rmtree(_aside(out), ignore_errors=True)  # a copy a killed repair left, if any
                return out
            with OutputLock.beside(out, f"dataset {out}"):
                return _rebuild(preset, splits, seed, out, workers, params, spec, config, digest, progress, existing)
        raise ValueError(f"{out} holds a different dataset (preset {existing.get('preset')}, seed "
                         f"{existing.get('seed')}, splits {existing.get('splits')}); refusing to overwrite "
                         "it")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an orbitlaw dataset; refusing to overwrite it")
    with OutputLock.beside(out, f"dataset {out}"):
        return _simulate_locked(preset, splits, seed, out, workers, params, spec, config, digest, progress)


def intact(out: Path) -> bool:
    """Whether every file of the finished dataset ``out`` matches its manifest (shape, dtype and checksum)."""
    from orbitlaw.orbits.reader import load_dataset

    try:
        load_dataset(out, verify=True)
    except ValueError:
        return False
    return True


def _aside(out: Path) -> Path:
    """Where :func:`_rebuild` moves a damaged dataset while it swaps the rebuilt one in."""
    return out.parent / f".{out.name}.damaged"


def _rebuild(preset, splits, seed, out: Path, workers, params, spec, config, digest, progress, recorded: dict
             ) -> Path:
    """Write the dataset again in its staging directory while the damaged copy stays in place, then swap them:
    a kill before the swap leaves ``out`` as it was (a re-run resumes the rebuild), one during it leaves the
    staging directory finished (a re-run publishes it). ``recorded``: the damaged copy's manifest."""
    shutil.rmtree(_aside(out), ignore_errors=True)  # ``out`` holds a manifest, so any copy aside is stale
    stage = _build_staged(preset, splits, seed, out, workers, params, spec, config, digest, progress)
    _warn_if_different(stage, recorded, out)
    os.replace(out, _aside(out))
    return _publish(stage, out)


def _warn_if_different(stage: Path, recorded: dict, out: Path) -> None:
    """Warn where a rebuilt file's checksum differs from the one recorded when ``out`` was first written (the same
    settings, other code or library versions); only where that record is intact (its own ``manifest_sha256``)."""
    import warnings

    from orbitlaw.orbits.manifest import manifest_digest

    if recorded.get("manifest_sha256") != manifest_digest(recorded):
        return
    rebuilt = json.loads((stage / "manifest.json").read_text())
    for split, info in rebuilt["split_info"].items():
        for name, meta in info["files"].items():
            before = recorded.get("split_info", {}).get(split, {}).get("files", {}).get(name, {})
            if before.get("sha256_of_blocks") != meta["sha256_of_blocks"]:
                warnings.warn(f"the rebuilt {out}/{meta['file']} differs from the file first written (code "
                              f"{recorded.get('code_version')}, now {rebuilt.get('code_version')}): the same "
                              "settings under other code or library versions", stacklevel=4)


def _simulate_locked(preset, splits, seed, out: Path, workers, params, spec, config, digest, progress) -> Path:
    if (out / "manifest.json").exists():  # another process finished it while this one waited to start
        return out
    return _publish(_build_staged(preset, splits, seed, out, workers, params, spec, config, digest, progress), out)


POOL_MIN_SEQUENCES = 2 * SHARD_SIZE
"""Fewer Kepler sequences than this (two full blocks) are simulated in the calling process whatever ``workers``
says: a spawned worker takes about 1.5 s to start and import, more than a few hundred analytic sequences take
(0.3 s of 288 two-body sequences, against 1.7 s more with two workers). Interacting presets (REBOUND) always use
the pool. The bytes are the same either way."""


def _build_staged(preset, splits, seed, out: Path, workers, params, spec, config, digest, progress) -> Path:
    """Write (or resume) the dataset in its staging directory ``.OUT.partial`` beside ``out``, manifest last;
    returns the staging directory."""
    stage = out.parent / f".{out.name}.partial"
    config_path = stage / "config.json"
    staged_manifest = stage / "manifest.json"
    if staged_manifest.exists() and json.loads(staged_manifest.read_text()).get("config_hash") == digest:
        return stage  # killed after finishing, before the final rename
    if stage.exists() and config_path.exists():
        staged = json.loads(config_path.read_text())
        if config_hash(staged) != digest:
            raise ValueError(f"{stage} holds an unfinished run of a different dataset; remove it or re-run "
                             "that command to finish it")
    else:
        if stage.exists():
            shutil.rmtree(stage)  # killed before its config was written: nothing to keep
        _check_disk(out, preset, params, splits)
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
    layouts = _npy_layouts(stage, config)
    done = _still_written(stage, layouts, _read_done(done_path))
    todo = [(str(stage), config, layouts[s], s, b, c) for s, b, c in blocks(splits) if (s, b) not in done]
    total = sum(splits.values())
    if not presets.record(preset).interacting(params) and sum(t[-1] for t in todo) < POOL_MIN_SEQUENCES:
        workers = 1  # a few Kepler blocks: starting worker processes would take longer than simulating them
    _run_blocks(todo, done, done_path, workers, total, progress, preset)

    _fsync_tree(stage)
    manifest = build_manifest(config, digest, done)
    write_json_atomic(stage / "manifest.json", manifest)
    return stage


def _publish(stage: Path, out: Path) -> Path:
    """Drop the staging bookkeeping and move the finished dataset into place (and a damaged copy it replaces,
    :func:`_rebuild`'s, away)."""
    for name in ("config.json", "done.jsonl"):
        (stage / name).unlink(missing_ok=True)
    if out.exists():
        out.rmdir()
    os.replace(stage, out)
    shutil.rmtree(_aside(out), ignore_errors=True)
    return out


def _still_written(stage: Path, layouts: dict, done: dict[tuple[str, int], dict]) -> dict[tuple[str, int], dict]:
    """The records of ``done`` whose block still holds the bytes it was written with (the digests of
    :func:`_write_block`); a block changed while the run was stopped is left out, so it is written again."""
    kept = {}
    for (split, block), rec in done.items():
        for name, (shape, dtype, start) in layouts[split].items():
            size = dtype.itemsize * math.prod(shape[1:])
            with open(stage / split / f"{name}.npy", "rb") as f:
                f.seek(start + block * SHARD_SIZE * size)
                data = f.read(rec["count"] * size)
            if hashlib.sha256(data).hexdigest() != rec["sha256"].get(name):
                break
        else:
            kept[(split, block)] = rec
    return kept


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



def _check_disk(out: Path, preset: str, params: dict, splits: dict[str, int]) -> None:
    """Refuse splits whose files cannot fit on the disk that will hold ``out`` (an OSError, as a full disk is: one
    line naming the split and the sizes), before anything is written (the files are allocated at full size up
    front)."""
    need = sequence_bytes(preset, params) * sum(splits.values())
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



def _allocate(stage: Path, config: dict, dest: Path | None = None) -> None:
    """Create every output file at full size up front, so a full disk fails now, not mid-run; a full disk is
    reported naming the file as it will be called in ``dest`` (the dataset directory)."""
    schema = fields(config["preset"], config["params"])
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
    schema = fields(config["preset"], config["params"])
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

