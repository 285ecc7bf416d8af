"""``run_study``: the study from nothing to ``STUDY/report.md`` and ``STUDY/results.json``."""

from __future__ import annotations

import json
from pathlib import Path

from orbitlaw.models.tracking import check_tracker
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import run_controls
from orbitlaw.study.path import answer, run_path, summary
from orbitlaw.study.presets import study_config, study_preset


def check_same_study(study, config: dict) -> None:
    """A one-line ValueError when ``study`` already holds a study that this one's stages would replace: one of
    another protocol, or with other controls or another path (another ``--seed``, or a preset of another size).
    Their stages share names with this one's, so running would overwrite them."""
    marker = study.path("study.json")
    if not marker.exists():
        return
    before = json.loads(marker.read_text()).get("config", {})
    was = before.get("protocol", "orbitlaw")
    if was != config["protocol"]:
        raise ValueError(f"{study.out} holds a study of protocol {was!r}, not {config['protocol']!r}: use another "
                         "--out (running here would replace its stages)")
    for part in ("controls", "path"):  # --attention (and the rungs chosen) only add or leave out rows
        if part in before and part in config and _settings(before[part]) != _settings(config[part]):
            raise ValueError(f"{study.out} holds a study with another {part} config (another --seed, or a preset "
                             f"of another size): use another --out (running here would replace its stages)")


def _settings(part: dict) -> dict:
    """``part`` without what only chooses which rows run (the attentions, the path's rungs)."""
    return {k: v for k, v in part.items() if k not in ("attentions", "rungs")}


