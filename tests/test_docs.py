"""The documentation: the README and docs/ link only to files that exist, name every current result file,
quote the result files' numbers as the files hold them, and build with MkDocs in strict mode.

To quote a new number, add a row to ``NUMBERS``: the page, the result file, a function of the file's JSON
that returns the value(s), and the text the page must contain with the value(s) formatted in.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
ARCHIVE_README = RESULTS / "archive" / "README.md"
PAGES = [README, *DOCS, ARCHIVE_README]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
# a repository path named in the text (in code spans or not): under one of these top-level folders
REPO_PATH = re.compile(r"(?<![\w./-])((?:benchmarks|tests|docs|notebooks)/[\w./*-]*[\w*])")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@cache
def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(path: Path) -> str:
    """The page without fenced code blocks and inline code (where a bracket is not a link)."""
    return CODE.sub("", FENCE.sub("", text(path)))


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs' toc extension (and GitHub, for these headings) makes it."""
    value = unicodedata.normalize("NFKD", heading.replace("`", "").replace("*", ""))
    value = re.sub(r"[^\w\s-]", "", value.encode("ascii", "ignore").decode()).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*?)\s*$", FENCE.sub("", text(path)), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{target} (no {resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {rel(resolved)})")
    assert not broken, f"{rel(page)}: broken links: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_repository_path_named_exists(page):
    missing = []
    for name in REPO_PATH.findall(text(page)):
        if "*" in name:
            if not list(ROOT.glob(name)):
                missing.append(name)
        elif not (ROOT / name).exists():
            missing.append(name)
    assert not missing, f"{rel(page)} names paths that do not exist: {sorted(set(missing))}"


def test_every_current_result_file_is_in_the_results_page():
    page = text(ROOT / "docs" / "results.md")
    current = sorted(p for p in RESULTS.iterdir() if p.is_file())
    assert current
    unnamed = [p.name for p in current if rel(p) not in page]
    assert not unnamed, f"benchmarks/results/ files not named in docs/results.md: {unnamed}"


def test_every_archived_result_file_has_its_reason():
    page = text(ARCHIVE_README)
    files = sorted(p.name for p in (RESULTS / "archive").iterdir() if p.name != "README.md")
    unlisted = [name for name in files if not re.search(rf"^\| `{re.escape(name)}` \| \S", page, re.M)]
    assert not unlisted, f"archived result files without a line in archive/README.md: {unlisted}"


def test_the_pages_stand_on_their_own():
    for page in PAGES:
        body = text(page)
        for outside in ("../shared", "/work/", "science.md"):
            assert outside not in body, f"{rel(page)} refers to {outside}, which a reader of the repository lacks"
    readme = text(README)
    assert len(readme.splitlines()) <= 250
    # CI runs the README's test command; the quick start is what a new user types
    assert '```bash\npip install torch==2.13.0 -e ".[dev]" && python -m pytest\n```' in readme
    assert "```bash\npip install torch==2.13.0 -e . && orbitlaw run --preset smoke --out study-smoke\n```" in readme


# ---------------------------------------------------------------------------------------------------------------
# The numbers: each quoted number is recomputed from its result file.


