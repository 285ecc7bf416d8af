"""Reading a chain of rows by distance from Newton's law, not by a threshold on the verdict (docs/path.md).

A row's distance is its exact law's departure from Newton's form (LAW.json ``newton_departure_exact``: RMS of ln
of the law over the best fit of Newton's form, on the probe rows) with its 95% interval over systems
(``newton_departure_exact_ci95``), beside what the row resolves (``resolution.rms_ln``: a departure larger than
this is told apart from Newton with about 95% probability).

The reading rule (:data:`LOST_RULE`, written before any row was read by it): a rung's rows over its seeds are
pooled into an *envelope*, from the lowest lower end to the highest upper end of their intervals; a rung's
*effect* is the change of the mean departure from the rung before, with the interval that the two envelopes
allow (lowest of this rung minus highest of the one before, to highest minus lowest). The law is *lost* at the
first rung whose envelope lies wholly above the rung before's **and** above the largest resolution of its own
rows: every seed there is further from Newton than every seed before, and by more than the rows can resolve.
"""

from __future__ import annotations

import math

LOST_RULE = ("lost at the first rung whose pooled departure interval (every seed's 95% interval over systems, "
             "lowest to highest end) lies wholly above the previous rung's and above its own rows' largest "
             "resolution (resolution.rms_ln)")


def row_distance(row: dict) -> dict | None:
    """``{"departure", "ci95", "resolution"}`` of one row (None where its law has no departure)."""
    law = row.get("law") or {}
    d = law.get("newton_departure_exact")
    if d is None:
        return None
    ci = law.get("newton_departure_exact_ci95") or [d, d]
    return {"departure": float(d), "ci95": [float(ci[0]), float(ci[1])],
            "resolution": (law.get("resolution") or {}).get("rms_ln")}


def pooled(rows: list[dict]) -> dict | None:
    """One rung's rows over seeds: ``{"seeds", "departures", "mean", "envelope", "resolution"}`` (None if no row
    has a departure). ``resolution`` is the largest of the rows' (None where a row states none: such a rung is
    never read as lost)."""
    measured = [(r["seed"], row_distance(r)) for r in rows]
    measured = [(s, d) for s, d in measured if d is not None]
    if not measured:
        return None
    deps = [d["departure"] for _, d in measured]
    resolutions = [d["resolution"] for _, d in measured]
    return {"seeds": [s for s, _ in measured], "departures": deps, "mean": sum(deps) / len(deps),
            "envelope": [min(d["ci95"][0] for _, d in measured), max(d["ci95"][1] for _, d in measured)],
            "resolution": None if None in resolutions else max(resolutions)}


def effect(rung: dict, before: dict) -> dict:
    """The change of departure from the rung ``before`` to ``rung`` (both :func:`pooled`), with the interval the
    two envelopes allow."""
    return {"change": rung["mean"] - before["mean"],
            "ci95": [rung["envelope"][0] - before["envelope"][1], rung["envelope"][1] - before["envelope"][0]]}


def read_chain(by_rung: dict[str, list[dict]]) -> dict:
    """``{"rungs": [{"rung", **pooled, "effect"}], "lost_at": {"rung", "departure", "envelope", "resolution",
    "rung_before", "envelope_before"} or None, "rule"}`` for one attention's rungs in order (name -> its rows). A
    rung none of whose rows has a departure is left out, so "the rung before" is the last one measured
    (``rung_before`` names it)."""
    rungs, lost, before = [], None, None
    for name, rows in by_rung.items():
        here = pooled(rows)
        if here is None:
            continue
        entry = {"rung": name, **here, "effect": effect(here, before[1]) if before else None}
        rungs.append(entry)
        resolution = here["resolution"] if here["resolution"] is not None else math.inf
        if lost is None and before and entry["effect"]["ci95"][0] > 0 and here["envelope"][0] > resolution:
            lost = {"rung": name, "departure": here["mean"], "envelope": here["envelope"],
                    "resolution": here["resolution"], "rung_before": before[0],
                    "envelope_before": before[1]["envelope"]}
        before = (name, here)
    return {"rungs": rungs, "lost_at": lost, "rule": LOST_RULE}
