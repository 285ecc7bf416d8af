"""Start-up time of the ``orbitlaw`` command: every command's ``--help`` and a 1,000-sequence
``orbitlaw simulate``, beside ``python -c pass`` and ``python -c "import torch"``, in one run.

    python benchmarks/cli_startup.py [--repeats 7] [--sequences 1000] [--out benchmarks/results/cli_startup.json]

Each command is a fresh process of this checkout's code (``python -m orbitlaw`` from the repository root), timed
from start to exit. The commands take turns, one round per repeat, so that a change in the machine's load
touches every command alike; each gets its median and minimum. The simulate writes a new dataset each time
(an existing one would be resumed) after one untimed run that fills numba's cache, as any second run finds it.
Targets: every ``--help`` within 0.3 s of ``python -c pass`` on two idle cores, the simulate under 1.5 s. A
time is a figure only when the machine is otherwise idle: the JSON records the load average at start and end.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orbitlaw.cli import commands  # noqa: E402
from orbitlaw.provenance import code_version, write_json_atomic  # noqa: E402

HELP_WITHIN_S, SIMULATE_UNDER_S = 0.3, 1.5
PYTHON = [sys.executable]
ORBITLAW = [sys.executable, "-m", "orbitlaw"]


def help_commands() -> dict[str, list[str]]:
    """label -> argv of ``orbitlaw --help`` and of every command's (``llm``'s two sub-commands too)."""
    helps = [[], *([name] for name in commands()), ["llm", "run"], ["llm", "score"]]
    return {" ".join(["orbitlaw", *h, "--help"]): [*ORBITLAW, *h, "--help"] for h in helps}


def simulate_argv(sequences: int, preset: str, out: Path) -> list[str]:
    return [*ORBITLAW, "simulate", "--preset", preset, "--splits", f"train={sequences}", "--seed", "0",
            "--out", str(out), "--quiet"]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def summary(argv: list[str], seconds: list[float]) -> dict:
    return {"command": " ".join(["python", *argv[1:]]), "seconds": [round(s, 4) for s in seconds],
            "median": round(statistics.median(seconds), 4), "min": round(min(seconds), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7, help="runs of each command (default 7)")
    ap.add_argument("--sequences", type=int, default=1000, help="sequences the simulate writes (default 1000)")
    ap.add_argument("--preset", default="vafa2025", help="the simulate's dataset preset (default vafa2025)")
    ap.add_argument("--out", default="benchmarks/results/cli_startup.json")
    args = ap.parse_args()
    load_start = os.getloadavg()
    baselines = {"python -c pass": [*PYTHON, "-c", "pass"], 'python -c "import torch"': [*PYTHON, "-c", "import torch"]}
    helps = help_commands()
    simulate = f"orbitlaw simulate --preset {args.preset} --splits train={args.sequences}"
    times: dict[str, list[float]] = {label: [] for label in [*baselines, *helps, simulate]}
    work = Path(tempfile.mkdtemp(prefix="orbitlaw-cli-startup-"))
    try:
        timed(simulate_argv(args.sequences, args.preset, work / "warm"))
        for r in range(args.repeats):
            for label, argv in {**baselines, **helps}.items():
                times[label].append(timed(argv))
            times[simulate].append(timed(simulate_argv(args.sequences, args.preset, work / f"data-{r}")))
            shutil.rmtree(work / f"data-{r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    argvs = {**baselines, **helps, simulate: simulate_argv(args.sequences, args.preset, Path("DIR"))}
    rows = {label: summary(argvs[label], seconds) for label, seconds in times.items()}
    python = rows["python -c pass"]["median"]
    slowest_help = max(helps, key=lambda label: rows[label]["median"])
    over = round(rows[slowest_help]["median"] - python, 4)
    result = {
        "benchmark": "cli_startup", "code_version": code_version(), "repeats": args.repeats,
        "commands": rows,
        "help_over_python_median": {label: round(rows[label]["median"] - python, 4) for label in helps},
        "slowest_help": slowest_help,
        "targets": {"help_within_s_of_python": HELP_WITHIN_S, "simulate_under_s": SIMULATE_UNDER_S,
                    "help_met": over <= HELP_WITHIN_S, "simulate_met": rows[simulate]["median"] < SIMULATE_UNDER_S},
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "platform": platform.platform(), "python": platform.python_version()},
    }
    write_json_atomic(Path(args.out), result)
    for label, row in rows.items():
        print(f"{row['median']:7.3f} s median  {row['min']:7.3f} s min  {label}")
    print(f"slowest --help: {over:+.3f} s over python -c pass (target {HELP_WITHIN_S}); load average at start "
          f"{load_start[0]:.2f}")


if __name__ == "__main__":
    main()
