"""The study's precision (docs/controls.md, "The study's precision"): every row of a finished controls study
re-judged at τ = 1%, 1.5% and 2%, τ chosen by :data:`PRECISION_RULE`, and the controls' pass rule applied there.

    python benchmarks/experiments/precision.py --study STUDY --result FILE.json [--workers N]
    python benchmarks/experiments/precision.py --markdown-only --result FILE.json   # FILE.md again from FILE.json

STUDY is a finished ``orbitlaw run --preset controls`` directory (or ``benchmarks/experiments/controls.py
--out``). Each row is judged as the study judged it, with only the precision changed: the same
``predictions.csv``, the same search seeds, points, restarts and budget (read from the row's own stage marker,
``STUDY/stages/controls__law__<row>.json``), through the same code as ``orbitlaw discover --quantity
acceleration --tolerance τ``. The study's own precision is read from its markers, not searched again. Each new
law is a cached stage of the study (``STUDY/precision/tau-<τ>/<row>/LAW.json``), so a killed run resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

from orbitlaw.commands._shared import default_workers
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic, write_text_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import ORACLES, PASS_RULE, passes

TAUS = (0.01, 0.015, 0.02)
"""The precisions a row is judged at (RMS of ln), in the order the rule tries them."""

PRECISION_RULE = """The precision τ is the smallest of 1%, 1.5% and 2% at which `knn-state` (the k-NN oracle on
the true state) is `newtonian` at the run's seed, every row re-judged at each τ by `orbitlaw discover --quantity
acceleration --tolerance τ` on the row's own predictions.csv (search seeds and budget as the preset's); the pass
rule is then applied at that τ, to every row. Tested at `--seed 13` (data seeds 23/24, training seeds 13-15, never
used in design or in any run before) and at `--seed 10` for comparison; a τ chosen at one seed and not at the
other is reported as such. If `knn-state` is not `newtonian` at 2%, the probe set, not the precision, is what
fails, and the controls are reported as failing at that seed. The study's presets keep 1% until such a run has
been made. (docs/controls.md, committed before either run.)"""


def law_rows(study: Path) -> list[dict]:
    """The control rows whose law stage finished in ``study``: name, kind, the table the law was read from, the
    law stage's config and its result (the row's law at the study's own precision)."""
    rows = []
    for marker in sorted((study / "stages").glob("controls__law__*.json")):
        saved = json.loads(marker.read_text())
        if not saved.get("done"):
            continue
        name = marker.stem.removeprefix("controls__law__")
        kind = "oracle" if name in ORACLES else "model"
        table = study / "controls" / ("oracles" if kind == "oracle" else "probes") / name / "predictions.csv"
        rows.append({"name": name, "kind": kind, "table": table, "config": saved["config"], "law": saved["result"]})
    if not any(r["name"] == "knn-state" for r in rows):
        raise SystemExit(f"{study}: no finished knn-state law; the precision rule reads it")
    return rows


def judge(study: stages.Study, row: dict, tau: float, workers: int) -> dict:
    """``row``'s law at precision ``tau``: the study's own where that was its precision, else a cached stage."""
    spec = {k: v for k, v in row["config"].items() if k != "probe"}
    if abs(spec.get("tolerance", 0.0) - tau) < 1e-12:
        return row["law"]
    spec["tolerance"] = tau
    target = row["config"]["probe"]["target"]
    law_file = study.path("precision", f"tau-{tau:g}", row["name"], "LAW.json")
    return study.stage(f"precision:{tau:g}:{row['name']}", {"table": str(row["table"]), **row["config"], **spec},
                       [law_file.parent], lambda: stages.law(row["table"], law_file, spec, workers, False, target))


def summary(law: dict) -> dict:
    """The fields of a law that the tables quote."""
    test = law.get("newton_test") or {}
    return {"verdict": law["verdict"], "newtonian": bool(law["newtonian"]), "expression": law["expression"],
            "exact_departure": law.get("newton_departure_exact"),
            "exact_departure_ci95": law.get("newton_departure_exact_ci95"),
            "free_fit_departure": (test.get("departure") or {}).get("rms_ln"),
            "free_fit_departure_ci95": (test.get("departure") or {}).get("ci95"),
            "resolution_rms_ln": (law.get("resolution") or {}).get("rms_ln"),
            "resolved": (law.get("power") or {}).get("resolved"),
            "unresolved_reasons": law.get("unresolved_reasons", [])}


def chosen_precision(knn_state: dict[float, dict]) -> float | None:
    """:data:`PRECISION_RULE`: the smallest τ at which knn-state is newtonian, None where it is at none."""
    return next((tau for tau in TAUS if knn_state[tau]["newtonian"]), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, help="a finished controls study directory")
    ap.add_argument("--result", required=True, type=Path, help="where the JSON goes")
    ap.add_argument("--workers", type=int, default=default_workers(), help="search seeds fitted in parallel")
    ap.add_argument("--markdown-only", action="store_true", help="run nothing: FILE.md again from --result")
    args = ap.parse_args()
    if args.markdown_only:
        write_text_atomic(args.result.with_suffix(".md"), markdown(json.loads(args.result.read_text())))
        return
    if args.study is None:
        ap.error("--study is needed, except with --markdown-only")
    rows = law_rows(args.study)
    study = stages.Study(args.study, progress=True)
    rows.sort(key=lambda r: r["name"] != "knn-state")  # the row that decides τ first
    judged = {}
    for tau in TAUS:
        for row in rows:
            judged.setdefault(row["name"], {})[tau] = summary(judge(study, row, tau, args.workers))
            print(f"τ {tau:.1%} {row['name']}: {judged[row['name']][tau]['verdict']}", flush=True)
    tau = chosen_precision(judged["knn-state"])
    at = {t: passes([{"name": r["name"], "kind": r["kind"], "newtonian": judged[r["name"]][t]["newtonian"]}
                     for r in rows]) for t in TAUS}
    doc = {"benchmark": "precision", "precision_rule": PRECISION_RULE, "pass_rule": PASS_RULE, "taus": list(TAUS),
           "study": str(args.study), "study_precision": rows[0]["config"].get("tolerance"),
           "chosen_precision": tau,
           "passes": at[tau] if tau is not None else {
               "passed": False, "reasons": ["knn-state is not newtonian at 2%: the probe set fails at this seed"]},
           "passes_at_each_precision": {f"{t:g}": at[t] for t in TAUS},
           "rows": [{"name": r["name"], "kind": r["kind"],
                     "by_precision": {f"{t:g}": judged[r["name"]][t] for t in TAUS}} for r in rows],
           "code_version": code_version(), "dependency_versions": dependency_versions(),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    write_json_atomic(args.result, doc)
    write_text_atomic(args.result.with_suffix(".md"), markdown(doc))
    print(json.dumps({k: doc[k] for k in ("chosen_precision", "passes")}))


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _interval(values) -> str:
    return "" if not values else f" [{_pct(values[0])}, {_pct(values[1])}]"


def markdown(doc: dict) -> str:
    """The result as a table: each row's verdict at each precision, and its distances at the study's own."""
    own = f"{doc['study_precision'] or 0:g}"
    own = own if own in {f"{t:g}" for t in doc["taus"]} else f"{doc['taus'][0]:g}"
    tau = doc["chosen_precision"]
    head = ("τ chosen: " + ("none (knn-state is newtonian at no τ)" if tau is None else f"{tau:.1%}")
            + f"; pass rule at τ: {'held' if doc['passes']['passed'] else 'failed'}"
            + (f" (positive {doc['passes']['positive']})" if "positive" in doc["passes"] else "")
            + "; at each τ: " + ", ".join(f"{float(t):.1%} {'held' if p['passed'] else 'failed'} ({p.get('positive')})"
                                          for t, p in doc["passes_at_each_precision"].items()))
    lines = [head, "", "| row | " + " | ".join(f"verdict at {float(t):.1%}" for t in doc["taus"]) + " | exact law "
             "from Newton [95%] | free fit from Newton [95%] | resolution (RMS ln) |",
             "|---|" + "---|" * (len(doc["taus"]) + 3)]
    for row in doc["rows"]:
        at = row["by_precision"]
        base = at[own]
        lines.append(f"| {row['name']} | " + " | ".join(f"`{at[f'{t:g}']['verdict']}`" for t in doc["taus"])
                     + f" | {_pct(base['exact_departure'])}{_interval(base['exact_departure_ci95'])} | "
                     f"{_pct(base['free_fit_departure'])}{_interval(base['free_fit_departure_ci95'])} | "
                     f"{_pct(base['resolution_rms_ln'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
