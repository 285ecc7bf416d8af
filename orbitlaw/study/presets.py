"""Study presets: how big each stage of ``orbitlaw run`` is, and the protocol it follows.

- ``smoke``: every stage at toy size, a few minutes on 2 CPU cores (what CI and the README run). Its
  numbers only show that the pipeline works.
- ``cpu``: the strongest study 2 CPU cores do in about an hour: tiny GPTs (2 layers, 128 wide; about
  20 minutes of pretraining each, 3.3M tokens) on two-body orbits, probes fine-tuned for 300 steps.
- ``gpu-109m``: the reference scale (Vafa et al. 2025, science.md §3): the 108.5M GPT with learned
  positions pretrained on the ``vafa2025`` data with the reference recipe (AdamW, constant lr 6e-4
  without warmup, global batch 512, 600k steps), probed on 10,000 ``two-body-exoplanet`` sequences (the
  reference's force-probe set), 10k fine-tuning steps, SR with 5 seeds. For ``torchrun --nproc_per_node
  N orbitlaw run --preset gpu-109m ...`` on GPUs; not run on CPU.
- ``gpu-109m-rope``: the same with rotary positions, the variant for length extrapolation (learned
  positions cannot be evaluated past their block).
- ``controls``: the positive and negative controls alone (:mod:`orbitlaw.study.controls`), 32 minutes on 2
  CPU cores (measured, ``benchmarks/experiments/controls.py``). Every other preset runs the same controls beside its
  models (``smoke`` at toy size), so each report reads against them.

At ``smoke`` and ``cpu`` scale the models are pretrained on the ``two-body`` preset (the same
distribution as their probe set) instead of ``vafa2025``: a tiny model learns one distribution in
minutes, the full reference mixture not. They use rotary positions so that length extrapolation can be
measured, and a cosine schedule.

Protocols (:func:`study_config`): ``orbitlaw`` (default) probes with the log-scaled target and the
global masked mean, and discovers with the log-space error, the power-law screen and held-out selection;
``reference`` sets every stage to Vafa et al.'s protocol: the probe's raw |F| target, per-sequence loss
and label layout, the reference symbolic regression (per-restart score, epsilon-insensitive L1) and, for
the ``gpu-109m`` presets, fp32 training (``orbitlaw`` trains them in bf16). What a preset cannot match
at its scale (the tiny presets' data, positions and training budget) is listed in ``config["notes"]``.
"""

from __future__ import annotations

import copy

