"""The path's rung chain and its replication, before its size rows: what two CPU cores can run in a session.

    python benchmarks/experiments/path_chain.py --out STUDY [--seed 10] [--preset path] [--workers 2]
        [--replicate all|windows|none] [--attention softmax,lssar] [--rungs positions,centres-in,...]
        [--result FILE.json]

``orbitlaw run --preset path`` trains the whole-sequence rows first, the size rows among them: at the 9x budget
each takes 45-90 min on one core, about 9 h of the two cores for the size rows and their replication. This
script runs the same study's rows in another order, through the same stages and so under the same stage keys
(a later ``orbitlaw run --preset path --seed S --out STUDY`` resumes from them and adds the size rows): first
every rung of every attention at the first training seed, the anchor ``tokens`` rows and the negative controls,
then the replication rule's rows (:func:`orbitlaw.study.path.replication`, the size rows left out) at the
other seeds. The result holds the rows, their summary, the reading rules' answer (``restored``, which needs the
size rows, is null) and the controls' pass rule on the study. ``--replicate none`` stops after the first pass
and names the rows the replication rule chose without running them; ``--replicate windows`` runs only their
windowed rows (rungs 0-5), which take minutes, and leaves the whole-sequence ones (``whole``, ``tokens``) for
later (``replication_run`` says which). Until every chosen row has run, the answer is not the replicated one.
``--attention`` and ``--rungs`` (names of :func:`orbitlaw.study.path.chosen_rungs`) run fewer rows of the same
study: they only leave rows out, so a later full run resumes from these.
Nothing in the design, the rule or the data differs from the preset's; the order, and the size rows left for
later, are stated in docs/path.md.
Writes ``benchmarks/results/path_chain_seed<S>.json`` unless ``--result`` names another file, and beside it the
report's path section (``.md``) and figure (``.png``).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from path_results import write_result  # a sibling script: benchmarks/experiments/ is on sys.path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import configurations as control_configurations
from orbitlaw.study.controls import run_controls
from orbitlaw.study.path import (
    NEGATIVES,
    _annotate,
    _first_seed_name,
    answer,
    chosen_rungs,
    configurations,
    replication,
    summary,
)
from orbitlaw.study.pipeline import check_same_study, path_passes
from orbitlaw.study.presets import study_config


def run_chain(out: str, preset: str, seed: int, workers: int, replicate: str = "all",
              attentions: list[str] | None = None, rungs: list[str] | None = None) -> dict:
    """Run (or resume) the chain and its replication in the study ``out`` (only ``attentions`` and ``rungs``
    where given); the result's dictionary."""
    start = time.time()
    config = study_config(preset, attentions, seed, "orbitlaw", None, None)
    controls, path = config["controls"], config["path"]
    if rungs:
        path["rungs"] = rungs
        chosen_rungs(path)  # a one-line error for an unknown name, before anything runs
    study = stages.Study(out, False)
    check_same_study(study, config)  # a study of another protocol, seed or size there would be overwritten
    if not study.path("study.json").exists():
        write_json_atomic(study.path("study.json"), {"config": config, "code_version": code_version()})
    own = {c["name"] for c in control_configurations(controls)}

    def run(confs: list[dict], also: tuple = ()) -> list[dict]:
        return run_controls(study, controls, workers, False, "none", only={c["name"] for c in confs} | set(also),
                            extra=[c for c in confs if c["name"] not in own])

    chain = [c for c in configurations(controls, path) if c["budget"] is None]
    ran = {r["name"]: r for r in run(chain, NEGATIVES)}
    rows = _annotate([ran[c["name"]] for c in chain], chain, study, controls)
    negatives = [ran[n] for n in NEGATIVES]
    again = set(replication(rows, path))
    more = [c for c in configurations(controls, path, controls["seeds"][1:])
            if c["budget"] is None and _first_seed_name(c, controls["seeds"][0]) in again]
    done = {r["name"] for r in rows}  # softmax's rung 0 ran at every seed in the first pass
    more = [c for c in more if c["name"] not in done and
            (replicate == "all" or (replicate == "windows" and c["window"] is not None))]
    if more:
        rows += _annotate(run(more), more, study, controls)
    reading = answer(rows, path)
    for attention in reading.values():
        attention["restored"] = None  # the size rows did not run
        attention["largest_budget_newtonian"] = None
    control_rows = [r for r in rows if r["attention"] == "softmax" and r["rung"] == "positions"] + negatives
    return {"benchmark": "path_chain", "preset": preset, "seed": seed, "study": str(out),
            "replicated": sorted(again), "replication_run": replicate,
            "path": rows, "path_summary": summary(rows), "path_answer": reading,
            "controls": control_rows, "controls_passes": path_passes(control_rows),
            "size_rows": "not run (orbitlaw run --preset path resumes this study and adds them)",
            "config": config, "code_version": code_version(), "dependency_versions": dependency_versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "wall_seconds": round(time.time() - start, 1)}


def _comma_list(text: str) -> list[str]:
    return text.split(",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the study directory (shared with orbitlaw run --preset path)")
    parser.add_argument("--preset", default="path", choices=["path", "path-gpu"])
    parser.add_argument("--seed", type=int, default=10, help="the study's seed offset (docs/path.md: 10)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replicate", default="all", choices=["all", "windows", "none"],
                        help="which of the replication rule's rows to run at the other seeds: all; windows (rungs "
                        "0-4, the whole-sequence rows left for later); none (name them only)")
    parser.add_argument("--attention", type=_comma_list, help="comma-separated attentions to run (default: the "
                        "preset's)")
    parser.add_argument("--rungs", type=_comma_list, help="comma-separated rungs to run (default: every rung, the "
                        "anchor and the untrained negative at bins-in)")
    parser.add_argument("--result", help="the JSON to write (default benchmarks/results/path_chain_seed<S>.json)")
    args = parser.parse_args()
    result = run_chain(args.out, args.preset, args.seed, args.workers, args.replicate, args.attention, args.rungs)
    target = Path(args.result or Path(__file__).resolve().parents[1] / "results" / f"path_chain_seed{args.seed}.json")
    write_result(target, result, result["controls_passes"])
    print("answer:", result["path_answer"])
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
