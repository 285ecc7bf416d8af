"""``STUDY/report.md``: the study's results section, with its figures, written from results.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from orbitlaw.provenance import write_text_atomic
from orbitlaw.study.presets import study_preset


def _num(x, fmt=".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def _law_cell(law: dict | None) -> tuple[str, str]:
    """(recovered law, Newtonian k/n seeds) for a table row."""
    if not law or "expression" not in law:
        return (f"not run: {law.get('reason', '')}" if law else "—"), "—"
    latex = law.get("expression_latex")
    if latex and len(latex) <= 120:
        expr = f"${latex}$"
    else:
        text = law["expression"]
        expr = f"`{text[:57] + '...' if len(text) > 60 else text}`"
    grade = law.get("verdict", "newtonian" if law["newtonian"] else "—")
    verdict = f"**{grade}**" if law["newtonian"] else grade
    rule = f"; {rule_text(law['rule'])}" if law.get("rule") else ""
    power = law.get("power") or {}
    if power and not power.get("resolved") and power.get("units_needed"):
        rule += f"; resolves {power['interval_rms_ln']:.1%}, about {power['units_needed']:,} {power['unit']} needed"
    return expr, f"{verdict} ({law['newtonian_seeds']}/{law['seeds']} seeds Newtonian{rule})"


def rule_text(rule: dict) -> str:
    """The rule a verdict was decided by, as its table cell states it: e.g. ``|a| ±2% se``."""
    quantity = "\\|a\\|" if rule.get("quantity") == "acceleration" else "\\|F\\|"
    return f"{quantity} ±{rule['precision']:.0%} {rule['selection']}"


def departure_cell(law: dict | None) -> str:
    """The exact law's departure from Newton's form (RMS of ln) with its 95% interval over systems."""
    d = (law or {}).get("newton_departure_exact")
    if d is None:
        return "—"
    ci = law.get("newton_departure_exact_ci95")
    return f"{d:.1%}" + (f" [{ci[0]:.1%}, {ci[1]:.1%}]" if ci else "")


def _rel(study, path: Path) -> str:
    return os.path.relpath(path, study.out)


def figures(study, results: dict) -> dict[str, str]:
    """Draw the study's figures into STUDY/figures; returns name -> path relative to STUDY."""
    from orbitlaw import orbits
    from orbitlaw.models.evaluate import load_run
    from orbitlaw.study import figures as fig

    out = study.path("figures")
    out.mkdir(parents=True, exist_ok=True)
    made = {}
    if results.get("controls"):
        made.update(fig.plot_controls(results["controls"], out / "controls_r2.png", out / "controls_forces.png"))
    if results.get("path"):
        rule = results["config"]["verdict_rule"]
        made["path"] = fig.plot_path(results["path"], out / "path.png", rule.get("tolerance"))
    if not results["models"]:
        return {k: _rel(study, Path(v)) for k, v in made.items()}
    attentions = [m["attention"] for m in results["models"]]
    runs = {a: study.path("runs", a) for a in attentions}
    made["loss_curves"] = fig.plot_loss_curves(runs, out / "loss_curves.png")
    evals = {m["attention"]: json.loads((runs[m["attention"]] / "eval.json").read_text())
             for m in results["models"] if m["extrapolation"]}
    if evals:
        made["extrapolation"] = fig.plot_extrapolation(evals, out / "extrapolation.png")
    gpts = [m["attention"] for m in results["models"] if m.get("arch", "gpt") == "gpt"]  # baselines have none
    models = {a: load_run(runs[a])[0] for a in gpts}
    if models:
        context = min(m.config.block_size for m in models.values())
        val = orbits.load_dataset(study.path("data", "pretrain"))["val"]
        n = results["config"]["attention_figure"]["sequences"]
        tokens = np.asarray(val.tokens[:n, :context], dtype=np.int64)
        made["attention_maps"], made["attention_entropy"] = fig.plot_attention(
            models, tokens, out / "attention_maps.png", out / "attention_entropy.png")
    for a in attentions:
        for kind, path in (("inductive_bias", study.path("inductive_bias", a, "inductive_bias.png")),
                           ("rollout", study.path("rollouts", a, "rollout.png"))):
            if path.exists():
                made[f"{kind}_{a}"] = path
        arrows = study.path("solar", a, "force_arrows.png")
        if arrows.exists():
            made[f"force_arrows_{a}"] = arrows
        pareto = study.path("laws", a, "LAW.pareto.png")
        if pareto.exists():
            made[f"pareto_{a}"] = pareto
    pareto = study.path("laws", "oracle-knn", "LAW.pareto.png")
    if pareto.exists():
        made["pareto_oracle-knn"] = pareto
    return {k: _rel(study, Path(v)) for k, v in made.items()}


