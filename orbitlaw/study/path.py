"""The path from the positive control to a GPT over the toolkit's tokens, one change per rung: where is
Newton's law lost, and does LSSAR keep it? (``orbitlaw run --preset path``; docs/path.md.)

Every rung is a model of :mod:`orbitlaw.study.controls` trained on the controls' data (``binary`` orbits on
a = 2-3 AU), probed, linearly probed and searched exactly as the controls' rows are, and judged by the study's
one verdict rule. Each rung changes one thing from the rung before it (:data:`RUNGS`), and every rung runs
with each attention of ``spec["attentions"]`` (softmax, LSSAR, LASER), rung 0 included, so that along each
attention's chain only the rung's own change differs:

0. ``positions``: the positive control (for softmax, the controls' W3-s<k> rows themselves): positions in
   AU in, the next position in AU out (MSE), windows of W = 3 steps ending at the step, the loss on the
   window's last prediction, 0.005 AU of input noise;
1. ``centres-in``: the inputs are those positions snapped to the centres of the tokeniser's bins (7000 bins over
   [-50, 50] AU, 0.0143 AU wide), still read in AU by the same linear embedding: what the bins' values cost;
2. ``bins-in``: the same bins read as ids, embedded as the toolkit's GPT embeds tokens (Fourier-initialised
   tables): what reading them through an embedding costs;
3. ``no-noise``: no input noise (the tokens are the orbit's bins);
4. ``bins-out``: the next position is predicted as a distribution over its bins, with cross-entropy;
5. ``budget``: the training budget of the whole-sequence rung (``path["whole_train"]``: its batch and steps),
   still on windows, so that the next rung changes the context alone;
6. ``whole``: whole sequences, the loss at every position, no windows.

Beside the chain, ``bins-in-untrained`` (softmax) is ``bins-in``'s model at its initialisation (one step at
learning rate 0, no noise, as the controls' ``W3-untrained``): a negative control at the bin-id inputs, whose
Fourier-initialised tables already map positions readably, so that a trained ``bins-in`` row counts as having
learned more than its inputs give only where it is closer to Newton than that untrained row
(:data:`UNTRAINED_RULE`; :func:`answer`'s ``untrained``).

Beside them, ``tokens`` (softmax: the controls' own ``tokens`` row) is the toolkit's ``tiny`` GPT on the
token sequences themselves: the anchor the path walks toward, differing from ``whole`` in more than one way
(width 128, rotary positions, its learning rate, the time-step token that opens a token sequence).

Why this order: the quantisation comes first because it is the change most likely to lose the law: the
bins' RMS error (0.0041 AU) is the size of the input noise that already blurs a W = 3 window's curvature
(at 0.02 AU the curvature blurs by up to 12%), so if tokens lose Newton, the loss should show at rungs 1-2
with the output and the context left as they were; it is split in two (the bins' centres, then their ids) so that
the quantisation and the embedding that reads it are told apart. The noise goes next, so that rung 3's inputs are the
tokens exactly. The output follows (rung 4: cross-entropy over bins can only say where the next position
falls to 0.0143 AU, coarser than the step-to-step change of the curvature term). The context changes last
because it changes what the probe reads (every position of a whole sequence, not a window ending at the
star), and its budget is split off first because a whole sequence costs 33 windows.

At the ``whole`` rung, ``spec["sizes"]`` trains each of its attentions at each width and training budget (a
multiple of the rung's steps), so that "more training or a larger model" is measured on the same rows.

Replication (the rule, fixed before any run): every row runs at the first training seed (softmax's rung 0,
the control, at all of ``controls["seeds"]``). Then, per attention, the two rows on either side of every
change of verdict along the rungs, and every row at the largest budget, run again at each other seed
(:func:`replication`). :func:`answer` reads the result by the rules of docs/path.md. Each row names its
``rung``, ``attention``, ``seed``, ``width``, ``budget``, ``steps``, ``training_tokens`` (positions read in
training) and ``m1_over_r2`` (whether the law is the LSSAR write-up's F = C m1 / r^2, i.e. the acceleration
C / r^2: the star's mass ignored). The negative controls (W1, W3-untrained) run too, so that the controls'
pass rule is applied to the study the path starts from.

Under ``--protocol reference`` (:func:`orbitlaw.study.presets.study_config`) only ``path["rungs"]`` run (the top
rungs: ``positions``, ``bins-in``, ``whole`` and the anchor; :func:`chosen_rungs`), without size rows, probed on
the reference's probe set (``two-body-exoplanet`` in the controls' shape) for the raw |F| by the reference's
probe and rule, so that the answer can be set beside Vafa et al.'s and the LSSAR write-up's (docs/path.md).
"""

