"""``orbitlaw import``: bring a dataset in from outside (the module is not ``import.py``, a Python keyword)."""

from __future__ import annotations

from orbitlaw.commands._shared import command


def add_parser(sub) -> None:
    p = command(sub, "import", run, help="import a dataset exported as Parquet",
                description="Write a dataset directory that every command reads from a folder of Parquet files "
                "with its manifest (what `orbitlaw export --data` writes, or a Hugging Face dataset repo of it), "
                "every array checked against the manifest's checksum first.")
    p.add_argument("--parquet", required=True, metavar="DIR", help="the exported folder (manifest.json and "
                   "<split>.parquet)")
    p.add_argument("--out", required=True, metavar="DIR", help="the dataset directory to create")


def run(args) -> int:
    from orbitlaw.orbits.parquet import import_parquet

    print(import_parquet(args.parquet, args.out))
    return 0
