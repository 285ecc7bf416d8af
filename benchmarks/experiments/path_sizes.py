"""The path's size rows, a few at a time over several sessions: each finished row is written as a committed file,
and the next run reads it back instead of training it again.

    python benchmarks/experiments/path_sizes.py --out STUDY [--seed 10] [--workers 2] [--max-rows N]
        [--rows DIR] [--chain FILE.json] [--result FILE.json]

The size rows (docs/path.md) train the ``whole`` rung at two widths and three budgets, softmax and LSSAR; every row
at the largest budget (9x, 2,700 steps: 67-120 min on one core) runs again at the other two training seeds. That is
about 19 core-hours: more than one session of two cores, and a study directory does not outlive its machine. So
this script runs them through the same stages as ``orbitlaw run --preset path`` (the same stage keys), cheapest
first (at one cost, every attention at one seed before the next seed), ``--workers`` rows side by side, and after
every group writes each finished row to ``--rows`` (default ``benchmarks/results/path_sizes_seed<S>/<row>.json``:
its five stages' records, train, probe, linear, law and frozen law, and its run's ``config.json``; a few kB, no
weights). Commit that directory as rows land. The next run, on any machine, puts those records back into STUDY
before it starts, so the study's cache skips those rows.

A record holds the stage key, which includes the toolkit's source digest and dependency versions, so a row comes
back only for the same code: a row file made by another source is refused with the commit that made it (run from
``git worktree add --detach DIR <commit>``). Then the replication rule's rows (:func:`orbitlaw.study.path.replication`:
every size row at the largest budget) run at the other seeds. ``--max-rows N`` stops after N rows have trained
this run (rows that come back from files do not count); a kill loses only the group in progress.

Writes ``benchmarks/results/path_sizes_seed<S>.json`` (and ``.md``, and ``.png`` drawn with the chain's rows): the
size rows, their summary, and the reading rules' answer (:func:`orbitlaw.study.path.answer`) over the chain's rows
(``--chain``, default ``path_chain_seed<S>.json``; ``none``: the size rows alone) and these. ``complete`` says
whether every size row and every replication row has run; until then ``restored`` is null and ``missing`` names the
rows still to run.
``--figure-only`` draws the figure again from ``--result`` and ``--chain`` as they are, with this checkout's
plotting code (the rows themselves come from the worktree of the commit that made them). ``--answer-only`` computes
the answer again over them with this checkout's :func:`orbitlaw.study.path.answer` and rewrites the result (JSON,
``.md`` and figure; ``answer_code_version`` says which code answered); nothing is trained, probed or searched.
Nothing in the rows' settings, the rule or the data differs from the preset's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from path_results import write_figure, write_result  # a sibling script: benchmarks/experiments/ is on sys.path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import run_controls
from orbitlaw.study.path import _annotate, _first_seed_name, answer, configurations, replication, summary
from orbitlaw.study.pipeline import check_same_study
from orbitlaw.study.presets import study_config

RESULTS = Path(__file__).resolve().parents[1] / "results"
STAGES = ("train", "probe", "linear", "law", "law-frozen")
"""The stages of one model row (:func:`orbitlaw.study.controls._model_row`), whose records make the row."""


def _marker(study: stages.Study, stage: str, name: str) -> Path:
    return study.marker(f"controls:{stage}:{name}")


def _run_config(study: stages.Study, name: str) -> Path:
    return study.path("controls", "runs", name, "config.json")


def save_row(study: stages.Study, name: str, rows_dir: Path) -> bool:
    """Write row ``name``'s stage records and run config to ``rows_dir/<name>.json`` if every stage finished;
    whether it did."""
    records = {}
    for stage in STAGES:
        marker = _marker(study, stage, name)
        record = json.loads(marker.read_text()) if marker.exists() else {}
        if not record.get("done"):
            return False
        records[stage] = record
    rows_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(rows_dir / f"{name}.json", {
        "row": name, "source": study.source, "code_version": code_version(), "stages": records,
        "run_config": json.loads(_run_config(study, name).read_text())})
    return True


def restore_rows(study: stages.Study, rows_dir: Path) -> list[str]:
    """Put every row file of ``rows_dir`` back into ``study`` (stage records and run config); the rows' names.
    A one-line SystemExit, before anything is written, for a file that does not parse or lacks a part, or one
    made by another source or other dependency versions than this checkout's (its stage keys would not match,
    and the row would silently train again)."""
    saved, versions = {}, dependency_versions()
    for path in sorted(rows_dir.glob("*.json")):
        try:
            row = json.loads(path.read_text())
            _ = [row[part] for part in ("row", "source", "code_version", "run_config")]  # each part is there
            _ = [row["stages"][stage]["versions"] for stage in STAGES]
        except (ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"{path}: not a path row file ({type(err).__name__}: {err})") from None
        if row["row"] != path.stem:
            raise SystemExit(f"{path}: holds row {row['row']!r}, not {path.stem!r}")
        if row["source"] != study.source:
            raise SystemExit(f"{path}: made by source {row['source']} (code version {row['code_version']}), "
                             f"this checkout's is {study.source}: run from a worktree of that commit")
        other = {k: v for k, v in row["stages"]["train"]["versions"].items() if versions.get(k) != v}
        if other:
            raise SystemExit(f"{path}: made with {other}, this environment has "
                             f"{ {k: versions.get(k) for k in other} }: install those versions")
        saved[row["row"]] = row
    for name, row in saved.items():
        for stage in STAGES:
            marker = _marker(study, stage, name)
            if not marker.exists() or not json.loads(marker.read_text()).get("done"):
                write_json_atomic(marker, row["stages"][stage])
        if not _run_config(study, name).exists():
            _run_config(study, name).parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(_run_config(study, name), row["run_config"])
    return list(saved)


def _cost(conf: dict) -> float:
    """A training row's relative cost: its steps times its width."""
    return conf["train"]["max_steps"] * conf["width"]


