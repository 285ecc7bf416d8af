"""The path from the positive control to a GPT over the toolkit's tokens, one change per rung: where is
Newton's law lost, and does LSSAR keep it? (``orbitlaw run --preset path``; docs/path.md.)

Every rung is a model of :mod:`orbitlaw.study.controls` trained on the controls' data (``binary`` orbits on
a = 2-3 AU), probed, linearly probed and searched exactly as the controls' rows are, and judged by the study's
one verdict rule. Each rung changes one thing from the rung before it (:data:`RUNGS`):

0. ``positions``: the positive control itself (W3-s<k>): positions in AU in, the next position in AU out
   (MSE), windows of W = 3 steps ending at the step, the loss on the window's last prediction, 0.005 AU of
   input noise, softmax;
1. ``bins-in``: the inputs are the tokeniser's bin ids of those positions (7000 bins over [-50, 50] AU, 0.0143
   AU wide), embedded as the toolkit's GPT embeds tokens (Fourier-initialised tables);
2. ``no-noise``: no input noise (the toolkit's tokens are the exact bins of the simulated orbit);
3. ``bins-out``: the next position is predicted as a distribution over its bins, with cross-entropy;
4. ``whole``: whole sequences, the loss at every position, no windows: the toolkit's tokenised GPT, up to the
   time-step token that opens a token sequence.

Why this order: the quantisation comes first because it is the change most likely to lose the law: the
bins' RMS error (0.0041 AU) is the size of the input noise that already blurs a W = 3 window's curvature
(at 0.02 AU the curvature blurs by up to 12%), so if tokens lose Newton, the loss should show at rung 1
with the output and the context left as they were. The noise goes next, so that rung 2's inputs are the
toolkit's tokens exactly. The output follows (rung 3: cross-entropy over bins can only say where the next
position falls to 0.0143 AU, which is coarser than the step-to-step change of the curvature term). The
context changes last because it changes what the probe reads (every position of a whole sequence, not a
window ending at the star), and so is the step furthest from the control.

From rung 1 on, every rung runs with each attention of ``spec["attentions"]`` (softmax, LSSAR, LASER); rung 0
is softmax (the control). At the last rung, ``spec["sizes"]`` trains each budget attention at each width and
each training budget (a multiple of the rung's steps), so that "more training or a larger model" is measured
on the same rows.

Replication (the rule, fixed before any run): every row runs at the first training seed; rung 0 at all of
``spec["seeds"]`` (it is the control). Then, per attention, the two rows on either side of every change of
verdict along the rungs, and every row at the largest budget, run again at each other seed
(:func:`replication`). Each row names its ``rung``, ``attention``, ``seed``, ``width``, ``budget`` (training
steps, and ``training_tokens``: positions read in training) and ``m1_over_r2`` (whether the law is the LSSAR
write-up's F = C m1 / r^2, i.e. the acceleration C / r^2: the star's mass ignored).
"""

from __future__ import annotations

import copy

RUNGS = [
    {"name": "positions", "change": "the positive control: positions (AU) in, MSE on the next position, W = 3",
     "train": {}},
    {"name": "bins-in", "change": "inputs: the tokeniser's bin ids (0.0143 AU) instead of positions in AU",
     "train": {"model_overrides": {"inputs": "bins", "embed_init": "fourier"}}},
    {"name": "no-noise", "change": "no input noise (the tokens are the orbit's exact bins)",
     "train": {"input_noise": 0.0}},
    {"name": "bins-out", "change": "output: cross-entropy over the next position's bins instead of MSE",
     "train": {"model_overrides": {"outputs": "bins"}}},
    {"name": "whole", "change": "context: whole sequences, the loss at every position, no windows",
     "train": {"chunk_steps": None, "window_end": "planet", "window_loss": "all"}},
]
"""The rungs in order; each ``train`` holds what changes from the rung before (merged into the previous rung's
training settings; ``model_overrides`` merge too)."""


def _merge(train: dict, change: dict) -> dict:
    out = {**train, **{k: v for k, v in change.items() if k != "model_overrides"}}
    out["model_overrides"] = {**train.get("model_overrides", {}), **change.get("model_overrides", {})}
    return out


