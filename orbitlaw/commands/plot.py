"""``orbitlaw plot``: draw a system's orbits from a dataset."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="plot a system's orbits from a dataset",
                       description="Plot the orbits of one sequence of a dataset to a PNG.")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset directory")
    p.add_argument("--split", default=None, help="split name (default: the first)")
    p.add_argument("--index", type=int, default=0, help="sequence index within the split")
    p.add_argument("--out", required=True, metavar="FILE.png", help="image to write")
    p.set_defaults(func=run)


def run(args) -> int:
    from orbitlaw import orbits

    data = orbits.load_dataset(args.data)
    name = args.split or next(iter(data))
    if name not in data:
        raise ValueError(f"no split {name!r} in {args.data}; it has {', '.join(data)}")
    orbits.plot_system(data[name], args.index, out=args.out)  # written atomically, its name checked first
    print(args.out)
    return 0