def run_sizes(out: str, seed: int, workers: int, rows_dir: Path, max_rows: int | None = None,
              preset: str = "path") -> dict:
    """Run (or resume) the size rows and their replication in study ``out``, saving each finished row to
    ``rows_dir``; the size rows that have run, the replication rule's choice, and the rows still missing."""
    config = study_config(preset, None, seed, "orbitlaw", None, None)
    controls, path = config["controls"], config["path"]
    study = stages.Study(out, False)
    check_same_study(study, config)
    if not study.path("study.json").exists():
        write_json_atomic(study.path("study.json"), {"config": config, "code_version": code_version()})
    restored = set(restore_rows(study, rows_dir))
    left = {"rows": max_rows}

    def run(confs: list[dict]) -> list[dict]:
        """The rows of ``confs``: those that came back from files, then the rest cheapest first, ``workers`` at
        a time, each group saved as it finishes; stops (leaving the rest out) once ``max_rows`` rows trained."""
        back = [c for c in confs if c["name"] in restored]
        rows = run_group(back, save=False) if back else []
        # cheapest first; at one cost, seed by seed, so a partial run sets the attentions side by side at a seed
        todo = sorted((c for c in confs if c["name"] not in restored), key=lambda c: (_cost(c), c["seed"]))
        while todo and left["rows"] != 0:
            size = workers if left["rows"] is None else min(workers, left["rows"])
            group, todo = todo[:size], todo[size:]
            rows += run_group(group, save=True)
            if left["rows"] is not None:
                left["rows"] -= len(group)
        return rows

    def run_group(group: list[dict], save: bool) -> list[dict]:
        try:
            ran = run_controls(study, controls, workers, False, "none", only={c["name"] for c in group},
                               extra=group)
        finally:  # a row that finished is kept even when its neighbour failed
            for conf in group if save else ():
                save_row(study, conf["name"], rows_dir)
        return _annotate(ran, group, study, controls)

    first = [c for c in configurations(controls, path) if c["budget"] is not None]
    # for the size rows the rule needs no verdict: every first-seed row at the largest budget (so known up front)
    again = set(replication([{"name": c["name"], "width_row": True, "budget": c["budget"], "seed": c["seed"],
                              "attention": c["attention"]} for c in first], path))
    more = [c for c in configurations(controls, path, controls["seeds"][1:])
            if c["budget"] is not None and _first_seed_name(c, controls["seeds"][0]) in again]
    rows = run(first)
    rows += run(more)  # after the first seed: trains nothing once --max-rows is spent
    wanted = [c["name"] for c in first + more]
    rows.sort(key=lambda r: wanted.index(r["name"]))  # the preset's order, however the rows came
    done = {r["name"] for r in rows}
    missing = [name for name in wanted if name not in done]
    return {"config": config, "rows": rows, "replicated": sorted(again), "missing": missing,
            "complete": not missing}


def check_chain(chain: dict, chain_file: Path, seed: int) -> None:
    """A one-line SystemExit unless ``chain`` is this study's chain (the same controls and path config) with
    every replication row run: else its rows would answer for another study."""
    config = study_config("path", None, seed, "orbitlaw", None, None)
    theirs = chain.get("config", {})
    if theirs.get("controls") != config["controls"] or theirs.get("path") != config["path"]:
        raise SystemExit(f"{chain_file}: the chain of another study (preset {chain.get('preset')!r}, seed "
                         f"{chain.get('seed')}), not this one's")
    if chain.get("replication_run") != "all":
        raise SystemExit(f"{chain_file}: its replication ran {chain.get('replication_run')!r}, not all: "
                         "finish it with benchmarks/experiments/path_chain.py")