def _inductive_bias_rows(models: list[dict]) -> list[str]:
    """The inductive-bias probe and the rollout of every model (the reference's yardsticks)."""
    rows = [m for m in models if m.get("inductive_bias") or m.get("rollout")]
    if not rows:
        return []
    lines = ["", "**Inductive bias and rollouts.** The inductive-bias score is the mean gap between the "
             "distances of the fine-tuned model's extrapolations and those of an oracle on the true state "
             "(0: the oracle's inductive bias; `orbitlaw probe --inductive-bias`). The rollout error is the mean "
             "distance (AU) between the model's own generated orbit and the true one after a prompt, beside "
             "every body staying where the prompt left it (repeat-last).", "",
             "| model | arch | inductive bias vs linear oracle | vs MLP oracle | rollout error (AU) "
             "| repeat-last (AU) |",
             "|---|---|---|---|---|---|"]
    for m in rows:
        ib = (m.get("inductive_bias") or {}).get("scores", {})
        ro = m.get("rollout") or {}
        lines.append(f"| {m['attention']} | {m.get('arch', 'gpt')} | {_num(ib.get('linear'))} | "
                     f"{_num(ib.get('mlp'))} | {_num(ro.get('mean_position_error_au'))} | "
                     f"{_num(ro.get('mean_repeat_last_error_au'))} |")
    return lines


def discussion(results: dict) -> str:
    """An honest paragraph built from the numbers: what they do and do not show at this scale."""
    cfg = results["config"]
    models = results["models"]
    preset = cfg["preset"]
    n_train = cfg["pretrain_data"]["splits"]["train"]
    steps, batch = cfg["train"]["max_steps"], cfg["train"]["batch_size"]
    parts = [f"These models ({cfg['train']['preset']} GPTs, {steps} steps of {batch} sequences on {n_train:,} "
             f"`{cfg['pretrain_data']['preset']}` sequences) are far from the reference's 108.5M-parameter GPT "
             "trained on 10M sequences, so nothing here says what a large model learns."]
    if study_preset(preset).pipeline_check:
        parts.append(f"This is the `{preset}` preset: every stage runs, but the numbers only show that the pipeline "
                     "works, not anything about the physics.")
    judged = [m for m in models if m["law"] and "expression" in m["law"]]
    newtonian = [m["attention"] for m in judged if m["law"]["newtonian"]]
    if len(judged) < len(models):
        parts.append("The symbolic regression did not run for "
                     + ", ".join(m["attention"] for m in models if m not in judged) + " (see results.json).")
    if newtonian:
        parts.append(f"The symbolic regression of the force probe's predictions came out Newtonian for "
                     f"{', '.join(newtonian)}: those probes carry the inverse-square law in their form.")
    elif judged:
        parts.append("For no model did the symbolic regression of the force probe's predictions come out as "
                     "Newton's law: the fine-tuned models predict forces that follow some other expression.")
    oracle = results["oracle"]["law"] or {}
    if oracle.get("newtonian"):
        parts.append("The k-nearest-neighbour oracle on the true state did come out Newtonian through the same "
                     "path, so the symbolic regression can find the law from predictions of this quality and "
                     "quantity; the models' failure is theirs.")
    else:
        parts.append("The k-nearest-neighbour oracle on the true state did not come out Newtonian either, so at "
                     "this number of labelled steps the symbolic regression's verdict cannot separate the models "
                     "from a lookup of nearby states; more probe data is needed for that.")
    r2 = [(m["attention"], m["probe_r2_log"]) for m in models if m["probe_r2_log"] is not None]
    if r2:
        best = max(r2, key=lambda x: x[1])
        low = min(v for _, v in r2)
        spread = (f"is {best[1]:.3f}" if f"{low:.3f}" == f"{best[1]:.3f}" else
                  f"ranges from {low:.3f} to {best[1]:.3f} ({best[0]})")
        parts.append(f"The probes' held-out R² of ln|F| {spread}, against "
                     f"{_num(results['oracle']['probe_r2_log'])} for the oracle.")
    ext = {m["attention"]: m["extrapolation"] for m in models if m["extrapolation"].get("16")}
    if len(ext) >= 2:
        ratio = {a: e["16"] / e["1"] for a, e in ext.items()}
        best = min(ratio, key=ratio.get)
        parts.append(f"At 16x the training context the loss grows least for {best} "
                     f"({ratio[best]:.2f}x its loss at 1x; "
                     + ", ".join(f"{a} {r:.2f}x" for a, r in ratio.items() if a != best)
                     + "), one seed each, so differences of a few percent are not significant.")
    llm = results.get("llm") or {}
    control = results.get("llm_control")
    if llm and control and "expression" in control:
        parts.append("For the LLM baselines scored from the reference's recorded answers, "
                     + ("the symbolic regression of the true forces at the same steps is Newtonian, so their "
                        "verdicts are meaningful." if control["newtonian"] else
                        "the control (symbolic regression of the true forces at the same steps) is not Newtonian, "
                        "so with so few systems their verdicts mean little."))
    return " ".join(parts)