from __future__ import annotations

import copy

from orbitlaw.study import distance

RUNGS = [
    {"name": "positions", "change": "the positive control: positions (AU) in, MSE on the next position, W = 3",
     "train": {}},
    {"name": "centres-in", "change": "inputs: positions snapped to the tokeniser's bin centres (0.0143 AU), still "
     "read in AU", "train": {"model_overrides": {"inputs": "centres"}}},
    {"name": "bins-in", "change": "inputs: the same bins read as ids through the embedding (Fourier-initialised "
     "tables) instead of their centres in AU",
     "train": {"model_overrides": {"inputs": "bins", "embed_init": "fourier"}}},
    {"name": "no-noise", "change": "no input noise (the tokens are the orbit's exact bins)",
     "train": {"input_noise": 0.0}},
    {"name": "bins-out", "change": "output: cross-entropy over the next position's bins instead of MSE",
     "train": {"model_overrides": {"outputs": "bins"}}},
    {"name": "budget", "change": "the whole-sequence rung's batch and steps, still on windows", "train": {}},
    {"name": "whole", "change": "context: whole sequences, the loss at every position, no windows",
     "train": {"chunk_steps": None, "window_end": "planet", "window_loss": "all"}},
]
"""The rungs in order; each ``train`` holds what changes from the rung before (merged into the previous rung's
training settings; ``model_overrides`` merge too). ``budget`` takes ``path["whole_train"]``."""

TOKENS = {"name": "tokens", "change": "the anchor: the toolkit's tiny GPT on the token sequences (the controls' "
          "tokens row; width 128, rotary positions, its own lr, the time-step token)"}
WHOLE = RUNGS.index(next(r for r in RUNGS if r["name"] == "whole"))
CONTROL_ATTENTION = "softmax"
"""The attention of the controls' own model: the path's rows with it at rung 0, and its anchor, are the controls'
rows (``W3-s<seed>``, ``tokens``), and the other attentions are read against it."""
NEGATIVES = ("W1", "W3-untrained")
UNTRAINED = "bins-in-untrained"
UNTRAINED_RULE = ("the trained bins-in rows learned more than their inputs give only where their pooled departure "
                  "interval lies wholly below the untrained bins-in row's 95% interval; else their distance from "
                  "Newton is no evidence that training on bin ids learned the law")
