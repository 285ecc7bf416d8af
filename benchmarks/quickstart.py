"""The README's quick start, timed as a new user meets it: a fresh clone in a plain ``python -m venv``, then
``pip install torch==2.13.0 -e .`` and ``orbitlaw run --preset smoke``; the install and the study timed apart.

    python benchmarks/quickstart.py [--repo .] [--work DIR] [--profile] [--durations]
                                    [--out benchmarks/results/quickstart.json]

The clone is of ``--repo``'s committed HEAD (what CI clones), so uncommitted edits do not count. A time is a
figure only when the machine is otherwise idle: the JSON records the load average before and after.

``--profile`` adds the study's stage profile: wall and CPU seconds (CPU: this process's threads and its finished
child processes) of every stage as the study's own markers recorded them (``Study.timings``), summed by kind of
stage (``train``, ``law``, ``controls:train``, ...) and by model, slowest first. ``--durations`` then runs the
README's test command in the same clone (``pip install torch==2.13.0 -e ".[dev]" && python -m pytest``) and records
its wall time and its 20 slowest tests (pytest's ``--durations=20``).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orbitlaw.provenance import write_json_atomic  # noqa: E402

QUICK_START = "pip install torch==2.13.0 -e . && orbitlaw run --preset smoke --out study-smoke"


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def profile(study: Path) -> dict:
    """The stage profile of the finished study in ``study`` (module docstring)."""
    from orbitlaw.study.stages import Study

    stages = Study(study, progress=False).timings()
    by_kind: dict[str, dict] = {}
    by_model: dict[str, dict] = {}
    for name, t in stages.items():
        kind, _, model = name.rpartition(":")
        groups = [(by_kind, kind or model)] + ([(by_model, model)] if kind and not kind.startswith("data") else [])
        for table, key in groups:
            row = table.setdefault(key, {"wall_seconds": 0.0, "cpu_seconds": 0.0, "stages": 0})
            row["wall_seconds"] = round(row["wall_seconds"] + t["wall_seconds"], 2)
            row["cpu_seconds"] = round(row["cpu_seconds"] + t["cpu_seconds"], 2)
            row["stages"] += 1

    def slowest(table: dict) -> dict:
        return dict(sorted(table.items(), key=lambda kv: -kv[1]["wall_seconds"]))
    return {"stages": slowest(stages), "by_kind": slowest(by_kind), "by_model": slowest(by_model),
            "stage_wall_seconds": round(sum(t["wall_seconds"] for t in stages.values()), 1)}


DURATION = re.compile(r"^([0-9.]+)s (call|setup|teardown)\s+(\S+)$")


def durations(clone: Path, env: dict) -> dict:
    """The README's test command in ``clone`` (module docstring): its wall seconds, outcome and 20 slowest tests."""
    install = timed(["pip", "install", "-q", "torch==2.13.0", "-e", ".[dev]"], clone, env)
    start = time.perf_counter()
    done = subprocess.run(["python", "-m", "pytest", "-q", "--durations=20",
                           "-p", "no:cacheprovider"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = done.stdout.splitlines()
    slow = [{"seconds": float(m[1]), "phase": m[2], "test": m[3]} for m in map(DURATION.match, lines) if m]
    return {"command": 'pip install torch==2.13.0 -e ".[dev]" && python -m pytest', "exit_code": done.returncode,
            "install_seconds": round(install, 1), "suite_seconds": round(wall, 1),
            "outcome": next((ln.strip("= ") for ln in reversed(lines) if " in " in ln and "passed" in ln), None),
            "slowest": slow}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--work", default=None, help="where the clone and its venv go (default: a temp dir, removed)")
    ap.add_argument("--out", default="benchmarks/results/quickstart.json")
    ap.add_argument("--profile", action="store_true", help="add the study's stage profile (module docstring)")
    ap.add_argument("--durations", action="store_true", help="then time the README's test command in the clone")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="orbitlaw-quickstart-"))
    clone = work / "orbitlaw"
    commit = subprocess.run(["git", "-C", args.repo, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    load_before = os.getloadavg()
    subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
    env = {**os.environ, "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(clone / ".venv")}
    env.pop("PYTHONPATH", None)
    install = timed(["pip", "install", "-q", "torch==2.13.0", "-e", "."], clone, env)
    study = timed(["orbitlaw", "run", "--preset", "smoke", "--out", "study-smoke", "--quiet"], clone, env)
    assert (clone / "study-smoke" / "report.md").is_file(), "the quick start wrote no report"
    result = {"benchmark": "quickstart", "command": QUICK_START, "commit": commit,
              "install_seconds": round(install, 1), "study_seconds": round(study, 1),
              "total_seconds": round(install + study, 1), "total_minutes": round((install + study) / 60, 1),
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()}}
    if args.profile:
        result["profile"] = profile(clone / "study-smoke")
    if args.durations:
        result["suite"] = durations(clone, env)
        result["load_average_after_suite"] = os.getloadavg()
    write_json_atomic(Path(args.out), result)
    print(result)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
