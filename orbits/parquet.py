"""A dataset as Parquet files, for Hugging Face ``datasets``, pandas, polars or DuckDB, and back, checksums kept.

    orbitlaw export --data data/two-body --out two-body.parquet      # DIR/<split>.parquet + DIR/manifest.json
    orbitlaw import --parquet two-body.parquet --out data/two-body   # the same dataset, every checksum checked

    import datasets
    ds = datasets.load_dataset("two-body.parquet")   # the dataset's own splits, one row per sequence

Layout of an exported folder::

    DIR/manifest.json       the dataset's manifest, unchanged (its per-file checksums included)
    DIR/README.md           a dataset card whose front matter names each split's file (for ``datasets``)
    DIR/<split>.parquet     one row per sequence: ``sequence`` (its index in the split) and one column per array
                            of the split (``tokens``, ``positions``, ``masses``, ...), each row that sequence's
                            array as nested fixed-size lists (positions[t][body][x, y], AU), in the array's
                            dtype; the manifest is also in each file's metadata (key ``orbitlaw.manifest``)

Units are the dataset's: AU, years, solar masses (the manifest's ``units``). Importing rebuilds each array from
its column and checks it against the manifest's checksum before the dataset appears (written under a staging
name and renamed), so a re-imported dataset is the exported one exactly: same arrays, same manifest, same
``config_hash``. Each split is held in memory while it is converted, twice over (its arrays and their Arrow
columns): the ``cpu`` study's 20,000 two-body sequences are 1.1 GB of arrays. ``pyarrow`` is needed
(``pip install 'orbitlaw[data]'``) and imported only here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from orbitlaw.errors import first_line
from orbitlaw.orbits.manifest import check_manifest, file_digest, read_manifest
from orbitlaw.orbits.reader import load_dataset, write_checked_manifest
from orbitlaw.provenance import atomic_path, staged_directory, write_text_atomic

MANIFEST_KEY = b"orbitlaw.manifest"


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ValueError("Parquet files need pyarrow: pip install 'orbitlaw[data]'") from None
    return pyarrow


def _column(pa, arr: np.ndarray):
    """(n, *shape) array -> a pyarrow column of n rows, each a nested fixed-size list of ``shape``."""
    flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
    for size in reversed(arr.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return flat


def _array(column, dtype: str, shape: list[int]) -> np.ndarray:
    """The inverse of :func:`_column`: the values of a (chunked) nested list column as an array of ``shape``."""
    chunks = []
    for chunk in column.chunks:
        values = chunk
        for _ in shape[1:]:
            values = values.flatten()
        chunks.append(values.to_numpy(zero_copy_only=False))
    flat = np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)
    return flat.astype(dtype, copy=False).reshape(shape)


def dataset_card(manifest: dict) -> str:
    """The exported folder's README.md: YAML front matter naming each split's file (``configs``), so that
    ``datasets.load_dataset(folder)`` keeps the dataset's own splits, and a few lines on what the columns are."""
    splits = list(manifest["split_info"])
    front = ["---", "configs:", "- config_name: default", "  data_files:",
             *[f"  - split: {name}\n    path: {name}.parquet" for name in splits], "tags:", "- orbitlaw",
             "- physics", "- orbital-mechanics", "---", ""]
    body = [f"# orbitlaw dataset: preset {manifest['preset']}, seed {manifest['seed']}", "",
            "One row per sequence: `sequence` (its index in the split) and one column per array, each row that "
            "sequence's array as nested lists (positions[t][body][x, y] in AU; velocities AU/yr; forces "
            "M_sun AU/yr^2; masses M_sun; bodies: planets, then the star). `manifest.json` holds the generator's "
            "settings and every array's checksum; `orbitlaw import --parquet` rebuilds the dataset from this "
            "folder and checks them.", "",
            "| split | sequences |", "|---|---|",
            *[f"| {name} | {manifest['split_info'][name]['count']} |" for name in splits],
            "", f"config_hash `{manifest['config_hash']}`, manifest_sha256 `{manifest.get('manifest_sha256')}`.", ""]
    return "\n".join(front + body)


def export_parquet(data: str | Path, out: str | Path) -> Path:
    """Write the dataset directory ``data`` as Parquet files in ``out`` (module docstring); every array is checked
    against its checksum as it is read. ``out`` is written under a staging name and renamed. Returns ``out``."""
    pa = _pyarrow()
    data, out = Path(data), Path(out)
    splits = load_dataset(data)  # checks each file on read
    manifest = next(iter(splits.values())).manifest
    text = json.dumps(manifest, sort_keys=True)
    if out.exists():
        raise ValueError(f"{out} exists; choose another directory or remove it")
    with staged_directory(out) as stage:
        for name, split in splits.items():
            files = manifest["split_info"][name]["files"]
            columns = {"sequence": pa.array(np.arange(len(split), dtype=np.int64))}
            columns.update({field: _column(pa, getattr(split, field)) for field in files})
            table = pa.table(columns).replace_schema_metadata({MANIFEST_KEY: text.encode()})
            with atomic_path(stage / f"{name}.parquet") as tmp:
                pa.parquet.write_table(table, tmp)
        write_text_atomic(stage / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        write_text_atomic(stage / "README.md", dataset_card(manifest))
    return out


def import_parquet(source: str | Path, out: str | Path) -> Path:
    """Write the exported folder ``source`` (``manifest.json`` and ``<split>.parquet``, e.g. a Hugging Face
    dataset repo downloaded as it was pushed) back as a dataset directory ``out`` that every command reads. Each
    array must match the manifest's dtype, shape and checksum, or nothing is written (one-line ValueError naming
    the split and array). Returns ``out``."""
    pa = _pyarrow()
    source, out = Path(source), Path(out)
    manifest = read_manifest(source)
    check_manifest(manifest, source)
    if out.exists():
        raise ValueError(f"{out} exists; choose another directory or remove it")
    with staged_directory(out) as stage:
        for name, info in manifest["split_info"].items():
            path = source / f"{name}.parquet"
            try:
                table = pa.parquet.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise ValueError(f"{path}: not a readable Parquet file ({first_line(exc)})") from None
            (stage / name).mkdir()
            for field, meta in info["files"].items():
                if field not in table.column_names:
                    raise ValueError(f"{path} has no column {field!r}, which the manifest lists")
                try:
                    arr = _array(table.column(field), meta["dtype"], meta["shape"])
                except (ValueError, AttributeError, pa.ArrowException) as exc:  # another shape, or not a list
                    raise ValueError(f"{path}: column {field!r} does not have the manifest's shape "
                                     f"{meta['shape']}: {first_line(exc)}") from None
                if file_digest(arr, manifest["shard_size"]) != meta["sha256_of_blocks"]:
                    raise ValueError(f"{path}: column {field!r} does not match the manifest's checksum (the file "
                                     "was changed after it was exported)")
                with atomic_path(stage / meta["file"]) as tmp:
                    np.save(tmp, arr)
        write_checked_manifest(stage, manifest)
    return out
