"""A finished path study's results as committed files: ``benchmarks/results/<name>.{json,md,png}``.

    python benchmarks/experiments/path_results.py STUDY --name path_reference_seed10
    python benchmarks/experiments/path_results.py --reread benchmarks/results/path_chain_seed10.json

Reads ``STUDY/results.json`` (what ``orbitlaw run --preset path ...`` wrote) and writes beside the other results:
the JSON (the study's results, with the rows' summary and the reading rules' answer computed again by this
checkout's :func:`orbitlaw.study.path.summary` and :func:`orbitlaw.study.path.answer`, so that a study run by an
older version reads by today's rules; ``answer_code_version`` says which), the report's path section (``.md``)
and the path figure (``.png``). Nothing is trained, probed or searched. ``--reread FILE`` does the same for a
committed result (its rows as they are; the summary, the answer and the ``.md`` computed again in place).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from orbitlaw.provenance import code_version, write_json_atomic, write_text_atomic
from orbitlaw.study.figures import plot_path
from orbitlaw.study.path import answer, summary
from orbitlaw.study.report import path_section


def write_result(target: Path, doc: dict, controls_passes: dict | None, plot_rows: list[dict] | None = None) -> None:
    """Write a path result ``doc`` (its ``path`` rows, ``path_summary`` and ``path_answer``) to ``target`` (JSON),
    the report's path section beside it (``.md``) and the path figure (``.png``, drawn with ``plot_rows``, default
    the result's rows), the last two only when it has rows; print each row's verdict and departure from Newton.
    The other path scripts (``path_chain.py``, ``path_sizes.py``) write their results through it too."""
    write_json_atomic(target, doc)
    rows = doc["path"]
    if rows:
        lines = path_section(rows, doc["path_summary"], doc["path_answer"], controls_passes)
        write_text_atomic(target.with_suffix(".md"), "\n".join(lines) + "\n")
        write_figure(target, rows, plot_rows)
    for r in rows:
        print(f"{r['name']:28s} {str(r['verdict']):16s} departure {(r['law'] or {}).get('newton_departure_exact')}")


def write_figure(target: Path, rows: list[dict], plot_rows: list[dict] | None = None) -> Path:
    """The path figure beside ``target`` (``.png``), drawn with ``plot_rows`` (default ``rows``) at the precision of
    the rule that judged ``rows``."""
    return plot_path(plot_rows or rows, target.with_suffix(".png"), precision=rows[0]["law"]["rule"].get("precision"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", nargs="?",
                        help="a path study's directory (orbitlaw run --preset path ... --out STUDY)")
    parser.add_argument("--name", help="the result files' name, e.g. path_reference_seed10")
    parser.add_argument("--reread", metavar="FILE", help="a committed path result to read again by today's rules")
    parser.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "results"),
                        help="the directory to write to (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.reread:
        target = Path(args.reread)
        result = json.loads(target.read_text())
        rows = result["path"]
        result["path_summary"] = summary(rows)
        result["path_answer"] = answer(rows, result["config"]["path"])
        result["answer_code_version"] = code_version()
        write_result(target, result, result.get("controls_passes"), plot_rows=None)
        print(f"read again {target}")
        return
    if not (args.study and args.name):
        parser.error("give STUDY and --name, or --reread FILE")
    source = Path(args.study) / "results.json"
    if not source.is_file():
        raise SystemExit(f"{source}: no results.json (the study has not finished)")
    result = json.loads(source.read_text())
    if not result.get("path"):
        raise SystemExit(f"{source}: not a path study (no path rows)")
    rows = result["path"]
    result["path_summary"] = summary(rows)
    result["path_answer"] = answer(rows, result["config"]["path"])
    result["answer_code_version"] = code_version()
    target = Path(args.to) / f"{args.name}.json"
    write_result(target, result, result.get("controls_passes"))
    print("answer:", result["path_answer"])
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