def run_study(preset: str, out: str | Path, attentions: list[str] | None = None, seed: int = 0,
              llm_reference: str | Path | None = "auto", llm_results: list[str | Path] = (), workers: int = 1,
              nproc: int = 1, progress: bool = True, protocol: str = "orbitlaw", precision: str | None = None,
              log_to: str = "none", archs: list[str] | None = None) -> dict:
    """Run (or resume) every stage of the study in ``out``; returns the results.json dictionary.

    ``llm_reference``: the reference data directory (``.../vafa2025``), ``"auto"`` to use the one beside
    the checkout when present, or None; ``llm_results``: ``orbitlaw llm run`` directories to fold in;
    ``protocol``: ``"orbitlaw"`` or ``"reference"`` (:func:`orbitlaw.study.presets.study_config`);
    ``log_to``: the training stages also send their metrics to ``tensorboard`` or ``wandb``; ``archs``: the
    baseline architectures beside the GPTs (None: the preset's).
    """
    config = study_config(preset, attentions, seed, protocol, precision, archs)
    check_tracker(log_to)
    reference = stages.find_reference() if llm_reference == "auto" else (Path(llm_reference) if llm_reference else None)
    if reference is not None and not (reference / "llm-prompts").is_dir():
        raise ValueError(f"--llm-reference {reference}: no llm-prompts/ directory there")
    for directory in llm_results:
        if not (Path(directory) / "results.json").is_file():
            raise ValueError(f"--llm-results {directory}: no results.json (run `orbitlaw llm run` there first)")
    study = stages.Study(out, progress)
    check_same_study(study, config)
    kind = study_preset(preset).kind
    if kind != "models":  # the controls (or the path) alone
        write_json_atomic(study.path("study.json"), {"config": config, "code_version": code_version()})
        if kind == "path":
            rows, controls = run_path(study, config, workers, progress, log_to)
            return _finish(study, {"models": [], "controls": controls, "controls_passes": path_passes(controls),
                                   "path": rows, "path_summary": summary(rows),
                                   "path_answer": answer(rows, config["path"]),
                                   "protocol": config["protocol"], "notes": config["notes"], "config": config})
        controls = run_controls(study, config["controls"], workers, progress, log_to)
        return _finish(study, {"models": [], "controls": controls,
                               "protocol": config["protocol"], "notes": config["notes"], "config": config})
    config["llm"] = {"reference": str(reference) if reference else None, "results": [str(p) for p in llm_results]}
    write_json_atomic(study.path("study.json"), {"config": config, "code_version": code_version()})
    study.plan(stage_names(config))

    data = simulate_data(study, config, ("pretrain", "probe", "solar"), workers, progress)
    models = []
    for name in model_names(config):
        arch = name if name in config.get("archs", []) else "gpt"
        run, train_spec, trained = train_model(study, config, name, data, progress, nproc, log_to)
        evaluated = study.stage(f"evaluate:{name}", {"train": train_spec, **config["evaluate"]}, [],
                                lambda r=run: stages.evaluate(r, data["pretrain"], config["evaluate"]))
        probe_dir = study.path("probes", name)
        probe_spec = {"train": train_spec, "data": config["probe_data"], **config["probe"]}
        probed = study.stage(f"probe:{name}", probe_spec, [probe_dir],
                             lambda r=run, p=probe_dir: stages.probe(r, data["probe"], p, config["probe"],
                                                                     "force-magnitude", progress))
        law_file = study.path("laws", name, "LAW.json")
        found = study.stage(f"law:{name}", {"probe": probe_spec, **config["discover"]}, [law_file.parent],
                            lambda p=probe_dir, f=law_file: stages.law(p / "predictions.csv", f, config["discover"],
                                                                       workers, progress))
        solar_dir = study.path("solar", name)
        study.stage(f"solar:{name}", {"train": train_spec, "data": config["solar_data"],
                                      **config["solar_probe"]}, [solar_dir],
                    lambda r=run, p=solar_dir: stages.probe(r, data["solar"], p, config["solar_probe"],
                                                            "force-vector", progress))
        linear_dir = study.path("linear", name)
        linear = study.stage(f"linear:{name}", {"train": train_spec, "data": config["probe_data"],
                                                **config["linear_probe"]}, [linear_dir],
                             lambda r=run, p=linear_dir: stages.linear(r, data["probe"], p, config["linear_probe"]))
        frozen_file = study.path("laws-frozen", name, "LAW.json")  # the frozen state's linear readout, judged alike
        frozen = study.stage(f"law-frozen:{name}", {"linear": {"train": train_spec, "data": config["probe_data"],
                                                               **config["linear_probe"]}, **config["discover"]},
                             [frozen_file.parent],
                             lambda p=linear_dir, f=frozen_file: stages.law(p / "frozen_predictions.csv", f,
                                                                            config["discover"], workers, progress))
        biased = inductive_bias(study, config, name, run, train_spec, data, progress)
        roll_dir = study.path("rollouts", name)
        rolled = study.stage(f"rollout:{name}", {"train": train_spec, "data": config["probe_data"],
                                                 **config["rollout"]}, [roll_dir],
                             lambda r=run, p=roll_dir: stages.rollout(r, data["probe"], p, config["rollout"]))
        held = probed["metrics"]["heldout_unlabelled"]
        models.append({
            "attention": name, "arch": arch, "run": str(run), "steps": trained["steps"],
            "train_loss": trained["train_loss"],
            "val_loss": evaluated["loss"], "accuracy": evaluated.get("accuracy"),
            "extrapolation": evaluated.get("extrapolation", {}).get("loss", {}),
            "probe_r2": held.get("r2"), "probe_r2_log": held.get("r2_log"), "probe_mae": held.get("mae"),
            "law": found, "law_frozen": frozen, "linear_probe": linear["best"], "inductive_bias": biased,
            "rollout": rolled,
        })

    context = json.loads(study.path("runs", config["attentions"][0], "config.json").read_text())["context"]
    keep = ("train_sequences", "heldout_sequences", "near_train", "seed", "protocol")
    oracle_spec = {"context": context, **{k: config["probe"][k] for k in keep}}
    oracle_dir = study.path("oracle", "knn")
    oracle = study.stage("oracle:knn", {"data": config["probe_data"], **oracle_spec}, [oracle_dir],
                         lambda: stages.oracle(data["probe"], oracle_dir, oracle_spec))
    oracle_law_file = study.path("laws", "oracle-knn", "LAW.json")
    oracle_law = study.stage("law:oracle-knn", {"data": config["probe_data"], **oracle_spec, **config["discover"]},
                             [oracle_law_file.parent],
                             lambda: stages.law(oracle_dir / "predictions.csv", oracle_law_file, config["discover"],
                                                workers, progress))
    llm_inputs = {"sources": stages.content_hashes([p / "results.json" for p in map(Path, llm_results)]
                                                   + ([reference] if reference else []))}
    llm = study.stage("llm", {**config["llm"], **llm_inputs, **config["discover"]}, [study.path("llm")],
                      lambda: stages.llm(reference, [Path(p) for p in llm_results], study.path("llm"),
                                         config["discover"]))

    controls = run_controls(study, config["controls"], workers, progress, log_to) if config.get("controls") else []
    results = {
        "models": models,
        "controls": controls,
        "oracle": {"kind": "knn", "probe_r2": oracle["metrics"]["heldout_unlabelled"].get("r2"),
                   "probe_r2_log": oracle["metrics"]["heldout_unlabelled"].get("r2_log"), "law": oracle_law},
        "llm": llm["models"], "llm_control": llm["control"],
        "protocol": config["protocol"], "notes": config["notes"],
        "config": config,
    }
    return _finish(study, results)


