"""The README's quick start, timed as a new user meets it: a fresh clone in a plain ``python -m venv``, then
``pip install torch==2.13.0 -e .`` and ``orbitlaw run --preset smoke``; the install and the study timed apart.

    python benchmarks/quickstart.py [--repo .] [--work DIR] [--out benchmarks/results/quickstart.json]

The clone is of ``--repo``'s committed HEAD (what CI clones), so uncommitted edits do not count. A time is a
figure only when the machine is otherwise idle: the JSON records the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--work", default=None, help="where the clone and its venv go (default: a temp dir, removed)")
    ap.add_argument("--out", default="benchmarks/results/quickstart.json")
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
    write_json_atomic(Path(args.out), result)
    print(result)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