PRESETS: dict[str, dict] = {
    "smoke": {
        "attentions": ["softmax", "lssar"],
        "pretrain_data": {"preset": "two-body", "splits": {"train": 256, "val": 32}, "seed": 0},
        "probe_data": {"preset": "two-body", "splits": {"train": 120}, "seed": 1},
        "solar_data": {"preset": "solar-system", "splits": {"train": 8}, "seed": 2},
        "train": {"preset": "tiny", "pos": "rope", "max_steps": 40, "batch_size": 8, "lr": 1e-3,
                  "schedule": "cosine", "warmup_steps": 10, "eval_every": 20, "checkpoint_every": 20,
                  "log_every": 10, "eval_sequences": 8, "seed": 0},
        "evaluate": {"lengths": [1, 2, 4, 8, 16], "sequences": 16, "extrapolation_sequences": 1},
        "probe": {"steps": 40, "batch": 8, "checkpoint_every": 20, "train_sequences": 100, "heldout_sequences": 20,
                  "eval_train_sequences": 16, "near_train": 1000, "seed": 0},
        "solar_probe": {"steps": 20, "batch": 8, "labels_per_sequence": 10, "seed": 0},
        "linear_probe": {"sequences": 100, "steps_per_sequence": 5, "seed": 0},
        "discover": {"seeds": 2, "points": 300, "restarts": 1, "budget": 10_000},
        "attention_figure": {"sequences": 2},
        "archs": ["lstm"],
        "inductive_bias": {"datasets": 2, "sequences": 6, "iterations": 5, "samples": 60, "seed": 0},
        "rollout": {"prompt_steps": 8, "steps": 24, "index": 0},
    },
    "cpu": {
        "attentions": ["softmax", "lssar"],
        "pretrain_data": {"preset": "two-body", "splits": {"train": 20_000, "val": 256}, "seed": 0},
        "probe_data": {"preset": "two-body", "splits": {"train": 2_000}, "seed": 1},
        "solar_data": {"preset": "solar-system", "splits": {"train": 8}, "seed": 2},
        "train": {"preset": "tiny", "pos": "rope", "max_steps": 800, "batch_size": 16, "lr": 1e-3,
                  "schedule": "cosine", "warmup_steps": 50, "eval_every": 100, "checkpoint_every": 100,
                  "log_every": 25, "eval_sequences": 64, "seed": 0},
        "evaluate": {"lengths": [1, 2, 4, 8, 16], "sequences": 128, "extrapolation_sequences": 4},
        "probe": {"steps": 300, "batch": 16, "checkpoint_every": 100, "train_sequences": 1800, "heldout_sequences": 200,
                  "eval_train_sequences": 64, "near_train": 5000, "seed": 0},
        "solar_probe": {"steps": 100, "batch": 8, "labels_per_sequence": 10, "seed": 0},
        "linear_probe": {"sequences": 1000, "steps_per_sequence": 10, "seed": 0},
        "discover": {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000},
        "attention_figure": {"sequences": 4},
        "archs": [],
        "inductive_bias": {"datasets": 10, "sequences": 32, "iterations": 100, "samples": 1000, "seed": 0},
        "rollout": {"prompt_steps": 32, "steps": 96, "index": 0},
    },
    "gpu-109m": {
        "attentions": ["softmax", "lssar"],
        "pretrain_data": {"preset": "vafa2025", "splits": {"train": 10_000_000, "val": 10_000}, "seed": 0},
        "probe_data": {"preset": "two-body-exoplanet", "splits": {"train": 10_000}, "seed": 1},
        "solar_data": {"preset": "solar-system", "splits": {"train": 8}, "seed": 2},
        "train": {"preset": "gpt-109m", "pos": "learned", "max_steps": 600_000, "batch_size": 512, "lr": 6e-4,
                  "schedule": "constant", "warmup_steps": 0, "eval_every": 5_000, "checkpoint_every": 5_000,
                  "log_every": 100, "eval_sequences": 256, "seed": 0, "precision": "bf16"},
        "evaluate": {"lengths": [1, 2, 4, 8, 16], "sequences": 1_000, "extrapolation_sequences": 32},
        "probe": {"steps": 10_000, "batch": 64, "checkpoint_every": 500, "train_sequences": 9_000,
                  "heldout_sequences": 1_000,
                  "eval_train_sequences": 256, "near_train": 5_000, "seed": 0},
        "solar_probe": {"steps": 2_000, "batch": 8, "labels_per_sequence": 10, "seed": 0},
        "linear_probe": {"sequences": 2_000, "steps_per_sequence": 10, "seed": 0},
        "discover": {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000},
        "attention_figure": {"sequences": 8},
        "archs": [],
        "inductive_bias": {"datasets": 100, "sequences": 100, "iterations": 100, "samples": 2000, "seed": 0},
        "rollout": {"prompt_steps": 100, "steps": 200, "index": 0},
    },
}