def simulate_data(study, config: dict, names, workers: int, progress: bool) -> dict[str, Path]:
    """The stages ``data:<name>`` for ``name`` in ``names`` (pretrain, probe, solar); returns their paths."""
    data = {}
    for name in names:
        spec = config[f"{name}_data"]
        path = study.path("data", name)
        study.stage(f"data:{name}", spec, [path], lambda s=spec, p=path: stages.simulate(s, p, workers, progress))
        data[name] = path
    return data


MODEL_STAGES = ("train", "evaluate", "probe", "law", "solar", "linear", "law-frozen", "inductive_bias", "rollout")
"""The stages of each model of a models study, in the order :func:`run_study` runs them."""


def stage_names(config: dict) -> list[str]:
    """The stages a models study passes through, in order (its progress plan; ``tests/test_study.py`` checks it
    against the stages the smoke study ran)."""
    from orbitlaw.study.controls import stage_names as control_stages

    names = [f"data:{name}" for name in ("pretrain", "probe", "solar")]
    names += [f"{stage}:{name}" for name in model_names(config) for stage in MODEL_STAGES]
    names += ["oracle:knn", "law:oracle-knn", "llm"]
    return names + (control_stages(config["controls"]) if config.get("controls") else [])


def model_names(config: dict) -> list[str]:
    """The study's models: one GPT per attention, then one per baseline architecture."""
    return config["attentions"] + config.get("archs", [])


def train_model(study, config: dict, name: str, data: dict[str, Path], progress: bool, nproc: int = 1,
                log_to: str = "none") -> tuple[Path, dict, dict]:
    """The stage ``train:<name>``: pretrain model ``name`` (an attention or a baseline architecture).
    Returns its run directory, its training spec (the key later stages build on) and the stage's result."""
    arch = name if name in config.get("archs", []) else "gpt"
    attention = name if arch == "gpt" else "softmax"
    train_cfg = config["train"] if arch == "gpt" else {**config["train"], "arch": arch, "pos": None}
    run = study.path("runs", name)
    train_spec = {**train_cfg, "data": config["pretrain_data"]}
    trained = study.stage(f"train:{name}", {"attention": name, **train_spec}, [run],
                          lambda: stages.train(data["pretrain"], run, attention, train_cfg, progress, nproc, log_to))
    return run, train_spec, trained


def inductive_bias(study, config: dict, name: str, run: Path, train_spec: dict, data: dict[str, Path],
                   progress: bool) -> dict:
    """The stage ``inductive_bias:<name>``: the inductive-bias probe of model ``name`` on the probe set."""
    out = study.path("inductive_bias", name)
    return study.stage(f"inductive_bias:{name}", {"train": train_spec, "data": config["probe_data"],
                                                 **config["inductive_bias"]}, [out],
                       lambda: stages.inductive_bias(run, data["probe"], out, config["inductive_bias"], progress))


def _finish(study, results: dict) -> dict:
    """Add seeds and code version, write the report and its figures, then results.json."""
    from orbitlaw.study.report import write_report

    config = results["config"]
    seeds = {k: v["seed"] for k, v in config.items() if isinstance(v, dict) and "seed" in v}
    if config.get("controls"):
        seeds["controls"] = config["controls"]["seeds"]
    results.update(seeds=seeds, code_version=code_version(), dependency_versions=dependency_versions())
    results["figures"] = write_report(study, results)
    write_json_atomic(study.path("results.json"), results)
    return results


def path_passes(controls: list[dict]) -> dict | None:
    """The controls' pass rule on the study the path starts from; None below its three positive seeds (smoke)."""
    from orbitlaw.study.controls import passes

    positive = [r for r in controls if r["kind"] == "model" and "-s" in r["name"]]
    return passes(controls) if len(positive) >= 3 else None