def _protocol_paragraph(protocol: str, notes: list[str]) -> str:
    if protocol == "reference":
        text = ("Protocol `reference` (Vafa et al. 2025): force probes on the raw |F| with the per-sequence loss "
                "and the reference label layout; symbolic regression per galaxy with three restarts, each choosing "
                "by the PySR score, the galaxy keeping the highest-scoring restart, epsilon-insensitive L1 loss.")
    else:
        text = ("Protocol `orbitlaw` (the toolkit's defaults; `--protocol reference` runs the reference's): force "
                "probes on a log-scaled |F| with a global masked mean; symbolic regression with a log-space error, "
                "a power-law screen and selection on held-out rows.")
    if notes:
        text += " At this preset's scale the study departs from the reference in: " + "; ".join(notes) + "."
    return text


def _exponents(law: dict | None) -> str:
    fitted = (law or {}).get("fitted_exponents")
    if not fitted or not {"r", "m1", "m2"} <= set(fitted):
        return "–"
    return ", ".join(f"{fitted[k]:.2f}" for k in ("r", "m1", "m2"))


def controls_section(controls: list[dict]) -> list[str]:
    """The report's controls table and what it says (orbitlaw.study.controls)."""
    from orbitlaw.study.controls import target_text

    symbol, unit, newton = target_text(controls[0] if controls else {})
    what = ("the planet's acceleration |a| = |F|/m1 (AU/yr²), which predicting the planet's next position needs "
            "(Newton: G·m2/r², no planet mass)" if symbol == "|a|" else f"the force {symbol} ({unit})")
    cell = symbol.replace("|", "\\|")
    lines = ["## Controls: can the probe see Newton when it is there?", "",
             "Regression GPTs on `binary` orbits (both masses drawn per system, so the force's variables show only "
             "in the dynamics), read W steps at a time, through the same probe and symbolic regression; beside "
             f"them the oracles. W: steps the model (or oracle) reads; probe R²: the fine-tuned probe of {what} on "
             "held-out systems; linear R²: the best layer of the frozen model (held out by system); exponents: the "
             f"least-squares power law of the probe's predictions in r, m1, m2 (Newton: {newton}; a readout that "
             "carries a variable only in part shrinks its exponent toward 0).", "",
             f"| configuration | W | probe R² ({cell}) | probe R² (ln{cell}) | linear R² (\\|F\\|) | "
             "linear R² (ln\\|F\\|) | linear R² (acceleration) | linear R² (ln\\|a\\|) | exponents (r, m1, m2) | "
             "recovered law | verdict (seeds Newtonian; rule) | exact law from Newton [95%] | "
             "frozen state: verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in controls:
        law, newton = _law_cell(c["law"])
        name = f"*{c['name']}*" if c["kind"] == "oracle" else c["name"]
        lines.append(f"| {name} | {c['window'] or 'all'} | {_num(c['probe_r2'])} | {_num(c['probe_r2_log'])} | "
                     f"{_num(c['linear_probe_r2'])} | {_num(c['linear_probe_r2_log'])} | "
                     f"{_num(c['linear_probe_r2_accel'])} | {_num(c.get('linear_probe_r2_log_accel'))} | "
                     f"{_exponents(c['law'])} | {law} | {newton} | {departure_cell(c['law'])} | "
                     f"{_law_cell(c.get('law_frozen'))[1]} |")
    positive = [c for c in controls if c["kind"] == "model" and c["name"].startswith("W") and "-s" in c["name"]]
    negative = [c for c in controls if c["name"] == "W1" or c["name"].endswith("untrained")]
    k = sum(c["newtonian"] for c in positive)
    text = (f"The positive control came out Newtonian for {k}/{len(positive)} training seeds; the negative controls "
            + ("(W = 1, untrained) did not." if not any(c["newtonian"] for c in negative) else
               "(W = 1 or untrained) did too, so this probe can find the law where the model cannot hold it."))
    if k == 0:
        text += (" Until a positive control comes out Newtonian, a model's \"not Newtonian\" cannot be told from "
                 "\"the probe cannot see it\".")
    return lines + ["", text, ""]


def path_section(rows: list[dict], summary: list[dict], answer: dict | None = None,
                 passes: dict | None = None) -> list[str]:
    """The report's path table (orbitlaw.study.path): one line per row, then k/n per rung and attention, then the
    answer by the reading rules of docs/path.md and the controls' pass rule on the study."""
    from orbitlaw.study.controls import target_text

    symbol = target_text(rows[0])[0] if rows else "|a|"
    escaped = symbol.replace("|", "\\|")
    here = " (here the acceleration C/r², the star's mass ignored)" if symbol == "|a|" else " (the star's mass ignored)"
    lines = ["## The path: from the positive control to a GPT over the toolkit's tokens", "",
             "Each rung changes one thing from the rung before (the change is in its row); every row is trained on "
             "the controls' data and probed, searched and judged as the controls' rows are. Departure: the exact "
             "law's RMS of ln from Newton's form, with its 95% interval over systems; m1/r²: whether the law is "
             f"the LSSAR write-up's F ∝ m1/r²{here}.", "",
             f"| row | rung: change | attention | width | steps | training tokens | val loss | probe R² "
             f"(ln{escaped}) | "
             "exponents (r, m1, m2) | verdict (seeds Newtonian; rule) | exact law from Newton [95%] | m1/r² | "
             "frozen state: verdict |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        _, verdict = _law_cell(r["law"])
        lines.append(f"| {r['name']} | {r['rung']}: {r['change']} | {r['attention']} | {r['width']} | {r['steps']} | "
                     f"{r['training_tokens']:,} | {_num(r['val_loss'])} | {_num(r['probe_r2_log'])} | "
                     f"{_exponents(r['law'])} | {verdict} | {departure_cell(r['law'])} | "
                     f"{'yes' if r['m1_over_r2'] else 'no'} | {_law_cell(r.get('law_frozen'))[1]} |")
    lines += ["", "| rung | attention | width | budget | seeds | newtonian (k/n) | verdicts | departures |",
              "|---|---|---|---|---|---|---|---|"]
    for g in summary:
        deps = ", ".join("—" if d is None else f"{d:.1%}" for d in g["departures"])
        lines.append(f"| {g['rung']} | {g['attention']} | {g['width'] or '—'} | {g['budget'] or '—'} | "
                     f"{', '.join(map(str, g['seeds']))} | {g['newtonian']} | {', '.join(map(str, g['verdicts']))} | "
                     f"{deps} |")
    lines.append("")
    if passes is not None:
        wrong = ", ".join(passes["negatives_newtonian"]) or "none"
        lines += [f"The controls' pass rule on this study: {'held' if passes['passed'] else 'failed'} (positive "
                  f"{passes['positive']}; negatives `newtonian`: {wrong}).", ""]
    if answer:
        lines += distance_lines(answer)
    for attention, a in (answer or {}).items():
        lost = a["lost_at"]
        far = (a.get("by_distance") or {}).get("lost_at")
        lines += [f"**{attention}**, by distance: " + (
            f"lost at `{far['rung']}` ({far['departure']:.1%} from Newton, pooled [{far['envelope'][0]:.1%}, "
            f"{far['envelope'][1]:.1%}] against `{far['rung_before']}`'s [{far['envelope_before'][0]:.1%}, "
            f"{far['envelope_before'][1]:.1%}])." if far else
            "no rung is further from Newton than the one before by more than its rows resolve."), ""]
        neg = a.get("untrained")
        if neg and neg["row"] and neg["bins_in"]:
            lo, hi = neg["row"]["ci95"]
            env = neg["bins_in"]["envelope"]
            lines += [f"**{attention}**, against the untrained negative at `bins-in` ({neg['rule']}): untrained "
                      f"{neg['row']['departure']:.1%} [{lo:.1%}, {hi:.1%}], trained `bins-in` pooled [{env[0]:.1%}, "
                      f"{env[1]:.1%}]: " + ("beyond it." if neg["beyond"] else "not beyond it."), ""]
        if not a["held_at_start"]:
            text = (f"**{attention}**: rung 0 is `newtonian` in {a['start_newtonian']} seeds, so there is no law to "
                    "lose along the rungs")
        elif lost:
            text = (f"**{attention}**: the law is lost at `{lost['rung']}` ({lost['newtonian']} seeds `newtonian`; "
                    f"`{lost['rung_before']}` {lost['newtonian_before']})")
        else:
            text = f"**{attention}**: the law is kept at every rung"
        if a["largest_budget_newtonian"]:
            big = ", ".join(f"{w} {k}" for w, k in a["largest_budget_newtonian"].items())
            text += f"; at the largest budget {big}" + (" (restored)" if a["restored"] else "")
        if "differs_from_softmax" in a:
            text += f"; differs from softmax: {'yes' if a['differs_from_softmax'] else 'no'}"
            if a["departure_apart_from_softmax_at"]:
                text += f" (departure intervals apart at {', '.join(a['departure_apart_from_softmax_at'])})"
        lines += [text + ".", ""]
    return lines


def distance_lines(answer: dict) -> list[str]:
    """The path read by distance (:mod:`orbitlaw.study.distance`): per attention and rung, the pooled departure
    from Newton over seeds with its interval, the rows' resolution and the rung's effect."""
    from orbitlaw.study.distance import LOST_RULE

    lines = [f"Read by distance (the main reading; {LOST_RULE}):", "",
             "| attention | rung | seeds | departure from Newton (mean) | pooled [95%] | resolution | "
             "effect of the rung [95%] |", "|---|---|---|---|---|---|---|"]
    for attention, a in answer.items():
        chain = a.get("by_distance") or {}
        rungs = chain.get("rungs", []) + ([{"rung": "tokens (anchor)", **chain["anchor"], "effect": None}]
                                          if chain.get("anchor") else [])
        for g in rungs:
            e = g["effect"]
            res = "—" if g["resolution"] is None else f"{g['resolution']:.1%}"
            lines.append(f"| {attention} | {g['rung']} | {', '.join(map(str, g['seeds']))} | {g['mean']:.2%} | "
                         f"[{g['envelope'][0]:.2%}, {g['envelope'][1]:.2%}] | {res} | "
                         + ("—" if e is None else f"{e['change']:+.2%} [{e['ci95'][0]:+.2%}, {e['ci95'][1]:+.2%}]")
                         + " |")
    return lines + [""]


def write_report(study, results: dict) -> dict[str, str]:
    """Write STUDY/report.md (and its figures); returns the figure paths relative to STUDY."""
    made = figures(study, results)
    cfg = results["config"]
    protocol = results.get("protocol", cfg.get("protocol", "orbitlaw"))
    lines = [f"# orbitlaw study: `{cfg['preset']}`, protocol `{protocol}`", "",
             f"Code version `{results['code_version']}`; seeds {results['seeds']}. Units: AU, yr, M☉; forces in "
             "M☉·AU/yr², accelerations in AU/yr² (G = 4π² = 39.478).", "",
             _protocol_paragraph(protocol, results.get("notes", cfg.get("notes", []))), ""]
    if results.get("controls"):
        lines += controls_section(results["controls"])
    if results.get("path"):
        lines += path_section(results["path"], results["path_summary"], results.get("path_answer"),
                              results.get("controls_passes"))
    if not results["models"]:
        return _write(study, lines, made)
    lines += ["## Models", "",
             "| attention | val loss | loss @8x | loss @16x | probe R² (\\|F\\|) | probe R² (ln\\|F\\|) | "
             "recovered law | verdict (seeds Newtonian; rule) | exact law from Newton [95%] | "
             "as acceleration F/m1: verdict (rule) | frozen state: verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in results["models"]:
        law, newton = _law_cell(m["law"])
        ext = m["extrapolation"]
        lines.append(f"| {m['attention']} | {_num(m['val_loss'])} | {_num(ext.get('8'))} | {_num(ext.get('16'))} | "
                     f"{_num(m['probe_r2'])} | {_num(m['probe_r2_log'])} | {law} | {newton} | "
                     f"{departure_cell(m['law'])} | {_law_cell((m['law'] or {}).get('acceleration'))[1]} | "
                     f"{_law_cell(m.get('law_frozen'))[1]} |")
    o = results["oracle"]
    law, newton = _law_cell(o["law"])
    lines.append(f"| *kNN oracle (true state)* | — | — | — | {_num(o['probe_r2'])} | {_num(o['probe_r2_log'])} | "
                 f"{law} | {newton} | {departure_cell(o['law'])} | "
                 f"{_law_cell((o['law'] or {}).get('acceleration'))[1]} | — |")
    lines += _inductive_bias_rows(results["models"])
    lines += ["", "Probe R² is on held-out, unlabelled planet steps; the law is the symbolic regression "
              "(Operon) of the probe's predictions on the steps nearest to training states, refitted on all of "
              "them. Every verdict here, the controls' and the LLM answers' included, is decided by one rule, stated "
              "in its cell (quantity, precision as an RMS of ln, model selection). The verdict: `newtonian` is "
              "C·m1·m2/r² (C·m2/r² for an acceleration) chosen by a strict majority of the seeds at that precision, "
              "with positive evidence: the free power-law fit's departure from Newton's form and the constant lie "
              "within the precision of Newton's and 4π² over their 95% intervals over systems, so does the exact "
              "law's departure, and the rows resolve a departure of twice the precision; `unresolved` is a power "
              "law the rows neither tell apart from Newton's nor show within the precision (LAW.json says how many "
              "systems would); `power-law` also takes a law of Newton's form whose numbers are told apart; "
              "`inverse-square-planet-mass` is C·m1/r² (the LSSAR write-up's \"F ∝ m1/r²\", Newton's law only "
              "where the star mass is constant); `power-law` and `not-a-power-law` say what else came out; "
              "`inconclusive` means too few rows, seeds that did not agree, an exponent the rows cannot pin down, "
              "or a law no better than a constant. (k/n): the seeds whose own law has Newton's form. \"Exact law from "
              "Newton\": the law the seeds choose with no precision, as an RMS of ln from the best fit of Newton's "
              "form, with its 95% interval over systems. \"Frozen state\": the same search and rule on the ridge "
              "readout of ln|F| from the frozen model's best layer (nothing of the model trained to the force).", ""]
    if results.get("llm"):
        lines += ["## LLM baselines", "", "| model | systems parsed | median R² (all) | median R² (held-out) | "
                  "recovered law | verdict (seeds Newtonian) |", "|---|---|---|---|---|---|"]
        for name, m in results["llm"].items():
            law, newton = _law_cell(m.get("law"))
            lines.append(f"| {name} | {m.get('parsed')}/{m.get('systems')} | {_num(m.get('median_r2_all'))} | "
                         f"{_num(m.get('median_r2_heldout'))} | {law} | {newton} |")
        law, newton = _law_cell(results.get("llm_control"))
        lines.append(f"| *true forces (control)* | — | — | — | {law} | {newton} |")
        lines.append("")
    lines += ["## Figures", ""]
    captions = {"loss_curves": "Pretraining loss", "extrapolation": "Loss at multiples of the training context",
                "attention_maps": "Attention maps (head average, last layer)",
                "attention_entropy": "Attention entropy vs position",
                "controls_r2": "Controls: held-out R² of each probe by configuration",
                "controls_forces": "Controls: predicted vs true probe target on held-out systems",
                "path": "The path: the exact law's departure from Newton along the rungs and against training tokens"}
    for name, path in made.items():
        kind, _, who = name.rpartition("_")
        caption = captions.get(name) or {
            "force_arrows": f"Solar System force vectors, true (left) vs predicted (right): {who}",
            "pareto": f"Symbolic regression, Pareto fronts per seed: {who}"}.get(kind, name)
        lines += [f"**{caption}**", "", f"![{name}]({path})", ""]
    lines += ["## What this does and does not show", "", discussion(results), ""]
    return _write(study, lines, made)


def _write(study, lines: list[str], made: dict) -> dict[str, str]:
    if not any(line == "## Figures" for line in lines):
        lines += ["## Figures", ""] + [f"![{name}]({path})\n" for name, path in made.items()]
    path = study.path("report.md")
    write_text_atomic(path, "\n".join(lines))
    return made
