"""The controls study (``orbitlaw run --preset controls``) as a benchmark: its wall time on this machine
against the 45-minute target, and every control row, written to ``benchmarks/results/controls.json``.

    python benchmarks/experiments/controls.py --out STUDY [--seed S]

The study is cached and resumable, so a rerun into the same STUDY only rebuilds the JSON; ``wall_seconds``
is the span between its first and last stage markers (``STUDY/stages/controls__*.json``, written as each stage
starts and ends and never touched by a cached rerun), as measured on disk; null (and ``within_target`` null)
for ``--only`` and ``--from-stages``, whose rows are not one whole study.

``--from-stages`` runs nothing: it rebuilds the rows of every configuration whose stages in STUDY (or in the
``--also`` studies, e.g. ``benchmarks/experiments/control_variants.py`` runs of a variant that the preset has since
adopted) have finished (each stage marker holds its config, which must be this preset's, its source digest
and its result), for a study stopped before its end; the rows not finished are listed in
``not_finished``. The stage directories live in /tmp and do not outlive a session: ``--previous FILE`` (an
earlier ``controls.json`` of this same preset config) carries over its rows for the configurations that no
directory has finished, each still naming the ``study`` it came from and marked ``"carried_from": FILE``.

Each row carries its law as the study's one verdict rule decides it (``law``), for a model the frozen-state
verdict (``law_frozen``; for a study that ran before the controls had one, computed here by :func:`frozen_law`),
and the exact test's law on the same search (``law["exact"]``: the seeds' choices with no precision), with that
exact law's departure from Newton's form and its 95% interval over systems (``newton_departure_exact``,
``_ci95``). ``pass_rule`` and ``passes`` apply :data:`orbitlaw.study.controls.PASS_RULE` (written before the
replications ran) to the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from orbitlaw.commands._shared import default_workers
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import ORACLES, PASS_RULE, configurations, passes, run_controls
from orbitlaw.study.pipeline import run_study
from orbitlaw.study.presets import study_config

TARGET_SECONDS = 45 * 60


class NotFinished(Exception):
    pass


def finished(out: str | Path, name: str, config: dict) -> dict | None:
    """The result of stage ``name`` in study ``out`` when its marker is done and holds exactly ``config``, else
    None."""
    marker = Path(out) / "stages" / f"{name.replace(':', '__')}.json"
    saved = json.loads(marker.read_text()) if marker.exists() else {}
    if saved.get("done") and _canonical(saved.get("config")) == _canonical(config):
        return saved["result"]
    return None


class FinishedStages(stages.Study):
    """A study that runs nothing: a stage's result is its finished marker's (:func:`finished`), else
    NotFinished; a frozen-state law a study from before the frozen-state verdict never ran is None (and
    :func:`frozen_law` computes it)."""

    def stage(self, name, config, outputs, fn):
        result = finished(self.out, name, config)
        if result is None and name.startswith("controls:law-frozen:"):
            return None
        if result is None:
            raise NotFinished(name)
        return result


def _canonical(config) -> str:
    """A stage config as sorted JSON, as stage markers and result files are compared."""
    return json.dumps(config, sort_keys=True, default=str)


def finished_rows(outs: list[str], spec: dict) -> tuple[list[dict], list[str]]:
    """The control rows whose every stage finished in one of the studies ``outs`` (the first that has it),
    each with ``study`` (its directory), and the names of the others."""
    rows, missing = [], []
    for name in [c["name"] for c in configurations(spec)] + list(ORACLES):
        for out in outs:
            try:
                rows += [{**row, "study": out} for row in run_controls(FinishedStages(out, progress=False), spec,
                                                                       workers=1, progress=False, only={name})]
                break
            except NotFinished:
                continue
        else:
            missing.append(name)
    return rows, missing


def carried_rows(previous: Path, spec: dict, names: list[str]) -> list[dict]:
    """The rows named ``names`` of an earlier ``controls.json``, marked ``carried_from``; its config must be
    ``spec``, or the rows would mix two designs."""
    doc = json.loads(previous.read_text())
    if _canonical(doc["config"]) != _canonical(spec):
        raise SystemExit(f"--previous {previous}: its controls config differs from this preset's; not carrying rows")
    return [{**row, "carried_from": str(previous)} for row in doc["controls"] if row["name"] in names]


def frozen_law(study: stages.Study, spec: dict, row: dict) -> dict:
    """The frozen-state verdict of a model row whose study ran before the controls had one: the linear probes of
    its trained run (``controls/linear-frozen/<name>``, writing ``frozen_predictions.csv``) and the study's
    symbolic regression and rule on that readout (``controls/laws-frozen/<name>``), each a cached stage."""
    name, linear_spec = row["name"], spec["linear_probe"]
    ldir = study.path("controls", "linear-frozen", name)
    data = study.path("controls", "data", "probe")
    key = {"run": row["run"], "data": spec["data"]["probe"], **linear_spec}
    study.stage(f"frozen:linear:{name}", key, [ldir], lambda: stages.linear(Path(row["run"]), data, ldir, linear_spec))
    law_file = study.path("controls", "laws-frozen", name, "LAW.json")
    return study.stage(f"frozen:law:{name}", {"linear": key, **spec["discover"]}, [law_file.parent],
                       lambda: stages.law(ldir / "frozen_predictions.csv", law_file, spec["discover"], 2, False,
                                          spec.get("target", "force-magnitude")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="study directory (resumable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result", default="benchmarks/results/controls.json")
    ap.add_argument("--only", default=None, metavar="NAMES",
                    help="run just these configurations and oracles (comma-separated; run_controls(only=...)) "
                    "instead of the whole study")
    ap.add_argument("--from-stages", action="store_true", help="run nothing: the rows of the finished stages")
    ap.add_argument("--also", default=[], type=lambda text: text.split(","), metavar="DIRS",
                    help="with --from-stages: more study directories to take finished rows from (e.g. --only runs)")
    ap.add_argument("--previous", default=None, metavar="FILE",
                    help="with --from-stages: an earlier controls.json of the same preset config, whose rows fill "
                    "in the configurations that no directory has finished")
    args = ap.parse_args()
    if args.previous and not args.from_stages:
        ap.error("--previous fills in a --from-stages table; it needs --from-stages")
    start = time.perf_counter()
    missing = []
    if args.from_stages:
        config = study_config("controls", seed=args.seed)
        rows, missing = finished_rows([args.out, *args.also], config["controls"])
        results = {"controls": rows, "config": config, "code_version": code_version()}
    elif args.only:
        config = study_config("controls", seed=args.seed)
        rows = run_controls(stages.Study(args.out, progress=False), config["controls"], workers=2, progress=False,
                            only=set(args.only.split(",")))
        results = {"controls": rows, "config": config, "code_version": code_version()}
    else:
        results = run_study("controls", args.out, seed=args.seed, progress=False, workers=default_workers())
    this_run = time.perf_counter() - start
    out = Path(args.out)
    span = None  # a stopped study (or rows gathered from several) has no whole-study time
    if not (args.from_stages or args.only):
        marks = [os.path.getmtime(f) for f in (out / "stages").glob("controls__*.json")]
        span = round(max(marks) - min(marks), 1)
    keep = ("name", "kind", "study", "window", "target", "probe_r2", "probe_r2_log", "linear_probe_r2",
            "linear_probe_r2_log", "linear_probe_r2_accel", "linear_probe_r2_log_accel", "val_loss", "newtonian",
            "verdict", "newtonian_seeds")
    laws = stages.LAW_ROW_KEYS
    spec = results["config"]["controls"]
    for c in results["controls"]:  # rows of a study whose code had no frozen-state verdict yet: compute it now
        if c["kind"] == "model" and not c.get("law_frozen"):
            c["law_frozen"] = frozen_law(stages.Study(c.get("study", out), progress=False), spec, c)
    rows = [{**{k: c.get(k) for k in keep}, "law": {k: c["law"].get(k) for k in laws},
             "law_frozen": {k: c["law_frozen"].get(k) for k in laws} if c.get("law_frozen") else None}
            for c in results["controls"]]
    if args.previous:
        rows += carried_rows(Path(args.previous), results["config"]["controls"], missing)
        missing = [name for name in missing if name not in {row["name"] for row in rows}]
        order = [c["name"] for c in configurations(results["config"]["controls"])] + list(ORACLES)
        rows.sort(key=lambda row: order.index(row["name"]))
    positive = [c for c in rows if c["kind"] == "model" and "-s" in c["name"]]
    try:
        verdict = passes(rows)
    except ValueError as exc:  # an --only run without the controls the rule reads
        verdict = {"passed": None, "reasons": [str(exc)]}
    doc = {"benchmark": "controls", "wall_seconds": span, "this_invocation_seconds": round(this_run, 1),
           "target_seconds": TARGET_SECONDS, "within_target": None if span is None else span <= TARGET_SECONDS,
           "seed": args.seed, "pass_rule": PASS_RULE, "passes": verdict,
           "positive_control_newtonian_training_seeds": f"{sum(c['newtonian'] for c in positive)}/{len(positive)}",
           "controls": rows, "not_finished": missing, "run": ("the finished stages of a stopped study"
                                                             if args.from_stages else args.only or "the whole study"),
           "config": results["config"]["controls"], "study_code_version": results["code_version"],
           "code_version": code_version(), "dependency_versions": dependency_versions(),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    write_json_atomic(Path(args.result), doc)
    keys = ("wall_seconds", "within_target", "positive_control_newtonian_training_seeds", "passes")
    print(json.dumps({k: doc[k] for k in keys}))


if __name__ == "__main__":
    main()