"""The negative at the bin-id inputs (written before its first run): how close to Newton the probe comes on
``bins-in``'s model at its initialisation."""


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
    (``path["whole_train"]``: the ``budget`` rung's batch and steps, :func:`with_steps`; a whole sequence
    holds 33 times a window's positions)."""
    train = {**controls["train"], "chunk_steps": controls["window"]}
    out = []
    for i, rung in enumerate(RUNGS):
        train = _merge(train, rung["train"])
        if rung["name"] == "budget":
            extra = dict(path.get("whole_train", {}))
            steps = extra.pop("max_steps", train["max_steps"])
            train = with_steps(_merge(train, extra), steps)
        out.append({"rung": rung["name"], "index": i, "change": rung["change"], "train": copy.deepcopy(train)})
    return out


def row_name(rung: str, attention: str, seed: int, width: int | None = None, budget: float | None = None) -> str:
    """``<rung>-<attention>[-w<width>-x<budget>]-s<seed>``; softmax's rung 0 keeps the controls' name
    ``W3-s<seed>``, and softmax's anchor theirs, ``tokens``."""
    if attention == CONTROL_ATTENTION and rung == "positions":
        return f"W3-s{seed}"
    size = f"-w{width}-x{budget:g}" if width is not None else ""
    return f"{rung}-{attention}{size}-s{seed}"


def chosen_rungs(path: dict) -> list[str]:
    """The rungs whose rows run: ``path["rungs"]`` (the reference protocol's top rungs, docs/path.md), or every rung,
    the anchor and :data:`UNTRAINED`; a one-line ValueError for a name that is none of them."""
    every = [r["name"] for r in RUNGS] + [TOKENS["name"], UNTRAINED]
    chosen = path.get("rungs", every)
    unknown = [name for name in chosen if name not in every]
    if unknown:
        raise ValueError(f"unknown path rung {', '.join(unknown)}: choose among {', '.join(every)}")
    return list(chosen)


def size_attentions(path: dict) -> list[str]:
    """The attentions the size rows train: the sizes' own, among the path's (``--attention`` narrows both)."""
    return [a for a in path.get("sizes", {}).get("attentions", []) if a in path["attentions"]]


def configurations(controls: dict, path: dict, seeds: list[int] | None = None) -> list[dict]:
    """Every path row at the given training ``seeds`` (None: the first seed; softmax's rung 0 at all of
    ``controls["seeds"]``), as :func:`orbitlaw.study.controls.configurations` gives its rows (``name``,
    ``window``, ``train``) plus ``attention``, ``rung``, ``rung_index``, ``change``, ``seed``, ``width`` and
    ``budget``; then the anchor ``tokens`` rows."""
    seeds = seeds if seeds is not None else controls["seeds"][:1]
    rows = []
    rungs = rung_settings(controls, path)
    chosen = chosen_rungs(path)
    for r in rungs:
        if r["rung"] not in chosen:
            continue
        for attention in path["attentions"]:
            control = attention == CONTROL_ATTENTION and r["rung"] == "positions"
            for seed in (controls["seeds"] if control and seeds == controls["seeds"][:1] else seeds):
                rows.append(_row(r, attention, seed))
    if UNTRAINED in chosen and CONTROL_ATTENTION in path["attentions"] and seeds == controls["seeds"][:1]:
        rows.append(_untrained(next(r for r in rungs if r["rung"] == "bins-in"), seeds[0]))
    whole = rungs[WHOLE]
    sizes = path.get("sizes", {})
    base_width = whole["train"]["model_overrides"].get("n_embd")
    for attention in size_attentions(path) if "whole" in chosen else []:  # the size rows are the whole rung's
        for width in sizes["widths"]:
            for budget in sizes["budgets"]:
                if (width, budget) == (base_width, 1):
                    continue  # the whole rung's own row is this cell
                for seed in seeds:
                    rows.append(_row(whole, attention, seed, width, budget))
    if controls.get("token_train") and TOKENS["name"] in chosen:
        for attention in path["attentions"]:
            for seed in seeds:
                name = "tokens" if attention == CONTROL_ATTENTION and seed == controls["seeds"][0] else \
                    f"tokens-{attention}-s{seed}"
                train = {**controls["token_train"], "seed": seed}
                rows.append({"name": name, "window": None, "train": train, "attention": attention, "rung": "tokens",
                             "rung_index": len(RUNGS), "change": TOKENS["change"], "seed": seed,
                             "width": None, "budget": None})
    return rows


def _untrained(rung: dict, seed: int) -> dict:
    """:data:`UNTRAINED`: ``rung``'s softmax model at its initialisation (one step at learning rate 0, no noise, as
    the controls' ``W3-untrained``), a negative control marked ``negative``."""
    row = _row(rung, CONTROL_ATTENTION, seed)
    row["train"].update(max_steps=1, lr=0.0, input_noise=0.0, checkpoint_every=1, eval_every=1, log_every=1)
    return {**row, "name": UNTRAINED, "rung": UNTRAINED, "negative": True,
            "change": f"negative control: {rung['rung']}'s model untrained (one step at learning rate 0)"}


def _row(rung: dict, attention: str, seed: int, width: int | None = None, budget: float | None = None) -> dict:
    train = copy.deepcopy(rung["train"])
    change = rung["change"]
    if width is not None:
        train["model_overrides"]["n_embd"] = width
        train = with_steps(train, max(1, round(train["max_steps"] * budget)))
        change = f"size: width {width}, {budget:g} x the whole rung's steps"
    return {"name": row_name(rung["rung"], attention, seed, width, budget), "window": train["chunk_steps"],
            "train": {**train, "seed": seed}, "attention": attention, "rung": rung["rung"],
            "rung_index": rung["index"], "change": change, "seed": seed,
            "width": train["model_overrides"].get("n_embd"), "budget": budget}


def _newtonian_share(rows: list[dict]) -> tuple[int, int]:
    return sum(bool(r["newtonian"]) for r in rows), len(rows)


def replication(rows: list[dict], path: dict) -> list[str]:
    """Names (at the first seed, the lowest) of the rows the replication rule runs again at every other seed:
    with ``path["replicate"] == "every-rung"`` (the path presets', so that the path is read by distance over seeds
    at every rung, :mod:`orbitlaw.study.distance`), every rung's row and the anchor's; else, per attention, both
    rows on either side of each change of verdict (``newtonian``) along the rungs (the anchor ``tokens`` last).
    Either way, every row at the largest budget."""
    first = min(r["seed"] for r in rows)
    chosen = []
    if path.get("replicate") == "every-rung":
        chosen = [r["name"] for r in sorted(rows, key=lambda r: r["rung_index"]) if not r["width_row"] and
                  not r.get("negative") and r["seed"] == first and r["attention"] in path["attentions"]]
    for attention in path["attentions"]:
        chain = sorted((r for r in rows if not r["width_row"] and not r.get("negative") and r["seed"] == first and
                        r["attention"] == attention), key=lambda r: r["rung_index"])
        for a, b in zip(chain, chain[1:], strict=False):
            if a["newtonian"] != b["newtonian"] and path.get("replicate") != "every-rung":
                chosen += [a["name"], b["name"]]
    budgets = path.get("sizes", {}).get("budgets")
    if budgets:
        chosen += [r["name"] for r in rows if r["width_row"] and r["budget"] == max(budgets) and r["seed"] == first]
    return list(dict.fromkeys(chosen))


def answer(rows: list[dict], path: dict) -> dict:
    """The reading rules of docs/path.md, applied to the rows (all seeds), per attention: ``by_distance`` (the main
    reading, :func:`orbitlaw.study.distance.read_chain` on the rungs: each rung's pooled departure from Newton, its
    effect, and ``lost_at`` by distance; ``anchor``: the ``tokens`` rows pooled alike); ``held_at_start`` (rung 0
    newtonian in at least half its seeds, ``start_newtonian`` k/n: else there is no law to lose); ``lost_at`` (the first
    rung newtonian in fewer than half its seeds after one newtonian in at least half; None if never), with the
    k/n of both; ``restored`` (a row at the largest budget newtonian in at least 2 of 3 seeds; None, not measured,
    where the attention has no size row at the largest budget); and, per attention other than softmax,
    ``differs_from_softmax`` (another ``lost_at``, or at some rung first-seed departure intervals that do not
    overlap). Softmax's reading has ``untrained`` too where :data:`UNTRAINED` ran (:data:`UNTRAINED_RULE`): that
    row's distance and whether the trained ``bins-in`` rows lie ``beyond`` it (closer to Newton)."""
    first = min(r["seed"] for r in rows)
    negatives = [r for r in rows if r.get("negative")]
    rows = [r for r in rows if not r.get("negative")]
    out = {}
    for attention in path["attentions"]:
        mine = [r for r in rows if r["attention"] == attention and not r["width_row"]]
        by_rung = {}
        for r in sorted(mine, key=lambda r: r["rung_index"]):
            by_rung.setdefault(r["rung"], []).append(r)
        lost, before = None, None
        for rung, rs in by_rung.items():
            k, n = _newtonian_share(rs)
            if before is not None and 2 * before[1] >= before[2] and 2 * k < n:
                lost = {"rung": rung, "newtonian": f"{k}/{n}", "rung_before": before[0],
                        "newtonian_before": f"{before[1]}/{before[2]}"}
                break
            before = (rung, k, n)
        budgets = path.get("sizes", {}).get("budgets")
        big = [r for r in rows if r["attention"] == attention and r["width_row"] and budgets and
               r["budget"] == max(budgets)]
        widths = sorted({r["width"] for r in big})
        shares = {w: _newtonian_share([r for r in big if r["width"] == w]) for w in widths}
        start = _newtonian_share(next(iter(by_rung.values()), []))
        chain = {rung: rs for rung, rs in by_rung.items() if rung != TOKENS["name"]}
        anchor = distance.pooled(by_rung.get(TOKENS["name"], []))
        out[attention] = {"by_distance": {**distance.read_chain(chain), "anchor": anchor},
                          "start_newtonian": "{}/{}".format(*start), "held_at_start": 2 * start[0] >= start[1] > 0,
                          "lost_at": lost,
                          "largest_budget_newtonian": {f"w{w}": f"{k}/{n}" for w, (k, n) in shares.items()}
                          if shares else None,
                          "restored": any(3 * k >= 2 * n and n >= 3 for k, n in shares.values()) if shares else None}
    untrained = next((r for r in negatives if r["name"] == UNTRAINED), None)
    if CONTROL_ATTENTION in out and untrained is not None:
        trained = [r for r in rows if r["attention"] == CONTROL_ATTENTION and r["rung"] == "bins-in"]
        out[CONTROL_ATTENTION]["untrained"] = _beyond_untrained(untrained, trained)
    if CONTROL_ATTENTION in out:
        soft = {r["rung"]: r for r in rows
                if r["attention"] == CONTROL_ATTENTION and r["seed"] == first and not r["width_row"]}
        for attention in out:
            if attention == CONTROL_ATTENTION:
                continue
            apart = []
            for r in rows:
                s = soft.get(r["rung"])
                if r["attention"] != attention or r["seed"] != first or r["width_row"] or s is None:
                    continue
                a, b = _interval(r), _interval(s)
                if a and b and (a[1] < b[0] or b[1] < a[0]):
                    apart.append(r["rung"])
            out[attention]["departure_apart_from_softmax_at"] = apart
            out[attention]["differs_from_softmax"] = bool(apart) or (
                (out[attention]["lost_at"] or {}).get("rung") != (out[CONTROL_ATTENTION]["lost_at"] or {}).get("rung"))
    return out


def _beyond_untrained(untrained: dict, trained: list[dict]) -> dict:
    """:data:`UNTRAINED_RULE` on the trained ``bins-in`` rows: ``{"row": the untrained row's distance, "bins_in":
    the trained rows pooled, "beyond": bool or None (not measured), "rule"}``."""
    neg, pool = distance.row_distance(untrained), distance.pooled(trained)
    beyond = None if neg is None or pool is None else pool["envelope"][1] < neg["ci95"][0]
    return {"row": neg, "bins_in": pool, "beyond": beyond, "rule": UNTRAINED_RULE}


def _interval(row: dict) -> tuple[float, float] | None:
    ci = (row.get("law") or {}).get("newton_departure_exact_ci95")
    return tuple(ci) if ci else None


def ignores_star_mass(law: dict | None, target: str) -> bool:
    """Whether a row's law is the LSSAR write-up's F = C m1 / r^2: Newton's inverse square without the star's
    mass (for the acceleration target, a = C / r^2)."""
    power = (law or {}).get("power_law")
    if not power:
        return False
    planet = 1 if target == "force-magnitude" else 0
    e = power["exponents"]
    return e.get("r") == -2 and e.get("m1", 0) == planet and e.get("m2", 0) == 0


def run_path(study, config: dict, workers: int, progress: bool, log_to: str = "none") -> tuple[list[dict], list[dict]]:
    """Run (or resume) every row of the path in ``study`` (under ``controls/``, beside the controls' own stages,
    whose data, positive-control rows and ``tokens`` row it shares); returns (the path's rows, the first seed's
    first, then the replications (:func:`replication`); the controls' rows the pass rule reads)."""
    from orbitlaw.study.controls import configurations as control_configurations
    from orbitlaw.study.controls import run_controls

    controls, path = config["controls"], config["path"]
    seeds = controls["seeds"]
    own = {c["name"] for c in control_configurations(controls)}
    first = configurations(controls, path)

    def run(confs: list[dict], also: tuple = ()) -> list[dict]:
        names = {c["name"] for c in confs} | set(also)
        return run_controls(study, controls, workers, progress, log_to, only=names,
                            extra=[c for c in confs if c["name"] not in own])

    ran = run(first, NEGATIVES)
    by_name = {r["name"]: r for r in ran}
    rows = _annotate([by_name[c["name"]] for c in first], first, study, controls)
    negatives = [by_name[n] for n in NEGATIVES]
    again = set(replication(rows, path))
    if again and len(seeds) > 1:
        done = {r["name"] for r in rows}
        more = [c for c in configurations(controls, path, seeds[1:])
                if _first_seed_name(c, seeds[0]) in again and c["name"] not in done]
        if more:
            rows += _annotate(run(more), more, study, controls)
    control_rows = [r for r in rows if r["attention"] == CONTROL_ATTENTION and r["rung"] == "positions"] + negatives
    return rows, control_rows


def _first_seed_name(conf: dict, first: int) -> str:
    """The name of ``conf``'s row at the first training seed (what :func:`replication` names)."""
    if conf["rung"] == "tokens":
        return "tokens" if conf["attention"] == CONTROL_ATTENTION else f"tokens-{conf['attention']}-s{first}"
    width = conf["width"] if conf["budget"] is not None else None
    return row_name(conf["rung"], conf["attention"], first, width, conf["budget"])


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
                   negative=conf.get("negative", False),
                   width=run_config["model"]["n_embd"], budget=conf["budget"], width_row=conf["budget"] is not None,
                   steps=conf["train"]["max_steps"], training_tokens=conf["train"]["max_steps"] * per_step,
                   change=conf["change"], m1_over_r2=ignores_star_mass(row["law"], target),
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
                    "seeds": [r["seed"] for r in rs], "newtonian": "{}/{}".format(*_newtonian_share(rs)),
                    "verdicts": [r["verdict"] for r in rs],
                    "departures": [(r["law"] or {}).get("newton_departure_exact") for r in rs],
                    "training_tokens": rs[0]["training_tokens"]})
    return out