def with_steps(train: dict, steps: int) -> dict:
    """``train`` at ``steps`` training steps, with the schedule's settings that follow from them (warm-up,
    evaluation, checkpoints, logging) as the controls' preset sets them."""
    return {**train, "max_steps": steps, "warmup_steps": max(1, steps // 80), "eval_every": steps,
            "checkpoint_every": max(1, steps // 4), "log_every": max(1, steps // 20)}


def rung_settings(controls: dict, path: dict) -> list[dict]:
    """The training settings of every rung (cumulative), from the controls' spec and the path's
    (``path["whole_train"]``: the whole-sequence rung's batch and steps, :func:`with_steps`: a whole sequence
    holds 33 times a window's positions)."""
    train = {**controls["train"], "chunk_steps": controls["window"]}
    out = []
    for i, rung in enumerate(RUNGS):
        train = _merge(train, rung["train"])
        if rung["name"] == "whole":
            extra = dict(path.get("whole_train", {}))
            steps = extra.pop("max_steps", train["max_steps"])
            train = with_steps(_merge(train, extra), steps)
        out.append({"rung": rung["name"], "index": i, "train": copy.deepcopy(train)})
    return out


def row_name(rung: str, attention: str, seed: int, width: int | None = None, budget: float | None = None) -> str:
    """``<rung>-<attention>[-w<width>-x<budget>]-s<seed>``; rung 0 keeps the controls' name ``W3-s<seed>``."""
    if rung == "positions":
        return f"W3-s{seed}"
    size = f"-w{width}-x{budget:g}" if width is not None else ""
    return f"{rung}-{attention}{size}-s{seed}"


def configurations(controls: dict, path: dict, seeds: list[int] | None = None) -> list[dict]:
    """Every path row at the given training ``seeds`` (None: the first seed; rung 0 at all of
    ``controls["seeds"]``), as :func:`orbitlaw.study.controls.configurations` gives its rows (``name``,
    ``window``, ``train``) plus ``attention``, ``rung``, ``seed``, ``width`` and ``budget``."""
    seeds = seeds if seeds is not None else controls["seeds"][:1]
    rows = []
    rungs = rung_settings(controls, path)
    for r in rungs:
        attentions = ["softmax"] if r["rung"] == "positions" else path["attentions"]
        for attention in attentions:
            for seed in (controls["seeds"] if r["rung"] == "positions" else seeds):
                rows.append(_row(r, attention, seed))
    last = rungs[-1]
    sizes = path.get("sizes", {})
    base_width = last["train"]["model_overrides"].get("n_embd")
    for attention in sizes.get("attentions", []):
        for width in sizes["widths"]:
            for budget in sizes["budgets"]:
                if (width, budget) == (base_width, 1) and attention in path["attentions"]:
                    continue  # the last rung's own row is this cell
                for seed in seeds:
                    rows.append(_row(last, attention, seed, width, budget))
    return rows


def _row(rung: dict, attention: str, seed: int, width: int | None = None, budget: float | None = None) -> dict:
    train = copy.deepcopy(rung["train"])
    if width is not None:
        train["model_overrides"]["n_embd"] = width
        train = with_steps(train, max(1, round(train["max_steps"] * budget)))
    window = train["chunk_steps"]
    return {"name": row_name(rung["rung"], attention, seed, width, budget), "window": window,
            "train": {**train, "seed": seed}, "attention": attention, "rung": rung["rung"],
            "rung_index": rung["index"], "seed": seed,
            "width": train["model_overrides"].get("n_embd"), "budget": budget}


def replication(rows: list[dict], path: dict) -> list[str]:
    """Names (at the first seed) of the rows the replication rule runs again at every other seed: per attention,
    both rows on either side of each change of verdict (``newtonian``) along the rungs (rung 0, the softmax
    control, heads every attention's chain), and every row at the largest budget."""
    rung_rows = [r for r in rows if r["width_row"] is False]
    first = min(r["seed"] for r in rows)
    chosen = []
    for attention in path["attentions"]:
        chain = sorted((r for r in rung_rows if r["seed"] == first and
                        (r["attention"] == attention or r["rung"] == "positions")), key=lambda r: r["rung_index"])
        for a, b in zip(chain, chain[1:], strict=False):
            if a["newtonian"] != b["newtonian"]:
                chosen += [r["name"] for r in (a, b) if r["rung"] != "positions"]
    budgets = path.get("sizes", {}).get("budgets")
    if budgets:
        chosen += [r["name"] for r in rows if r["width_row"] and r["budget"] == max(budgets) and r["seed"] == first]
    return list(dict.fromkeys(chosen))


def ignores_star_mass(law: dict | None, target: str) -> bool:
    """Whether a row's law is the LSSAR write-up's F = C m1 / r^2: Newton's inverse square without the star's
    mass (for the acceleration target, a = C / r^2)."""
    power = (law or {}).get("power_law")
    if not power:
        return False
    planet = 1 if target == "force-magnitude" else 0
    e = power["exponents"]
    return e.get("r") == -2 and e.get("m1", 0) == planet and e.get("m2", 0) == 0


def run_path(study, config: dict, workers: int, progress: bool, log_to: str = "none") -> list[dict]:
    """Run (or resume) every row of the path in ``study`` (under ``controls/``, beside the controls' own stages,
    whose data and positive-control rows it shares); returns the rows, the first seed's first, then the
    replications (:func:`replication`)."""
    from orbitlaw.study.controls import run_controls

    controls, path = config["controls"], config["path"]
    seeds = controls["seeds"]
    first = configurations(controls, path, seeds[:1])
    rows = _annotate(run_controls(study, controls, workers, progress, log_to, only={c["name"] for c in first},
                                  extra=[c for c in first if c["rung"] != "positions"]), first, study, controls)
    again = set(replication(rows, path))
    if again and len(seeds) > 1:
        more = [c for c in configurations(controls, path, seeds[1:]) if c["rung"] != "positions"
                and row_name(c["rung"], c["attention"], seeds[0], c["width"] if c["budget"] else None,
                             c["budget"]) in again]
        rows += _annotate(run_controls(study, controls, workers, progress, log_to, only={c["name"] for c in more},
                                       extra=more), more, study, controls)
    return rows


def _annotate(rows: list[dict], confs: list[dict], study, controls: dict) -> list[dict]:
    """Each control row with its rung, attention, seed, width, budget, training tokens and the LSSAR write-up's
    law flag."""
    import json

    by_name = {c["name"]: c for c in confs}
    target = controls.get("target", "force-magnitude")
    for row in rows:
        conf = by_name[row["name"]]
        run_config = json.loads((study.path("controls", "runs", row["name"]) / "config.json").read_text())
        per_step = conf["train"]["batch_size"] * (run_config["model"].get("chunk") or run_config["context"])
        row.update(rung=conf["rung"], rung_index=conf["rung_index"], attention=conf["attention"], seed=conf["seed"],
                   width=conf["width"], budget=conf["budget"], width_row=conf["budget"] is not None,
                   steps=conf["train"]["max_steps"], training_tokens=conf["train"]["max_steps"] * per_step,
                   change=RUNGS[conf["rung_index"]]["change"],
                   m1_over_r2=ignores_star_mass(row["law"], target),
                   m1_over_r2_frozen=ignores_star_mass(row.get("law_frozen"), target))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per (rung or size row, attention): the rows' seeds, ``newtonian`` k/n, and the exact law's departures."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["rung_index"], r["rung"], r["attention"], r["width"] if r["width_row"] else None, r["budget"])
        groups.setdefault(key, []).append(r)
    out = []
    for (index, rung, attention, width, budget), rs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], kv[0][3] or 0, kv[0][4] or 0, kv[0][2])):
        out.append({"rung": rung, "rung_index": index, "attention": attention, "width": width, "budget": budget,
                    "seeds": [r["seed"] for r in rs], "newtonian": f"{sum(r['newtonian'] for r in rs)}/{len(rs)}",
                    "verdicts": [r["verdict"] for r in rs],
                    "departures": [(r["law"] or {}).get("newton_departure_exact") for r in rs],
                    "training_tokens": rs[0]["training_tokens"]})
    return out