def reading(chain_rows: list[dict], rows: list[dict], path: dict, complete: bool) -> dict:
    """The reading rules' answer over the chain's rows and the size rows; ``restored`` null until ``complete``."""
    out = answer(chain_rows + rows, path) if chain_rows + rows else {}
    if not complete:
        for attention in out.values():
            attention["restored"] = None  # not every largest-budget row has run at every seed
    return out


def result(sizes: dict, chain: dict | None, seed: int, out: str, seconds: float) -> dict:
    """The committed result: the size rows, their summary, and the answer over the chain's rows and these."""
    path = sizes["config"]["path"]
    chain_rows = chain["path"] if chain else []
    rows = sizes["rows"]
    return {"benchmark": "path_sizes", "seed": seed, "study": str(out), "complete": sizes["complete"],
            "missing": sizes["missing"], "replicated": sizes["replicated"], "path": rows,
            "path_summary": summary(rows), "path_answer": reading(chain_rows, rows, path, sizes["complete"]),
            "chain": {"rows": len(chain_rows), "code_version": chain.get("code_version")} if chain else None,
            "config": sizes["config"], "code_version": code_version(), "dependency_versions": dependency_versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "wall_seconds_this_run": round(seconds, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the study directory (shared with orbitlaw run --preset path)")
    parser.add_argument("--seed", type=int, default=10, help="the study's seed offset (docs/path.md: 10)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-rows", type=int, help="stop after this many rows have trained in this run")
    parser.add_argument("--rows", help="the finished rows' directory (default benchmarks/results/path_sizes_seed<S>)")
    parser.add_argument("--chain", help="the chain's result (default benchmarks/results/path_chain_seed<S>.json; "
                        "none: answer on the size rows alone)")
    parser.add_argument("--result", help="the JSON to write (default benchmarks/results/path_sizes_seed<S>.json)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--figure-only", action="store_true",
                      help="only draw the figure again, from --result and --chain as they are (no study, no --out)")
    only.add_argument("--answer-only", action="store_true",
                      help="only compute the answer again over --result's and --chain's rows with this checkout's "
                           "rules (no study, no --out)")
    args = parser.parse_args(argv)
    if not args.out and not (args.figure_only or args.answer_only):
        parser.error("--out is required (the study directory), unless --figure-only or --answer-only")
    if args.max_rows is not None and args.max_rows < 0:
        parser.error(f"--max-rows must be >= 0, got {args.max_rows}")
    start = time.time()
    rows_dir = Path(args.rows or RESULTS / f"path_sizes_seed{args.seed}")
    chain_file = None if args.chain == "none" else Path(args.chain or RESULTS / f"path_chain_seed{args.seed}.json")
    if chain_file is not None and not chain_file.is_file():
        raise SystemExit(f"{chain_file}: no chain result (run benchmarks/experiments/path_chain.py, or --chain none)")
    chain = json.loads(chain_file.read_text()) if chain_file else None
    if chain is not None:
        check_chain(chain, chain_file, args.seed)
    # the figure draws the chain's rows (the rungs, and the whole rung's base width and budget) beside these
    chain_rows = chain["path"] if chain else []
    target = Path(args.result or RESULTS / f"path_sizes_seed{args.seed}.json")
    if args.figure_only or args.answer_only:
        if not target.is_file():
            raise SystemExit(f"{target}: no size rows' result to read")
        doc = json.loads(target.read_text())
        rows = doc["path"]
        if args.figure_only:
            print(f"wrote {write_figure(target, rows, chain_rows + rows)}")
            return
        recorded = doc.get("chain") or {}
        if (chain is None) != (not recorded) or (chain is not None and (
                len(chain_rows) != recorded.get("rows") or chain.get("code_version") != recorded.get("code_version"))):
            raise SystemExit(f"{target}: answered over a chain of {recorded.get('rows', 0)} rows at "
                             f"{recorded.get('code_version')}, not {chain_file or 'none'}: "
                             "pass the chain it was made with")
        doc["path_answer"] = reading(chain_rows, rows, doc["config"]["path"], doc["complete"])
        doc["answer_code_version"] = code_version()
        write_result(target, doc, None, plot_rows=chain_rows + rows)
        print(f"wrote {target}")
        return
    sizes = run_sizes(args.out, args.seed, args.workers, rows_dir, args.max_rows)
    doc = result(sizes, chain, args.seed, args.out, time.time() - start)
    write_result(target, doc, None, plot_rows=chain_rows + doc["path"])
    print(f"complete: {doc['complete']}; missing: {', '.join(doc['missing']) or 'none'}")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
