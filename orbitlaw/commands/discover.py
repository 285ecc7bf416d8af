"""``orbitlaw discover``: symbolic regression of a law from a CSV, with a plain verdict (LAW.json)."""

from __future__ import annotations

import json
from pathlib import Path

from orbitlaw.commands._shared import command, config_fields, default_workers, names
from orbitlaw.discovery.sr.rule import PRECISION


def add_parser(sub) -> None:
    p = command(sub, "discover", run, help="symbolic regression of a law from a table, with a verdict",
                description=DESCRIPTION)
    p.add_argument("--input", required=True, metavar="FILE.csv", help="table with the feature and target columns")
    p.add_argument("--target", required=True, metavar="COL", help="column to explain, e.g. F_pred")
    p.add_argument("--features", default="r,m1,m2", metavar="COLS",
                   help="input columns (default r,m1,m2: distance in AU, planet and star mass in Msun)")
    p.add_argument("--backend", default="operon", choices=["operon", "pysr"],
                   help="operon (default, offline) or pysr (needs orbitlaw[pysr] and Julia)")
    p.add_argument("--seeds", type=int, default=5, help="independent fits, seeds S..S+N-1 (default 5)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="the first seed (default 0)")
    p.add_argument("--points", type=int, default=1000, help="random rows per seed (default 1000)")
    p.add_argument("--restarts", type=int, default=3, help="searches per seed, fronts merged (default 3)")
    p.add_argument("--maxsize", type=int, default=20, help="largest expression size (default 20)")
    p.add_argument("--budget", type=int, default=None, help="Operon evaluations per search (default 30000)")
    p.add_argument("--protocol", default="orbitlaw", choices=["orbitlaw", "reference"],
                   help="orbitlaw (default): log-space error, power-law screen, selection on held-out rows; "
                   "reference: Vafa et al.'s (epsilon-insensitive L1, per-restart score, best restart kept)")
    p.add_argument("--selection", default=None, choices=["se", "best", "score"],
                   help="se (default under orbitlaw): highest score among the models within two standard errors "
                   "of the lowest held-out error; best: within 1.5x of it (PySR's default); score: highest score "
                   "(what --protocol reference uses)")
    p.add_argument("--metric", default=None, choices=["auto", "log", "relative"],
                   help="error for refitting and selection: log (mean |ln y - ln f|, every row alike; needs a "
                   "positive target), relative (mean|y - f| / mean|y|), auto (default: log when the target is "
                   "positive)")
    p.add_argument("--tolerance", type=float, default=None, metavar="FRACTION",
                   help="the verdict's precision (with --selection se): each seed reports the simplest law on its "
                   "front whose held-out predictions depart from the one it chose by at most this (RMS of ln "
                   f"f1/f2 for --metric log, of (f1 - f2)/mean|f2| for relative; {PRECISION:g} = {PRECISION:.0%}%), so "
                   f"a law within {PRECISION:.0%}% of Newton's form on the front is reported as Newton's; 0: an "
                   f"exact test (default: the study's precision, {PRECISION:g}, under se selection; 0 under best "
                   "and score)")
    p.add_argument("--quantity", default="force", choices=["force", "acceleration"],
                   help="what the target is, which decides Newton's form: force (default; on the planet, "
                   "C*m1*m2/r**2) or acceleration (the planet's, AU/yr^2: C*m2/r**2, no planet mass)")
    p.add_argument("--subset", default="", metavar="COLS",
                   help="boolean columns that must be true for a row to be used, e.g. near_train")
    p.add_argument("--units", default=None, metavar="COL=UNIT,...",
                   help="the units of every feature and of the target, e.g. 'm=kg,m_0=kg,v=m/s,c=m/s' or "
                   "'P=yr,a=AU,M=AU^3/yr^2': search the target over a prefactor with its units and the "
                   "dimensionless groups of the features (Buckingham pi; docs/commands/discover.md)")
    p.add_argument("--workers", type=int, default=default_workers(), help="seeds fitted in parallel")
    p.add_argument("--out", required=True, metavar="LAW.json")
    p.set_defaults(field_flags={"first_seed": "--seed"})


def run(args) -> int:
    from orbitlaw.discovery.sr.backends import SearchSettings
    from orbitlaw.discovery.sr.symbolic import DiscoverConfig
    from orbitlaw.provenance import OutputLock
    from orbitlaw.validate import at_least

    out = Path(args.out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {args.out!r}")
    settings = SearchSettings(maxsize=args.maxsize, **({} if args.budget is None else {"budget": args.budget}))
    at_least(settings, 3, "maxsize")
    at_least(settings, 100, "budget")
    config = DiscoverConfig(**config_fields(
        args, DiscoverConfig, features=names(args.features, "--features"), first_seed=args.seed, settings=settings,
        metric=args.metric or "auto", subset=names(args.subset, "--subset") if args.subset else [],
        units=unit_map(args.units) if args.units is not None else None))
    with OutputLock.beside(out, f"law {out}"):  # one writer (and resumer) per law file
        law = _discover(out, args.input, config)
    print(json.dumps({**{k: law[k] for k in ("expression", "verdict", "newtonian", "power_law", "newton_departure",
                                             "newton_departure_exact", "seeds_agreeing", "seeds", "rule")},
                      "disagrees": (law["newton_test"] or {}).get("disagrees"),
                      "unresolved_reasons": law.get("unresolved_reasons", []),
                      "resolution_rms_ln": (law["resolution"] or {}).get("rms_ln"),
                      "power": law.get("power")}))
    return 0


def unit_map(text: str) -> dict[str, str]:
    """``"m=kg,v=m/s"`` -> {"m": "kg", "v": "m/s"}; ValueError (one line) for an entry without a column and unit."""
    out = {}
    for entry in text.split(","):
        column, sep, unit = entry.partition("=")
        if not sep or not column.strip() or not unit.strip():
            raise ValueError(f"--units must be COL=UNIT pairs separated by commas, got {entry.strip()!r}")
        if column.strip() in out:
            raise ValueError(f"--units gives column {column.strip()!r} twice")
        out[column.strip()] = unit.strip()
    return out


def _discover(out: Path, table: str, config) -> dict:
    """The law of ``table`` written to ``out`` with its Pareto figure beside it; if the figure cannot be written
    (a full disk), ``out`` is put back as it was before the command, so no law lands without its figure."""
    from orbitlaw.discovery.sr.pareto_plot import plot_pareto
    from orbitlaw.discovery.sr.symbolic import discover_to_file
    from orbitlaw.provenance import atomic_path

    before = out.read_bytes() if out.is_file() else None
    law = discover_to_file(out, table, config, progress=True)
    try:
        plot_pareto(law, out.with_suffix(".pareto.png"))
    except BaseException:
        if before is None:
            out.unlink(missing_ok=True)
        else:
            with atomic_path(out) as tmp:
                tmp.write_bytes(before)
        raise
    return law


DESCRIPTION = (  # --help's text, read when the parser is built (add_parser)
    "Fit symbolic expressions of --features to --target (Pareto front of complexity vs "
    "error, PySR-style score), simplify and refit them, and say whether the law is a power law "
    "C * m1^a * m2^b * r^c and whether it is Newton's (a, b, c) = (1, 1, -2). Writes LAW.json and "
    "a Pareto-front figure beside it (LAW.pareto.png).")