def _controls(pretrain: int, probe: int, steps: int, probe_steps: int, seeds: list[int], discover: dict,
              token_steps: int) -> dict:
    """The controls of :mod:`orbitlaw.study.controls` at a given size (``binary`` data; ``probe`` systems in the
    probe set: the fine-tuned probe trains on the first three quarters and holds out the last quarter)."""
    quarter = probe // 4
    orbits = {"a_range": [2.0, 3.0]}  # 0.4-1.6 rad a step: W = 3 steps resolve the curvature (module docstring)
    return {
        "data": {"pretrain": {"preset": "binary", "splits": {"train": pretrain, "val": 32}, "seed": 10,
                              "overrides": orbits},
                 "probe": {"preset": "binary", "splits": {"train": probe}, "seed": 11, "overrides": orbits}},
        # the probe's target: the planet's acceleration, which predicting its next position needs (G m2 / r^2);
        # the force adds the planet mass m1, which the model is never asked for (orbitlaw.study.controls)
        "target": "acceleration-magnitude",
        "window": 3, "seeds": seeds,
        # the control GPT with 4 heads at width 64 and input noise 0.005 AU (not Liu et al.'s one head, width 32):
        # one head cannot take the second difference that gives the curvature, and 0.02 AU of noise blurs that
        # curvature by up to 12% (orbitlaw.study.controls; docs/history.md)
        "train": {"preset": "control", "model_overrides": {"n_head": 4, "n_embd": 64},
                  "max_steps": steps, "batch_size": 256, "lr": 3e-3, "input_noise": 0.005,
                  "window_end": "step", "window_loss": "last",
                  "schedule": "cosine", "warmup_steps": max(1, steps // 80), "eval_every": steps,
                  "checkpoint_every": max(1, steps // 4),
                  "log_every": max(1, steps // 20), "eval_sequences": 32},
        "full_train": {"batch_size": 32},
        "token_train": {"preset": "tiny", "pos": "rope", "max_steps": token_steps, "batch_size": 16, "lr": 1e-3,
                        "schedule": "cosine", "warmup_steps": max(1, token_steps // 10), "eval_every": token_steps,
                        "checkpoint_every": max(1, token_steps // 4), "log_every": max(1, token_steps // 20),
                        "eval_sequences": 16},
        # the fine-tuned probe: 3,000 cosine steps on 3,000 training systems (the weak corner of the prior,
        # m2 < 0.3 M_sun and r > 3 AU, needs them), the held-out quarter (1,000 systems) read by symbolic
        # regression; windows_per_sequence 25: each step reads a quarter of each sequence's windows, drawn anew
        # each step (the probe's errors are mostly per system; whole-sequence models read every step from one
        # pass: discovery.probe.window_columns). Why each choice, and what it replaced: docs/history.md
        "probe": {"steps": probe_steps, "batch": 16, "lr": 1e-3, "schedule": "cosine",
                  "checkpoint_every": max(1, probe_steps // 4), "windows_per_sequence": 25,
                  "train_sequences": probe - quarter, "heldout_sequences": quarter, "eval_train_sequences": 64,
                  "near_train": 5000, "seed": 0},
        "linear_probe": {"train_sequences": quarter, "heldout_sequences": quarter, "sequences": min(quarter, 1000),
                         "steps_per_sequence": 10},
        "discover": dict(discover),  # judged by the study's one VERDICT_RULE, as every other law
    }


_SR = {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000}
PRESETS["smoke"]["controls"] = _controls(64, 48, 20, 10, [0], dict(PRESETS["smoke"]["discover"]), 10)
PRESETS["cpu"]["controls"] = _controls(2000, 4000, 8000, 3000, [0, 1, 2], _SR, 300)
PRESETS["gpu-109m"]["controls"] = _controls(2000, 4000, 8000, 3000, [0, 1, 2], _SR, 300)
PRESETS["controls"] = {"controls": _controls(2000, 4000, 8000, 3000, [0, 1, 2], _SR, 300)}

# The path from the positive control to a GPT over the toolkit's tokens (orbitlaw.study.path): the controls' data,
# positive control and probe, then one change per rung, each rung with every attention, and at the last rung
# two widths and three training budgets (multiples of its steps) for softmax and LSSAR. The whole-sequence rung
# trains as the controls' `tokens` row does (300 steps of 16 sequences): its head over 2 x 7000 bins at every
# position costs about a second a step on one core.
PRESETS["path"] = {"controls": _controls(2000, 4000, 8000, 3000, [0, 1, 2], _SR, 300),
                   "path": {"attentions": ["softmax", "lssar", "laser"],
                            "whole_train": {"batch_size": 16, "max_steps": 300},
                            "sizes": {"attentions": ["softmax", "lssar"], "widths": [64, 128],
                                      "budgets": [0.3, 1, 9]}}}
PRESETS["path-gpu"] = copy.deepcopy(PRESETS["path"])  # the same rungs at sizes and budgets for one GPU
PRESETS["path-gpu"]["path"]["whole_train"] = {"batch_size": 64, "max_steps": 8000}
PRESETS["path-gpu"]["path"]["sizes"] = {"attentions": ["softmax", "lssar"], "widths": [128, 384],
                                        "budgets": [0.3, 1, 9]}

PRESETS["gpu-109m-rope"] = copy.deepcopy(PRESETS["gpu-109m"])
PRESETS["gpu-109m-rope"]["train"]["pos"] = "rope"
PRESETS["gpu-109m"]["evaluate"]["lengths"] = [1]  # learned positions: no evaluation past the block

PROTOCOLS = ("orbitlaw", "reference")
CONTROL_PRESETS = ("controls", "path", "path-gpu")  # studies of the controls' data alone (no attention models)

VERDICT_RULE = {"orbitlaw": {"selection": "se", "tolerance": 0.01},
                "reference": {"selection": "score", "tolerance": 0.0}}
"""The one rule by which every verdict of a study is decided (the models', the k-NN oracle's, the LLM answers',
the controls'), per protocol; :func:`study_config` writes it into every ``discover`` block and into
``config["verdict_rule"]``, and every law row states it (``rule``).

``orbitlaw``: held-out ``se`` selection at a precision of 1% RMS of ln (``discover --tolerance 0.01``): a law
is not told apart from a simpler one it departs from by less, and a law of Newton's form is ``newtonian``
only when the free fit's exponents and the constant, with intervals over systems, reach Newton's within that
precision (:func:`orbitlaw.discovery.verdict.newton_test`; LAW.json's ``resolution`` says what the rows tell
apart). 1% was fixed with the discovery benchmark before any control ran; an exact test (0) certifies no
learned readout, not even k-NN on the true state, whose errors are a few percent per system.
``reference``: the reference's score selection, which has no precision to set (0: the intervals alone)."""

_TINY_NOTES = [
    "pretrained on `two-body` orbits, not the reference's `vafa2025` mixture (a tiny model learns one "
    "distribution in minutes), and probed on the same `two-body` preset (the reference probes on "
    "`two-body-exoplanet`)",
    "rotary positions and a cosine schedule over a CPU-sized budget, not learned positions and 600k x 512 "
    "sequences at a constant lr",
]


def study_config(preset: str, attentions: list[str] | None = None, seed: int | None = None,
                 protocol: str = "orbitlaw", precision: str | None = None, archs: list[str] | None = None) -> dict:
    """A deep copy of ``preset`` under ``protocol``, with the attention list, the baseline architectures
    (``archs``: lstm, rnn, mamba; each one more model beside the GPTs) and (optionally) every seed shifted
    by ``seed``: every stage's settings resolved (``orbitlaw run --show-config`` prints it)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown study preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}: choose {' or '.join(PROTOCOLS)}")
    config = copy.deepcopy(PRESETS[preset])
    config["preset"] = preset
    config["protocol"] = protocol
    config["verdict_rule"] = {**VERDICT_RULE[protocol], "protocol": protocol}
    controls = config.get("controls")
    if controls:
        controls["probe"]["protocol"] = protocol
        controls["discover"].update(protocol=protocol, **VERDICT_RULE[protocol])
        if protocol == "reference":
            controls["probe"].pop("windows_per_sequence", None)  # its fine-tune reads every labelled step
        if seed:
            for name in ("pretrain", "probe"):
                controls["data"][name]["seed"] += seed
            controls["probe"]["seed"] += seed
            controls["linear_probe"]["seed"] = controls["linear_probe"].get("seed", 0) + seed
            controls["discover"]["seed"] = controls["discover"].get("seed", 0) + seed
            controls["seeds"] = [k + seed for k in controls["seeds"]]
    if preset in CONTROL_PRESETS:  # the controls (or the path) alone: no attention models, no LLM baselines
        config["notes"] = []
        if attentions and "path" in config:
            config["path"]["attentions"] = _attentions(attentions)
        return config
    config["probe"]["protocol"] = protocol
    config["solar_probe"]["protocol"] = protocol
    config["discover"].update(protocol=protocol, **VERDICT_RULE[protocol])
    notes = list(_TINY_NOTES) if preset in ("smoke", "cpu") else []
    if protocol == "reference" and preset.startswith("gpu-109m"):
        config["train"]["precision"] = "fp32"
    if preset == "gpu-109m-rope":
        notes.append("rotary positions (for length extrapolation); the reference GPT has learned positions")
    if precision is not None:  # an explicit choice overrides the protocol's (bf16 is a documented option)
        if precision not in ("bf16", "fp32"):
            raise ValueError(f"unknown precision {precision!r}; choose bf16 or fp32")
        config["train"]["precision"] = precision
    if config["train"].get("precision") == "bf16" and preset.startswith("gpu-109m"):
        notes.append("bf16 autocast (the reference trains in fp32: --protocol reference or --precision fp32)")
    config["notes"] = notes
    if attentions:
        config["attentions"] = _attentions(attentions)
    if archs is not None:
        baselines = ("lstm", "rnn", "mamba")
        bad = [a for a in archs if a not in baselines]
        if bad or len(set(archs)) != len(archs):
            raise ValueError(f"--arch must list distinct baselines of {', '.join(baselines)} (the GPTs are "
                             f"--attention); got {','.join(archs)}")
        config["archs"] = list(archs)
    if seed:
        for section in ("pretrain_data", "probe_data", "train", "probe", "solar_probe", "linear_probe",
                        "inductive_bias"):
            config[section]["seed"] += seed
        config["discover"]["seed"] = config["discover"].get("seed", 0) + seed  # the SR seeds follow too
    return config


def _attentions(attentions: list[str]) -> list[str]:
    """``--attention``'s list, checked: distinct variants of the registry."""
    from orbitlaw.kernels.registry import NAMES as ATTENTIONS

    bad = [a for a in attentions if a not in ATTENTIONS]
    if bad or len(set(attentions)) != len(attentions):
        raise ValueError(f"--attention must list distinct variants of {', '.join(ATTENTIONS)}; got "
                         f"{','.join(attentions)}")
    return list(attentions)
