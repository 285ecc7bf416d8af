"""``orbitlaw import``: bring trajectories or a dataset in from outside (the module is not ``import.py``, a Python
keyword)."""

from __future__ import annotations

from orbitlaw.commands._shared import add_quiet, command

TIME_STEPS = ("week", "six-months")  # orbitlaw.orbits.importer.TIME_STEP_NAMES, without importing numba here


def add_parser(sub) -> None:
    p = command(sub, "import", run, help="import REBOUND archives, a table of positions, or a Parquet export",
                description="Write a dataset directory that every command reads from trajectories made elsewhere "
                "(REBOUND SimulationArchive files, or a CSV/Parquet table with columns system, t, body, x, y and "
                "optionally mass, vx, vy; AU, yr, M_sun; force labels where the masses are known), or from a "
                "folder that `orbitlaw export --data` wrote.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--rebound", nargs="+", metavar="FILE.bin", help="REBOUND SimulationArchive files, one system "
                     "each, sampled every --time-step from first snapshot to last")
    src.add_argument("--table", metavar="FILE", help="a .csv or .parquet table, one row per body per time")
    src.add_argument("--parquet", metavar="DIR", help="an exported folder (manifest.json and <split>.parquet)")
    p.add_argument("--out", required=True, metavar="DIR", help="the dataset directory to create")
    p.add_argument("--time-step", choices=TIME_STEPS, default="six-months",
                   help="with --rebound: the tokeniser's time step to sample at (default six-months)")
    p.add_argument("--steps", type=int, default=None, help="states per system (default: the fewest any system has)")
    p.add_argument("--val", type=int, default=0, metavar="K", help="the last K systems form split val (default 0)")
    add_quiet(p)


def run(args) -> int:
    if args.parquet:
        from orbitlaw.orbits.parquet import import_parquet

        if args.steps is not None or args.val:
            raise ValueError("--steps and --val go with --rebound or --table (a Parquet export keeps its splits)")
        print(import_parquet(args.parquet, args.out))
        return 0
    from orbitlaw.orbits.importer import import_trajectories

    source = args.rebound or [args.table]
    print(import_trajectories(source, args.out, time_step=args.time_step, steps=args.steps, val=args.val,
                              progress=not args.quiet))
    return 0