@cache
def result(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def minus(x: float, spec: str) -> str:
    """A signed number as the pages print it, with a real minus sign."""
    return format(x, spec).replace("-", "−")


def pm(mean: float, sd: float) -> str:
    return f"{mean:.2f} ± {sd:.2f}"


def row(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["name"] == name)


def departure(law: dict) -> tuple[float, float, float]:
    """The exact law's departure from Newton's form and its 95% interval."""
    return (law["newton_departure_exact"], *law["newton_departure_exact_ci95"])


def pass_rule(doc: dict) -> dict:
    p = doc["passes"]
    return {"word": "held" if p["passed"] else "failed", "positive": p["positive"],
            "negatives": "a negative `newtonian`" if p["negatives_newtonian"] else "no negative `newtonian`"}


def path_row(doc: dict, rung: str, attention: str) -> dict:
    """The path's first-seed row of ``rung`` and ``attention``."""
    first = min(r["seed"] for r in doc["path"])
    return next(r for r in doc["path"] if r["rung"] == rung and r["attention"] == attention
                and r["seed"] == first and not r["width_row"])


def path_departures(rung: str):
    """The exact law's departure from Newton at ``rung`` for softmax, LSSAR and LASER (first seed)."""
    return lambda d: [path_row(d, rung, a)["law"]["newton_departure_exact"] for a in ("softmax", "lssar", "laser")]


def _summary(doc: dict, rung: str, attention: str) -> dict:
    return next(x for x in doc["path_summary"] if x["rung"] == rung and x["attention"] == attention)


def path_newtonian(rung: str):
    """``rung``'s k/n over the replicated seeds for softmax, LSSAR and LASER."""
    return lambda d: [_summary(d, rung, a)["newtonian"] for a in ("softmax", "lssar", "laser")]


def path_by_distance(rung: str):
    """The path's pooled departure from Newton over seeds at ``rung`` for softmax, LSSAR and LASER
    (``path_answer[attention].by_distance``, orbitlaw.study.distance)."""
    return lambda d: [next(g["mean"] for g in d["path_answer"][a]["by_distance"]["rungs"] if g["rung"] == rung)
                      for a in ("softmax", "lssar", "laser")]


def path_lost_by_distance(d: dict) -> list:
    """Where each attention loses the law by distance, and its pooled departure and envelope there."""
    return [v for a in ("softmax", "lssar", "laser") for v in (
        d["path_answer"][a]["by_distance"]["lost_at"]["departure"], *d["path_answer"][a]["by_distance"]["lost_at"][
            "envelope"])]


def path_replicated(rung: str):
    """The path page's replicated row: per attention k/n and the departures (%) at seeds 10, 11, 12."""
    return lambda d: [v for a in ("softmax", "lssar", "laser") for v in
                      (_summary(d, rung, a)["newtonian"], *[100 * x for x in _summary(d, rung, a)["departures"]])]


def srbench(doc: dict, noise: str, key: str):
    """One number of srbench.json's summary at a noise level; counts to one decimal, as the pages write them."""
    value = doc["summary"][noise][key]
    return f"{value:.1f}" if isinstance(value, float) and key.startswith(("solved", "physo_solved")) else value


def srbench_target(doc: dict) -> str:
    """Whether a srbench result meets its target at 1% noise (PhySO's count), as the pages write it."""
    return "met" if doc["summary"]["0.01"]["at_least_physo"] else "missed"


def srbench_solved_2dp(doc: dict) -> str:
    """Expected solved on PhySO's equations at 1% noise to two decimals (a count over more than two seeds)."""
    return f"{doc['summary']['0.01']['solved_expected_on_physo_equations']:.2f}"


@cache
def physo_equations() -> frozenset[str]:
    """The equations with PhySO's published rates (benchmarks/physo_results.py, a script, not a package)."""
    spec = importlib.util.spec_from_file_location("physo_results", ROOT / "benchmarks" / "physo_results.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    return frozenset(table.PHYSO_RATES)


def srbench_pairs(doc: dict) -> list[str]:
    """Expected solved on PhySO's equations at 1% noise per pair of seeds (seeds 2k, 2k + 1: the pages' pairs start
    at an even seed) of a srbench result, to one decimal, in seed order; every pair must hold both seeds' fits."""
    by_pair: dict[int, dict[str, list[bool]]] = {}
    for cell in doc["cells"].values():
        if cell["noise"] == 0.01 and cell["equation"] in physo_equations():
            by_pair.setdefault(cell["seed"] // 2, {}).setdefault(cell["equation"], []).append(cell["solved"])
    assert all(len(v) == 2 for eqs in by_pair.values() for v in eqs.values()), "a pair of seeds with one seed's fit"
    return [f"{sum(sum(v) / len(v) for v in eqs.values()):.1f}" for _, eqs in sorted(by_pair.items())]


HELDOUT_ROW = ("{0} of PhySO's 97 against its {1}: the target **{2}** on held-out seeds; Kepler's third law {3}; "
               "{4:.2f} s CPU")
"""The results page's row of a held-out srbench replication."""


def srbench_heldout_row(doc: dict) -> tuple:
    """A held-out srbench replication's numbers at 1% noise, as :data:`HELDOUT_ROW` quotes them."""
    summary = doc["summary"]["0.01"]
    return (srbench(doc, "0.01", "solved_expected_on_physo_equations"), srbench(doc, "0.01", "physo_solved_expected"),
            srbench_target(doc), summary["orbital_laws"]["kepler_third_law"],
            summary["cpu_seconds_per_fit_mean"])


def path_cell(rung: str, attention: str):
    """The path page's table cell: departure [95% interval] and verdict."""
    return lambda d: (*[100 * v for v in departure(path_row(d, rung, attention)["law"])],
                      path_row(d, rung, attention)["verdict"])


def frozen_newtonian(doc: dict) -> str:
    n = sum((r.get("law_frozen") or {}).get("verdict") == "newtonian" for r in doc["controls"])
    return f"{n} rows" if n else "no row"


def world(doc: dict, kind: str) -> dict:
    """The power-law world's model row or oracle row (control_wrong_law.json)."""
    return next(r for r in doc["worlds"]["power"]["rows"] if r["kind"] == kind)


def r_exponent(doc: dict) -> tuple[str, str, str, str]:
    law = world(doc, "model")["law"]
    values = (law["fitted_exponents"]["r"], *law["fitted_exponents_ci95"]["r"])
    return (world(doc, "model")["verdict"], *(minus(x, ".2f") for x in values))


def non_newtonian_seeds(doc: dict) -> tuple[int, int]:
    """Seeds of the matrix's non-Newtonian laws called ``newtonian``, and all their seeds."""
    cells = [c for c in doc["results"].values() if c["expected"] != "newtonian"]
    return sum(c["newtonian_seeds"] for c in cells), sum(len(c["per_seed"]) for c in cells)


def matrix(doc: dict) -> tuple[int, int, int, int]:
    return (doc["summary"]["cells_meeting_targets"], doc["summary"]["cells"], *non_newtonian_seeds(doc))


def newton_seeds(doc: dict) -> tuple[int, int]:
    """Seeds of Newton's law called `newtonian`, and all its seeds, over the matrix's cells."""
    cells = [r for cell, r in doc["results"].items() if cell.startswith("newton/")]
    return sum(r["seed_verdicts"]["newtonian"] for r in cells), sum(r["seeds"] for r in cells)


def near_newton(doc: dict) -> tuple[str, int, int]:
    s = doc["summary"]
    return s["newton_replicates_newtonian"], s["resolved_called_newtonian"], s["resolved_replicates"]


def resolution(doc: dict, cell: str) -> float:
    """The median stated resolution (RMS of ln) of Newton's own rows over the replicates."""
    return statistics.median(r["resolution_rms_ln"] for r in doc["results"][cell]["per_replicate"])


def tracking(doc: dict) -> tuple[float, float, float, float, float]:
    """Relative scores (linear oracle) of the trained models: min, max; their slopes: min, max; the untrained GPT's."""
    trained = [r["tracking"]["linear"] for r in doc["rows"] if "untrained" not in r["model"]]
    untrained = next(r["tracking"]["linear"] for r in doc["rows"] if "untrained" in r["model"])
    scores, slopes = [t["relative_score"] for t in trained], [t["slope"] for t in trained]
    return min(scores), max(scores), min(slopes), max(slopes), untrained["relative_score"]


def protocols(doc: dict) -> tuple[str, str]:
    """R² of ln|F| on ``two-body`` under the orbitlaw and the reference protocol, mean ± sd over seeds."""
    summary = doc["presets"]["two-body"]["summary"]
    mine, theirs = summary["orbitlaw"]["r2_log"], summary["reference"]["r2_log"]
    return pm(mine["mean"], mine["sd"]), f'{minus(theirs["mean"], ".1f")} ± {theirs["sd"]:.1f}'


MULTIPLES = ("1", "2", "4", "8", "16")
ATTENTIONS = ("softmax", "lssa", "lssar", "lssar-p3", "laser", "sigmoid", "relu", "softmax-rw", "sigmoid-l1-rw",
              "relu-l1", "lssa-noscale", "lssar-adaptive")


def extrapolation_row(doc: dict, attention: str) -> str:
    """The experiments page's row: loss mean ± sd at 1x-16x the context, then the 16x / 1x ratio."""
    t = doc["table"][attention]
    cells = [pm(t[m]["mean"], t[m]["sd"]) for m in MULTIPLES] + [pm(t["16"]["ratio_mean"], t["16"]["ratio_sd"])]
    return f"| `{attention}` | " + " | ".join(cells) + " |"


def passkey_row(doc: dict, attention: str) -> str:
    """The experiments page's row: accuracy mean ± sd at 1x-16x the training length."""
    t = doc["table"][attention]
    return f"| `{attention}` | " + " | ".join(pm(t[m]["mean"], t[m]["sd"]) for m in MULTIPLES) + " |"


def at_16x(key: str, attention: str):
    mean, sd = ("ratio_mean", "ratio_sd") if key == "ratio" else ("mean", "sd")
    return lambda doc: pm(doc["table"][attention]["16"][mean], doc["table"][attention]["16"][sd])


README_, RESULTS_MD, CONTROLS_MD, PATH_MD = "README.md", "docs/results.md", "docs/controls.md", "docs/path.md"
PATH = "path_chain_seed10.json"
PATH_RUNGS = ("positions", "bins-in", "no-noise", "bins-out", "budget", "whole", "tokens")
BENCH_MD, EXPER_MD, RUN_MD = "docs/benchmarks.md", "docs/experiments.md", "docs/commands/run.md"
HISTORY_MD = "docs/history.md"
SEED5, SEED10, WRONG_LAW = "controls_seed5.json", "controls_seed10.json", "control_wrong_law.json"
SEED10_FIRST = "archive/controls_seed10_consistency_rule.json"  # the first run at --seed 10, the consistency rule
UNTRAINED_6K, W1_6K = ("control_variant_probe-6k-every-window_W3-untrained.json",
                       "control_variant_probe-6k-every-window_W1.json")
RULE_README = "pass rule **{word}** (positive {positive}; {negatives})"
RULE_RESULTS = "pass rule **{word}**: positive {positive}, {negatives}"
RULE_CONTROLS = "| **{word}** | {positive} | none |"

# (page, result file, value(s) from the file's JSON, the text the page must hold with the value(s) formatted in)
NUMBERS = [
    # the controls: the pass rule per replication, the frozen state, the rows quoted in the text
    (README_, SEED5, pass_rule, "`--seed 5`: " + RULE_README),
    (README_, SEED10, pass_rule, "`--seed 10`, rerun under the positive-evidence rule: " + RULE_README),
    (README_, SEED10_FIRST, pass_rule, "`--seed 10`, first run, under the consistency rule since replaced: "
     + RULE_README),
    (README_, SEED10, lambda d: departure(row(d["controls"], "W3-s10")["law"]),
     "W3-s10 is `unresolved`, its exact law {:.2%} [{:.2%}, {:.2%}] from Newton's form"),
    (README_, SEED10, lambda d: [v for name in ("tokens", "knn-state") for v in (
        row(d["controls"], name)["law"]["newton_test"]["departure"]["rms_ln"],
        *row(d["controls"], name)["law"]["newton_test"]["departure"]["ci95"])],
     "`unresolved`, its free fit {:.2%} [{:.2%}, {:.2%}] from Newton's form, as is k-NN on the true state "
     "({:.2%} [{:.2%}, {:.2%}])"),
    (RESULTS_MD, SEED5, pass_rule, RULE_RESULTS),
    (RESULTS_MD, SEED10, pass_rule, RULE_RESULTS),
    (RESULTS_MD, SEED10_FIRST, pass_rule, RULE_RESULTS),
    (CONTROLS_MD, SEED10_FIRST, pass_rule, "| `--seed 10`, first run (consistency rule) " + RULE_CONTROLS),
    (CONTROLS_MD, SEED5, pass_rule, "| `--seed 5` " + RULE_CONTROLS),
    (CONTROLS_MD, SEED10, pass_rule, "| `--seed 10` " + RULE_CONTROLS),
    (README_, SEED5, frozen_newtonian, "readout is `newtonian` for {}"),
    (README_, SEED10, frozen_newtonian, "readout is `newtonian` for {}"),
    (README_, SEED10_FIRST, frozen_newtonian, "readout is `newtonian` for {}"),
    (RESULTS_MD, SEED5, frozen_newtonian, "frozen-state verdict `newtonian` for {}"),
    (RESULTS_MD, SEED10, frozen_newtonian, "frozen-state verdict `newtonian` for {}"),
    (CONTROLS_MD, SEED5, lambda d: row(d["controls"], "W3-s6")["newtonian_seeds"], "W3-s6 `newtonian` {}/5"),
    (CONTROLS_MD, SEED5, lambda d: departure(row(d["controls"], "W3-s5")["law"]),
     "W3-s5's exact law is {:.2%} [{:.2%}, {:.2%}] away"),
    (CONTROLS_MD, SEED10, lambda d: departure(row(d["controls"], "W1")["law"]), "| {:.2%} [{:.2%}, {:.2%}] |"),
    *[(README_, seed, lambda d: (row(d["controls"], "tokens")["verdict"],
                                 row(d["controls"], "tokens")["law"]["newton_departure_exact"]),
       "under the consistency rule `{0}` at both seeds, exact law {1:.2%} from Newton's form")
      for seed in (SEED5, SEED10_FIRST)],
    *[(CONTROLS_MD, seed, lambda d: departure(row(d["controls"], "tokens")["law"]), "| {:.2%} [{:.2%}, {:.2%}] |")
      for seed in (SEED5, SEED10)],
    (README_, SEED10_FIRST, lambda d: d["wall_seconds"] / 60, "| {:.0f} min on 2 CPU cores, every row |"),
    (RESULTS_MD, SEED10_FIRST, lambda d: (d["wall_seconds"] / 60, d["wall_seconds"]),
     "every row in {0:.1f} min ({1:,.1f} s; target 45 min)"),
    # the wrong-law world and the negatives at the largest probe budget
    (README_, WRONG_LAW, lambda d: ("held" if d["passed"] else "failed",
                                    world(d, "oracle")["law"]["power_law"]["constant"]),
     "pass rule **{0}**: the model's law is not Newton's; k-NN on the true state finds {1:.2f}·m2/r^(5/2)"),
    (RESULTS_MD, WRONG_LAW, r_exponent, "W3-s20 `{0}`, r exponent {1} [{2}, {3}]"),
    (CONTROLS_MD, WRONG_LAW, lambda d: world(d, "model")["probe_r2_log"], "W3-s20's probe reads ln|a| at R² {:.3f}"),
    (RESULTS_MD, UNTRAINED_6K, lambda d: (d["rows"][0]["verdict"], *departure(d["rows"][0]["law"])),
     "`{0}`, exact law {1:.1%} [{2:.1%}, {3:.1%}] from Newton"),
    (CONTROLS_MD, UNTRAINED_6K, lambda d: d["rows"][0]["probe_r2_log"], "reaches R² {:.3f} for ln|a|"),
    (RESULTS_MD, W1_6K, lambda d: (d["rows"][0]["verdict"], d["rows"][0]["law"]["newton_departure_exact"]),
     "`{0}` C/r², {1:.0%} from Newton"),
    # the verdict
    (README_, "discover_tolerance1pct.json", lambda d: (*matrix(d), *newton_seeds(d)),
     "{0} of {1} cells meet their targets; {2} of {3:,} seeds of a non-Newtonian law called `newtonian`; Newton's "
     "law `newtonian` in {4} of {5} seeds"),
    (RESULTS_MD, "discover.json", lambda d: (d["summary"]["cpu_seconds_per_fit_mean"],
                                             d["summary"]["cpu_seconds_per_fit_max"], d["retime"]["fits_retimed"],
                                             d["retime"]["cpu_seconds_alone_max"]),
     "{0:.2f} s CPU per fit on average, {1:.2f} s at most; {2} slowest fits re-timed alone: at most {3:.2f} s"),
    (BENCH_MD, "discover.json", non_newtonian_seeds, "no seed of one ever called `newtonian` ({0} of {1:,} seeds)"),
    (RESULTS_MD, "discover_tolerance1pct.json", lambda d: (*matrix(d), *newton_seeds(d),
                                                           d["summary"]["cpu_seconds_per_fit_mean"],
                                                           d["summary"]["cpu_seconds_per_fit_max"]),
     "{0} of {1} cells meet their targets; {2} of {3:,} seeds of a non-Newtonian law called `newtonian`; Newton's "
     "law `newtonian` in {4} of {5} seeds; {6:.2f} s CPU per fit on average, {7:.2f} s at most"),
    # the path's size rows so far
    (README_, "path_sizes_seed10.json", lambda d: (len(d["path"]), len(d["path"]) + len(d["missing"]), *[
        100 * next(r for r in d["path"] if r["name"] == f"whole-{a}-w{w}-x9-s{s}")["law"]["newton_departure_exact"]
        for a in ("softmax", "lssar") for w in (64, 128) for s in (10, 11, 12)],
        *[next(s["newtonian"] for s in d["path_summary"] if (s["attention"], s["width"], s["budget"]) == (a, w, 9))
          for w in (64, 128) for a in ("softmax", "lssar")]),
     "size rows {0} of {1}, every row, "
     "[path_sizes_seed10.json](benchmarks/results/path_sizes_seed10.json): at 9× the budget over seeds 10-12, "
     "softmax comes to {2:.1f}%, {3:.1f}%, {4:.1f}% from Newton at width 64 and {5:.1f}%, {6:.1f}%, {7:.1f}% at "
     "width 128, LSSAR to {8:.1f}%, {9:.1f}%, {10:.1f}% and {11:.1f}%, {12:.1f}%, {13:.1f}%; `newtonian` {14} and "
     "{15} at width 64, {16} and {17} at width 128)"),
    (README_, "path_sizes_seed10.json", lambda d: [str(d["path_answer"][a]["restored"]).lower()
                                                   for a in ("softmax", "lssar")],
     "neither 30× the budget nor width 128 restores it (`restored`: {0} for softmax, {1} for LSSAR)"),
    (RESULTS_MD, "path_sizes_seed10.json", lambda d: [
        len(d["path"]), len(d["path"]) + len(d["missing"]),
        *[100 * next(r["law"]["newton_departure_exact"] for r in d["path"] if r["name"] == n)
          for n in ("whole-softmax-w64-x0.3-s10", "whole-softmax-w128-x0.3-s10", "whole-softmax-w128-x1-s10",
                    "whole-softmax-w64-x9-s10", "whole-softmax-w128-x9-s10",
                    "whole-lssar-w64-x0.3-s10", "whole-lssar-w128-x0.3-s10", "whole-lssar-w128-x1-s10",
                    "whole-lssar-w64-x9-s10", "whole-lssar-w128-x9-s10")],
        next(r["law"]["verdict"] for r in d["path"] if r["name"] == "whole-lssar-w64-x9-s10"),
        *[f(next(r for r in d["path"] if r["name"] == f"whole-{a}-w64-x9-s11")["law"])
          for a, f in (("softmax", lambda law: 100 * law["newton_departure_exact"]),
                       ("softmax", lambda law: law["verdict"]),
                       ("softmax", lambda law: law["power_law"]["constant"]),
                       ("softmax", lambda law: law["power_law"]["exponents"]["m2"]),
                       ("lssar", lambda law: 100 * law["newton_departure_exact"]),
                       ("lssar", lambda law: law["verdict"]))],
        *[100 * next(r for r in d["path"] if r["name"] == f"whole-{a}-w64-x9-s12")["law"]["newton_departure_exact"]
          for a in ("softmax", "lssar")],
        "/".join(sorted({s["newtonian"] for s in d["path_summary"] if (s["width"], s["budget"]) == (64, 9)})),
        *[f(next(r for r in d["path"] if r["name"] == f"whole-{a}-w128-x9-s{s}")["law"]) for s in (11, 12)
          for a, f in (("softmax", lambda law: 100 * law["newton_departure_exact"]),
                       ("softmax", lambda law: law["verdict"]),
                       ("lssar", lambda law: 100 * law["newton_departure_exact"]),
                       ("lssar", lambda law: law["verdict"]))],
        *[next(s["newtonian"] for s in d["path_summary"] if (s["attention"], s["width"], s["budget"]) == (a, 128, 9))
          for a in ("softmax", "lssar")],
        *[str(d["path_answer"][a]["restored"]).lower() for a in ("softmax", "lssar")]],
     "{0} of {1} rows; none `newtonian`; softmax {2:.1f}%, {3:.1f}%, {4:.1f}%, {5:.1f}%, {6:.1f}% from Newton (w64 "
     "0.3×, w128 0.3×, w128 1×, w64 9×, w128 9×), LSSAR {7:.1f}%, {8:.1f}%, {9:.1f}%, {10:.1f}%, {11:.1f}%; every "
     "first-seed row `not-a-power-law` (trained and frozen) but LSSAR at width 64 and 9×, `{12}` (2 of 5 seeds "
     "agree); at seed 11 (w64 9×) softmax {13:.1f}% (`{14}`, {15:.2f}·m2^{16}/r²), LSSAR {17:.1f}% (`{18}`); at seed "
     "12 softmax {19:.1f}%, LSSAR {20:.1f}%; w64 9× `newtonian` {21} for both; at seed 11 (w128 9×) softmax "
     "{22:.1f}% (`{23}`), LSSAR {24:.1f}% (`{25}`); at seed 12 (w128 9×) softmax {26:.1f}% (`{27}`), LSSAR "
     "{28:.1f}% (`{29}`); w128 9× `newtonian` {30} and {31}; `restored` {32} and {33}"),
    # symbolic regression on SRBench's Feynman problems
    (RESULTS_MD, "srbench.json", lambda d: [srbench(d, n, k) for k in ("solved_expected_on_physo_equations",
                                                                       "physo_solved_expected")
                                            for n in ("0.0", "0.001", "0.01")],
     "solved (expected, of PhySO's 97): {0} at noise 0, {1} at 0.1%, {2} at 1%; PhySO (published) {3}, {4}, {5}"),
    (RESULTS_MD, "srbench.json", srbench_target,
     "the target (PhySO's count at 1%) **{}**"),
    (RESULTS_MD, "srbench_before.json", lambda d: srbench(d, "0.01", "solved_expected"),
     "before the square root and the raw-target search {} at 1%"),
    (RESULTS_MD, "srbench.json", lambda d: srbench(d, "0.01", "cpu_seconds_per_fit_mean"),
     "{:.2f} s CPU per fit at 1%"),
    (RESULTS_MD, "srbench_before.json", lambda d: srbench(d, "0.01", "cpu_seconds_per_fit_mean"), "({:.2f} s before)"),
    (README_, "srbench.json", lambda d: srbench(d, "0.01", "solved_expected"), "{} of 97 equations at 1% noise"),
    (README_, "srbench.json", lambda d: srbench(d, "0.01", "physo_solved_expected"), "against {} for PhySO's"),
    (README_, "srbench_units.json", lambda d: [srbench(d, n, "solved_expected_on_physo_equations")
                                               for n in ("0.01", "0.001", "0.0")]
     + [srbench_target(d)],
     "(`--units`): {0} of 97 at 1% (target {3}), {1} at 0.1% and {2} at 0"),
    (README_, "srbench_units.json", lambda d: d["summary"]["0.01"]["orbital_laws"]["kepler_third_law"],
     "and Kepler's third law {}"),
    (RESULTS_MD, "srbench_units.json", lambda d: [srbench(d, n, "solved_expected_on_physo_equations")
                                                  for n in ("0.0", "0.001", "0.01")],
     "solved with units (expected, of PhySO's 97): {0} at noise 0, {1} at 0.1%, {2} at 1%"),
    (RESULTS_MD, "srbench_units.json", srbench_target,
     "with units the target (PhySO's count at 1%) **{}**"),
    (RESULTS_MD, "srbench_units.json", lambda d: (d["summary"]["0.01"]["orbital_laws"]["kepler_third_law"],
                                                  srbench(d, "0.01", "cpu_seconds_per_fit_mean")),
     "Kepler's third law for two comparable masses {0} at 1%; {1:.2f} s CPU per fit at 1%"),
    (RESULTS_MD, "srbench_units_replication.json", lambda d: (srbench(d, "0.01", "solved_expected_on_physo_equations"),
                                                              srbench(d, "0.01", "physo_solved_expected"),
                                                              srbench_target(d),
                                                              d["summary"]["0.01"]["orbital_laws"]["kepler_third_law"]),
     "{0} of PhySO's 97 against its {1}: the target **{2}** on held-out seeds; Kepler's third law {3}"),
    (HISTORY_MD, "srbench_units_replication.json", lambda d: (srbench(d, "0.01", "solved_expected_on_physo_equations"),
                                                            srbench(d, "0.01", "physo_solved_expected")),
     "**{0}** of 97 solved (expected over seeds 2 and 3) against PhySO's **{1}**"),
    (RESULTS_MD, "srbench_units_replication2.json", srbench_heldout_row, HELDOUT_ROW),
    (README_, "srbench_units_replication4.json", lambda d: (srbench(d, "0.01", "solved_expected_on_physo_equations"),
                                                            srbench_target(d)),
     "on seeds 8 and 9, unused in design, {0} at 1% ({1})"),
    (README_, "srbench_units_heldout.json", lambda d: (*srbench_pairs(d)[:3],
                                                       srbench_solved_2dp(d)),
     "and {0}, {1} and {2} on the earlier held-out pairs ({3} over all eight held-out seeds)"),
    (RESULTS_MD, "srbench_units_heldout.json", lambda d: (
        *srbench_pairs(d), srbench(d, "0.01", "physo_solved_expected"),
        srbench_solved_2dp(d),
        d["summary"]["0.01"]["orbital_laws"]["kepler_third_law"], srbench(d, "0.01", "cpu_seconds_per_fit_mean")),
     "{0}, {1}, {2} and {3} of PhySO's 97 on seeds 2-3, 4-5, 6-7 and 8-9 against its {4}; {5} over the eight seeds; "
     "Kepler's third law {6}; {7:.2f} s CPU"),
    (HISTORY_MD, "srbench_units_heldout.json", lambda d: (
        *srbench_pairs(d), srbench_solved_2dp(d),
        srbench(d, "0.01", "cpu_seconds_per_fit_mean"), srbench(d, "0.01", "cpu_seconds_per_fit_max")),
     "| orbitlaw `--units` | {0} | {1} | {2} | {3} | {4} |\n\nAgainst PhySO's 65.8: three of four pairs at or above "
     "it, one 0.3 below; over the eight seeds {4}. Mean CPU\n{5:.2f} s per fit (max {6:.2f} s)"),
    (RESULTS_MD, "srbench_units_replication4.json", srbench_heldout_row, HELDOUT_ROW),
    (RESULTS_MD, "srbench_units_heldout_seeds2to7.json", lambda d: (
        *srbench_pairs(d), srbench(d, "0.01", "physo_solved_expected"),
        srbench(d, "0.01", "solved_expected_on_physo_equations"),
        d["summary"]["0.01"]["orbital_laws"]["kepler_third_law"]),
     "{0}, {1} and {2} of PhySO's 97 on seeds 2-3, 4-5 and 6-7 against its {3}; {4} over the six seeds; Kepler's "
     "third law {5}"),
    (HISTORY_MD, "srbench_units_replication4.json", lambda d: (
        srbench(d, "0.01", "solved_expected_on_physo_equations"), srbench(d, "0.01", "physo_solved_expected"),
        srbench_target(d),
        srbench(d, "0.01", "cpu_seconds_per_fit_mean"), srbench(d, "0.01", "cpu_seconds_per_fit_max")),
     "**{0}** of 97 solved (expected over seeds 8 and 9)\nagainst PhySO's **{1}**: **the target is {2}**, by 1.2 "
     "equations, on seeds no design step saw. The CPU part holds:\n{3:.2f} s per fit (mean; max {4:.2f} s)"),
    (HISTORY_MD, "srbench_units_heldout_seeds2to7.json", srbench_pairs,
     "| orbitlaw `--units` | {0} (63.5) | {1} (64.0) | {2} (64.5) | 67.0 |"),
    (RESULTS_MD, "srbench_units_replication3.json", srbench_heldout_row, HELDOUT_ROW),
    (HISTORY_MD, "srbench_units_replication3.json", lambda d: (
        srbench(d, "0.01", "solved_expected_on_physo_equations"), srbench(d, "0.01", "physo_solved_expected"),
        srbench(d, "0.01", "cpu_seconds_per_fit_mean"), srbench(d, "0.01", "cpu_seconds_per_fit_max")),
     "**{0}** of 97 solved (expected over seeds 6 and 7)\nagainst PhySO's **{1}**: **the target is missed**, by 1.3 "
     "equations. The CPU part holds: {2:.2f} s per fit (mean; max\n{3:.2f} s)"),
    (HISTORY_MD, "srbench_units_replication2.json", lambda d: (
        srbench(d, "0.01", "solved_expected_on_physo_equations"), srbench(d, "0.01", "physo_solved_expected"),
        srbench(d, "0.01", "cpu_seconds_per_fit_mean"), srbench(d, "0.01", "cpu_seconds_per_fit_max")),
     "**{0}** of 97 solved (expected over seeds 4 and 5) against\nPhySO's **{1}**: **the target is missed**, by 1.8 "
     "equations, on seeds no design step saw. The CPU part holds:\n{2:.2f} s per fit (mean; max {3:.2f} s)"),

    *[(BENCH_MD, name, lambda d, n=n: (srbench(d, n, "solved_expected_on_physo_equations"),
                                       srbench(d, n, "physo_solved_expected"),
                                       srbench(d, n, "cpu_seconds_per_fit_mean"),
                                       srbench(d, n, "cpu_seconds_per_fit_max")),
       f"| {label} | {{0}} | {{1}} | {{2:.2f}} / {{3:.2f}} |")
      for name in ("srbench.json", "srbench_units.json")
      for n, label in (("0.0", "0"), ("0.001", "0.1%"), ("0.01", "1%"))],
    (BENCH_MD, "srbench_before.json", lambda d: srbench(d, "0.01", "solved_expected"), "orbitlaw solved {} of"),
    *[(BENCH_MD, "srbench.json", lambda d, law=law: srbench(d, "0.01", "orbital_laws")[law], f"{text}: {{}}")
      for law, text in (("hill_radius", "a(m/3M)^(1/3)"), ("kepler_third_law", "P = sqrt(a³/(M + m))"),
                        ("vis_viva", "the vis-viva speed"))],
    *[(page, "verdict_power.json", lambda d: [d["summary"]["off_newtonian"], d["summary"]["newton_newtonian"]],
       text) for page, text in ((README_, "G·m2·r^−1.93 `newtonian` in {0} tables (1-10% noise"),
                                (README_, "Newton's own law `newtonian` in {1}"),
                                (RESULTS_MD, "pass rule **met**: `newtonian` in {0} tables, Newton's own law in {1}"))],
    (BENCH_MD, "verdict_power.json", lambda d: [d["summary"]["off_newtonian"].replace("/", " of "),
                                                d["summary"]["newton_newtonian"].replace("/", " of ")],
     "G·m2·r^−1.93 is `newtonian` in **{0}** tables; Newton's law at 1% on 3,000\nrows in **{1}**"),
    *[(page, "controls_bins_seed10.json", lambda d: (row(d["controls"], "mlp-W3-bins")["law"]["newton_test"][
        "departure"]["rms_ln"], *row(d["controls"], "mlp-W3-bins")["law"]["newton_test"]["departure"]["ci95"]),
       "{:.2%} [{:.2%}, {:.2%}] from Newton's form") for page in (CONTROLS_MD, RESULTS_MD, PATH_MD)],
    *[(page, "near_newton_newton.json", lambda d: d["summary"]["newton_replicates_newtonian"], text)
      for page, text in ((CONTROLS_MD, "in **{}** replicates"), (RESULTS_MD, "Newton `newtonian` in {} replicates |"),
                         (README_, "under the positive-evidence rule Newton `newtonian` in {} replicates"))],
    *[(page, "discover_tolerance1pct_newton.json", lambda d: (
        f"{sum(r['cell_verdict'] == 'newtonian' for r in d['results'].values())}/{len(d['results'])}",
        f"{sum(r['seed_verdicts']['newtonian'] for r in d['results'].values())}/"
        f"{sum(r['seeds'] for r in d['results'].values())}"), text)
      for page, text in ((README_, "the cell's verdict `newtonian` in {0} (seeds {1})"),
                         (RESULTS_MD, "cell verdict `newtonian` in {0} cells, {1} seeds"),
                         (BENCH_MD, "Every cell's verdict is `newtonian` ({0}; each seed's\n  own form {1})"))],
    (README_, "near_newton.json", near_newton,
     "Newton `newtonian` in {0} replicates; {1} of {2} resolved departures called `newtonian`"),
    (RESULTS_MD, "near_newton.json", near_newton,
     "Newton `newtonian` in {0} replicates; {1} of {2} resolved departures called `newtonian`"),
    (RESULTS_MD, "near_newton_resolution.json",
     lambda d: [resolution(d, f"newton/{c}") for c in ("probe_two-body", "probe_two-body-exoplanet", "controls_rows")],
     "RMS of ln {0:.2%} (`two-body`), {1:.2%} (`two-body-exoplanet`), {2:.2%} (the controls' rows)"),
    (CONTROLS_MD, "near_newton_resolution.json", lambda d: resolution(d, "newton/probe_two-body"),
     "| `two-body` probe rows (force) | {:.2%} |"),
    # models, probes and attentions
    (README_, "inductive_bias_cpu_study.json", tracking,
     "relative scores {0:.2f}-{1:.2f} against the linear oracle, flat curves (slopes {2:.2f}-{3:.2f}); an "
     "untrained GPT scores {4:.2f}"),
    (RESULTS_MD, "inductive_bias_cpu_study.json", tracking,
     "relative scores {0:.2f}-{1:.2f} (linear oracle), slopes {2:.2f}-{3:.2f}; untrained GPT {4:.2f}"),
    (RESULTS_MD, "inductive_bias.json", lambda d: [r["scores"]["linear"] for r in d["rows"]],
     "GPT {0:.2f}, LSTM {1:.2f}, RNN {2:.2f}, untrained GPT {3:.2f}"),
    *[(RESULTS_MD, "extrapolation.json", at_16x("ratio", a), f"{label} {{}}")
      for a, label in (("softmax", "softmax"), ("lssar", "LSSAR"), ("lssa", "LSSA"), ("laser", "LASER"))],
    *[(RESULTS_MD, "passkey.json", at_16x("mean", a), f"{label} {{}}")
      for a, label in (("softmax", "softmax"), ("lssar", "LSSAR"), ("laser", "LASER"), ("sigmoid", "sigmoid"))],
    *[(EXPER_MD, "extrapolation.json", lambda d, a=a: extrapolation_row(d, a), "{}") for a in ATTENTIONS],
    *[(EXPER_MD, "passkey.json", lambda d, a=a: passkey_row(d, a), "{}") for a in ATTENTIONS],
    (RESULTS_MD, "probe_protocol.json", protocols, "orbitlaw {0}, reference {1}"),
    # the path (first seed)
    *[(page, PATH, path_departures("bins-in"), f"`bins-in` for none{words} ({{:.2%}}, {{:.2%}}, {{:.2%}} from Newton)")
      for page, words in ((README_, ""), (RESULTS_MD, " of them"))],
    *[(page, PATH, path_departures("whole"), "`whole` {:.2%}, {:.2%}, {:.2%}") for page in (README_, RESULTS_MD)],
    *[(page, PATH, lambda d: "held" if d["controls_passes"]["passed"] else "failed",
       "controls' pass rule **{}** (positive 3/3, no negative `newtonian`)") for page in (RESULTS_MD,)],
    *[(PATH_MD, PATH, path_cell(rung, a), "{:.2f}% [{:.2f}, {:.2f}] `{}`")
      for rung in PATH_RUNGS for a in ("softmax", "lssar", "laser")],
    (PATH_MD, PATH, lambda d: len(d["replicated"]), "The replication rule chose {} first-seed rows"),
    (README_, PATH, lambda d: [d["path_answer"][a]["by_distance"]["lost_at"]["departure"]
                               for a in ("softmax", "lssar", "laser")],
     "read by distance, lost at `budget` for all three: {:.2%}, {:.2%}, {:.2%} from Newton pooled over seeds"),
    (README_, PATH, lambda d: path_by_distance("bins-in")(d) + path_by_distance("positions")(d),
     "`bins-in` ({:.2%}, {:.2%}, {:.2%} pooled, after {:.2%}, {:.2%}, {:.2%} at rung 0)"),
    (RESULTS_MD, PATH, lambda d: [d["path_answer"][a]["by_distance"]["lost_at"]["departure"]
                                  for a in ("softmax", "lssar", "laser")] + path_by_distance("bins-in")(d),
     "the law is lost at `budget` for every attention, pooled {:.2%}, {:.2%}, {:.2%} from Newton, after `bins-in` at "
     "{:.2%}, {:.2%}, {:.2%}"),
    (PATH_MD, PATH, path_lost_by_distance,
     "{0:.2%} [{1:.2%}, {2:.2%}]\n  (softmax), {3:.2%} [{4:.2%}, {5:.2%}] (LSSAR), {6:.2%} [{7:.2%}, {8:.2%}] (LASER)"),
    (PATH_MD, PATH, lambda d: path_by_distance("positions")(d) + path_by_distance("bins-in")(d),
     "sits at {:.2%}, {:.2%} and {:.2%} from Newton\n  (softmax, LSSAR, LASER) and `bins-in` at {:.2%}, {:.2%} and "
     "{:.2%}"),
    *[(page, "path_reference_seed10.json", lambda d: ("failed" if not d["controls_passes"]["passed"] else "held",
                                                     d["controls_passes"]["positive"]), text)
      for page, text in ((PATH_MD, "pass rule **{0}** on this probe set: the\npositive control is `newtonian` in {1}"),
                         (RESULTS_MD, "controls' pass rule **{0}** (positive {1})"))],
    *[(page, PATH, path_newtonian("whole"), "Over 3 seeds `whole` is `newtonian` in {}, {}, {}")
      for page in (README_, RESULTS_MD)],
    (README_, PATH, path_newtonian("tokens"), "at the same budget in {}, {}, {}; neither"),
    (RESULTS_MD, PATH, path_newtonian("tokens"), "the anchor in {}, {}, {} |"),
    *[(PATH_MD, PATH, path_replicated(rung), f"| {label} |" + " {} ({:.2f}%, {:.2f}%, {:.2f}%) |" * 3)
      for rung, label in (("whole", "5 `whole`"), ("tokens", "`tokens` (anchor)"))],
    *[(page, PATH, lambda d: [x["newtonian"] for x in d["path_summary"] if x["rung"] == "positions"][::-1],
       "rung 0 `newtonian` in {}, {} and {} seeds") for page in (README_, RESULTS_MD)],
    (RESULTS_MD, "cli_startup.json", lambda d: (max(d["help_over_python_median"].values()),
                                                d["commands"]["orbitlaw simulate --preset vafa2025 --splits train=1000"]
                                                ["median"], d["commands"]['python -c "import torch"']["median"]),
     "every `--help` at most {0:.3f} s over `python -c pass` (target 0.3 s); a 1,000-sequence `simulate` {1:.2f} s "
     "(target 1.5 s); `import torch` alone {2:.2f} s"),
    # performance
    (README_, "quickstart.json", lambda d: d["total_minutes"], "`study-smoke/report.md`: {:.1f} minutes on 2 idle CPU"),
    (RESULTS_MD, "quickstart.json", lambda d: (d["total_minutes"], d["install_seconds"], d["study_seconds"],
                                               d["profile"]["by_kind"]["train"]["wall_seconds"],
                                               d["profile"]["by_kind"]["controls:train"]["wall_seconds"]),
     "{0:.1f} min in all: install {1:.1f} s, the `smoke` study {2:.1f} s; its slowest stages the three pretrainings "
     "({3:.1f} s) and the controls' ({4:.1f} s"),
    *[(page, "quickstart.json", lambda d: round(d["study_seconds"] / 60, 1), "| the study {:.1f} min on 2 idle CPU")
      for page in (README_, RUN_MD)],
    (RESULTS_MD, "quickstart.json", lambda d: (d["suite"]["suite_seconds"], d["suite"]["suite_seconds"] / 60,
                                               d["suite"]["exit_code"], d["suite"]["slowest"][0]["seconds"]),
     "| {0:.1f} s ({1:.1f} min), exit {2}; its slowest test the smoke study's fixture, {3:.1f} s"),
    (README_, "quickstart.json", lambda d: d["suite"]["suite_seconds"] / 60,
     "`.ci/run`; {:.1f} minutes on 2 idle\nCPU cores in a fresh clone"),
    (RESULTS_MD, "simulate.json", lambda d: (round(d["results"]["orbitlaw"]["seq_per_s"], -2),
                                             d["full_set_minutes_orbitlaw"], d["speedup_vs_rebound_whfast"]),
     "{0:,.0f} sequences/s; the 10M-sequence set in {1:.1f} min; REBOUND WHFast {2:.0f}x slower"),
    (BENCH_MD, "simulate.json", lambda d: round(d["results"]["orbitlaw"]["seq_per_s"], -2),
     "writes {:,.0f} sequences/s"),
    (RESULTS_MD, "train_throughput.json", lambda d: (d["tokens_per_s"]["softmax"], d["tokens_per_s"]["lssar"],
                                                     d["ratio_to_softmax"]["lssar"]),
     "softmax {0:,.0f} tokens/s, LSSAR {1:,.0f} ({2:.2f}x)"),
    (RESULTS_MD, "tiny_convergence.json", lambda d: (d["runs"]["fourier"]["val_loss"], d["runs"]["normal"]["val_loss"]),
     "validation loss {0:.2f} (Fourier init) against {1:.2f} (normal init)"),
    (RESULTS_MD, "probe_positions.json", lambda d: (d["speedup"], d["speedup_windows_per_sequence_25"]),
     "{0:.1f}x faster reading only the rows' windows, {1:.1f}x again at 25 windows a sequence"),
    (BENCH_MD, "probe_positions.json", lambda d: list(d["seconds_per_step"].values()),
     "takes {0:.3f} s with every window read, {1:.3f} s reading only"),
]


@pytest.mark.parametrize("page, name, value, template", NUMBERS,
                         ids=[f"{page}:{name}:{i}" for i, (page, name, _, _) in enumerate(NUMBERS)])
def test_quoted_numbers_match_their_result_files(page, name, value, template):
    got = value(result(name))
    expected = template.format(**got) if isinstance(got, dict) else (
        template.format(*got) if isinstance(got, (tuple, list)) else template.format(got))
    assert expected in text(ROOT / page), f"{page} should say {expected!r} (from benchmarks/results/{name})"


def test_the_docs_build_with_mkdocs_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)  # strict: any warning (a broken link or anchor, a page left out of the nav) raises
    assert (tmp_path / "site" / "index.html").exists()
