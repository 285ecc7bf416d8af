"""Study presets: how big each stage of ``orbitlaw run`` is, and the protocol it follows.

- ``smoke``: every stage at toy size, a few minutes on 2 CPU cores (what CI and the README run). Its
  numbers only show that the pipeline works.
- ``cpu``: the strongest study 2 CPU cores do in about an hour: tiny GPTs (2 layers, 128 wide; about
  20 minutes of pretraining each, 3.3M tokens) on two-body orbits, probes fine-tuned for 300 steps.
- ``gpu-109m``: the reference scale (Vafa et al. 2025, docs/protocol.md, "Model"): the 108.5M GPT with learned
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
the ``gpu-109m`` presets, fp32 training (``orbitlaw`` trains them in bf16); for ``path``, its top rungs on the
reference's probe set (:data:`_REFERENCE_PATH`). What a preset cannot match
at its scale (the tiny presets' data, positions and training budget) is listed in ``config["notes"]``.

Every preset is one :class:`StudyPreset` in ``STUDY_PRESETS`` (its sizes, its summary for ``--help`` and what sets
it apart: notes, reference scale, models or not), which :func:`study_config`, the pipeline, the report and
``orbitlaw run --preset`` read; the sizes of a study with models are built by :func:`_model_study` from what the
preset sets, over what every such study shares.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from orbitlaw.discovery.sr.rule import PRECISION

KINDS = ("models", "controls", "path")
"""What a study preset runs: attention models with the controls beside them, the controls alone, or the path."""


@dataclass(frozen=True)
class StudyPreset:
    """One study preset of ``orbitlaw run``.

    name: ``--preset``'s spelling; summary: one line for ``--help``; config: every stage's sizes, which
    :func:`study_config` resolves under a protocol; kind: what it runs (:data:`KINDS`: attention models beside the
    controls, the controls alone, or the path from the controls); notes: what it cannot match of the reference at
    its scale (``config["notes"]``); reference_scale: the reference's 108.5M GPT, which trains in bf16 under the
    ``orbitlaw`` protocol (noted) and in fp32 under ``reference``; pipeline_check: its numbers only show that the
    pipeline works (the report says so).
    """

    name: str
    summary: str
    config: dict
    kind: str = "models"
    notes: tuple[str, ...] = ()
    reference_scale: bool = False
    pipeline_check: bool = False

    @property
    def models(self) -> bool:
        """Whether it trains attention models (the controls and the path alone do not)."""
        return self.kind == "models"


def _train(*, preset: str, pos: str, steps: int, batch: int, lr: float, schedule: str, warmup: int, eval_every: int,
           checkpoint_every: int, log_every: int, eval_sequences: int, **extra) -> dict:
    """A pretraining recipe in the keys of :class:`orbitlaw.models.train.TrainConfig` (``steps`` x ``batch``
    sequences at learning rate ``lr``; ``extra``: further keys, appended)."""
    return {"preset": preset, "pos": pos, "max_steps": steps, "batch_size": batch, "lr": lr, "schedule": schedule,
            "warmup_steps": warmup, "eval_every": eval_every, "checkpoint_every": checkpoint_every,
            "log_every": log_every, "eval_sequences": eval_sequences, **extra}


def _controls(*, pretrain: int, probe: int, steps: int, probe_steps: int, seeds: list[int], discover: dict,
              token_steps: int, token_batch: int = 16) -> dict:
    """The controls of :mod:`orbitlaw.study.controls` at a given size (``binary`` data; ``probe`` systems in the
    probe set: the fine-tuned probe trains on the first three quarters and holds out the last quarter; the
    ``tokens`` row trains ``token_steps`` steps of ``token_batch`` sequences)."""
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
        "token_train": _train(preset="tiny", pos="rope", steps=token_steps, batch=token_batch, lr=1e-3,
                              schedule="cosine", warmup=max(1, token_steps // 10), eval_every=token_steps,
                              checkpoint_every=max(1, token_steps // 4), log_every=max(1, token_steps // 20),
                              eval_sequences=16),
        # the fine-tuned probe: 3,000 cosine steps on 3,000 training systems (the weak corner of the prior,
        # m2 < 0.3 M_sun and r > 3 AU, needs them), the held-out quarter (1,000 systems) read by symbolic
        # regression; windows_per_sequence 25: each step reads a quarter of each sequence's windows, drawn anew
        # each step (the probe's errors are mostly per system; whole-sequence models read every step from one
        # pass: discovery.probes.probe.window_columns). Why each choice, and what it replaced: docs/history.md
        "probe": {"steps": probe_steps, "batch": 16, "lr": 1e-3, "schedule": "cosine",
                  "checkpoint_every": max(1, probe_steps // 4), "windows_per_sequence": 25,
                  "train_sequences": probe - quarter, "heldout_sequences": quarter, "eval_train_sequences": 64,
                  "near_train": 5000, "seed": 0},
        "linear_probe": {"train_sequences": quarter, "heldout_sequences": quarter, "sequences": min(quarter, 1000),
                         "steps_per_sequence": 10},
        "discover": dict(discover),  # judged by the study's one VERDICT_RULE, as every other law
    }


_SR = {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000}


def _full_controls() -> dict:
    """The controls at the size whose pass rule is judged (three training seeds; 32 minutes on 2 CPU cores)."""
    return {**_controls(pretrain=2000, probe=4000, steps=8000, probe_steps=3000, seeds=[0, 1, 2], discover=_SR,
                        token_steps=300), "bin_oracles": True}


def _model_study(*, pretrain_data: dict, probe_data: dict, train: dict, evaluate: dict, probe: dict, solar_steps: int,
                 linear_probe: dict, discover: dict, figure_sequences: int, archs: list[str], inductive_bias: dict,
                 rollout: dict, controls: dict) -> dict:
    """The sizes of a study with attention models, from what its preset sets; the rest every such study shares
    (the attentions, the seeds, the solar-system probe set and its labels, the extrapolation lengths: only 1x
    for learned positions, which cannot be evaluated past their block)."""
    return {
        "attentions": ["softmax", "lssar"],
        "pretrain_data": {**pretrain_data, "seed": 0},
        "probe_data": {**probe_data, "seed": 1},
        "solar_data": {"preset": "solar-system", "splits": {"train": 8}, "seed": 2},
        "train": train,
        "evaluate": {"lengths": [1] if train["pos"] == "learned" else [1, 2, 4, 8, 16], **evaluate},
        "probe": {**probe, "seed": 0},
        "solar_probe": {"steps": solar_steps, "batch": 8, "labels_per_sequence": 10, "seed": 0},
        "linear_probe": {**linear_probe, "seed": 0},
        "discover": dict(discover),
        "attention_figure": {"sequences": figure_sequences},
        "archs": archs,
        "inductive_bias": {**inductive_bias, "seed": 0},
        "rollout": {**rollout, "index": 0},
        "controls": controls,
    }


def _reference_scale(pos: str) -> dict:
    """The reference's recipe (module docstring) with positions ``pos``; bf16 until the protocol says otherwise."""
    return _model_study(
        pretrain_data={"preset": "vafa2025", "splits": {"train": 10_000_000, "val": 10_000}},
        probe_data={"preset": "two-body-exoplanet", "splits": {"train": 10_000}},
        train=_train(preset="gpt-109m", pos=pos, steps=600_000, batch=512, lr=6e-4, schedule="constant", warmup=0,
                     eval_every=5_000, checkpoint_every=5_000, log_every=100, eval_sequences=256, seed=0,
                     precision="bf16"),
        evaluate={"sequences": 1_000, "extrapolation_sequences": 32},
        probe={"steps": 10_000, "batch": 64, "checkpoint_every": 500, "train_sequences": 9_000,
               "heldout_sequences": 1_000, "eval_train_sequences": 256, "near_train": 5_000},
        solar_steps=2_000, linear_probe={"sequences": 2_000, "steps_per_sequence": 10}, discover=_SR,
        figure_sequences=8, archs=[],
        inductive_bias={"datasets": 100, "sequences": 100, "iterations": 100, "samples": 2000},
        rollout={"prompt_steps": 100, "steps": 200}, controls=_full_controls())


def _path(*, whole_train: dict, widths: list[int]) -> dict:
    """The path from the positive control to a GPT over the toolkit's tokens (:mod:`orbitlaw.study.path`): the
    controls' data, positive control and probe, then one change per rung, each rung with every attention, and at
    the last rung two ``widths`` and three training budgets (multiples of its steps) for softmax and LSSAR; the
    whole-sequence rung trains with ``whole_train``."""
    return {"controls": _full_controls(),
            "path": {"attentions": ["softmax", "lssar", "laser"], "whole_train": whole_train,
                     "replicate": "every-rung",  # every rung at every seed: the path is read by distance
                     "sizes": {"attentions": ["softmax", "lssar"], "widths": widths, "budgets": [0.3, 1, 9]},
                     "reference": _REFERENCE_PATH}}


_REFERENCE_PATH = {
    "rungs": ["positions", "bins-in", "whole", "tokens"],
    "probe_data": {"preset": "two-body-exoplanet", "overrides": {"seq_len": 201, "steps": 100, "time_step_index": 1}},
    "target": "force-magnitude",
}
"""The path under ``--protocol reference`` (docs/path.md, "The reference's probe set"): its top rungs (the control,
the rung where every attention lost the law on the controls' probe set, the whole-sequence rung and the anchor),
probed on the reference's probe set (``two-body-exoplanet``: its masses and orbits; in the controls' shape, 100
six-month steps, the only shape the models were trained on) for the reference's target, the raw |F|."""


def _reference_path(config: dict) -> None:
    """The path preset under ``--protocol reference``, in place: :data:`_REFERENCE_PATH`'s rungs (no size rows),
    the controls' probe set replaced by the reference's (same seed and size) and the probe's target by |F|."""
    path, controls = config["path"], config["controls"]
    ref = path.pop("reference", _REFERENCE_PATH)
    path["rungs"] = list(ref["rungs"])
    path.pop("sizes", None)
    probe = controls["data"]["probe"]
    controls["data"]["probe"] = {**copy.deepcopy(ref["probe_data"]), "splits": probe["splits"], "seed": probe["seed"]}
    controls["target"] = ref["target"]
    config["notes"] = [f"the path's rungs {', '.join(path['rungs'])} only, probed on the reference's probe set "
                       "(`two-body-exoplanet`) in the controls' shape (100 six-month steps) for the raw |F|"]


_SMOKE_SR = {"seeds": 2, "points": 300, "restarts": 1, "budget": 2_000}  # two seeds: the vote still runs

_TINY_NOTES = (
    "pretrained on `two-body` orbits, not the reference's `vafa2025` mixture (a tiny model learns one "
    "distribution in minutes), and probed on the same `two-body` preset (the reference probes on "
    "`two-body-exoplanet`)",
    "rotary positions and a cosine schedule over a CPU-sized budget, not learned positions and 600k x 512 "
    "sequences at a constant lr",
)

STUDY_PRESETS: dict[str, StudyPreset] = {p.name: p for p in (
    StudyPreset("smoke", "minutes, CPU", _model_study(
        pretrain_data={"preset": "two-body", "splits": {"train": 256, "val": 32}},
        probe_data={"preset": "two-body", "splits": {"train": 120}},
        # every stage at the fewest steps that exercise it (a loss curve of four points, a resumable checkpoint
        # half-way): its numbers only show that the pipeline works
        train=_train(preset="tiny", pos="rope", steps=8, batch=4, lr=1e-3, schedule="cosine", warmup=2,
                     eval_every=4, checkpoint_every=4, log_every=2, eval_sequences=8, seed=0),
        evaluate={"sequences": 16, "extrapolation_sequences": 1},
        probe={"steps": 8, "batch": 8, "checkpoint_every": 4, "train_sequences": 100, "heldout_sequences": 20,
               "eval_train_sequences": 16, "near_train": 1000},
        solar_steps=8, linear_probe={"sequences": 100, "steps_per_sequence": 5}, discover=_SMOKE_SR,
        figure_sequences=2, archs=["lstm"],
        inductive_bias={"datasets": 2, "sequences": 6, "iterations": 3, "samples": 60},
        rollout={"prompt_steps": 8, "steps": 24},
        controls=_controls(pretrain=64, probe=48, steps=8, probe_steps=4, seeds=[0], discover=_SMOKE_SR,
                           token_steps=4, token_batch=4)),
        notes=_TINY_NOTES, pipeline_check=True),
    StudyPreset("cpu", "about an hour on 2 cores", _model_study(
        pretrain_data={"preset": "two-body", "splits": {"train": 20_000, "val": 256}},
        probe_data={"preset": "two-body", "splits": {"train": 2_000}},
        train=_train(preset="tiny", pos="rope", steps=800, batch=16, lr=1e-3, schedule="cosine", warmup=50,
                     eval_every=100, checkpoint_every=100, log_every=25, eval_sequences=64, seed=0),
        evaluate={"sequences": 128, "extrapolation_sequences": 4},
        probe={"steps": 300, "batch": 16, "checkpoint_every": 100, "train_sequences": 1800, "heldout_sequences": 200,
               "eval_train_sequences": 64, "near_train": 5000},
        solar_steps=100, linear_probe={"sequences": 1000, "steps_per_sequence": 10}, discover=_SR,
        figure_sequences=4, archs=[],
        inductive_bias={"datasets": 10, "sequences": 32, "iterations": 100, "samples": 1000},
        rollout={"prompt_steps": 32, "steps": 96}, controls=_full_controls()),
        notes=_TINY_NOTES),
    StudyPreset("gpu-109m", "reference scale", _reference_scale("learned"), reference_scale=True),
    StudyPreset("controls", "the controls alone", {"controls": _full_controls()}, kind="controls"),
    StudyPreset("path", "the path from the positive control to a GPT over tokens, one change per rung: docs/path.md",
                # the whole-sequence rung trains as the controls' `tokens` row does (300 steps of 16 sequences):
                # its head over 2 x 7000 bins at every position costs about a second a step on one core
                _path(whole_train={"batch_size": 16, "max_steps": 300}, widths=[64, 128]), kind="path"),
    StudyPreset("path-gpu", "path's rungs at sizes and budgets for one GPU",
                _path(whole_train={"batch_size": 64, "max_steps": 8000}, widths=[128, 384]), kind="path"),
    StudyPreset("gpu-109m-rope", "gpu-109m with rotary positions, for length extrapolation", _reference_scale("rope"),
                notes=("rotary positions (for length extrapolation); the reference GPT has learned positions",),
                reference_scale=True),
)}

PROTOCOLS = ("orbitlaw", "reference")

VERDICT_RULE = {"orbitlaw": {"selection": "se", "tolerance": PRECISION},
                "reference": {"selection": "score", "tolerance": 0.0}}
"""The one rule by which every verdict of a study is decided (the models', the k-NN oracle's, the LLM answers',
the controls'), per protocol; :func:`study_config` writes it into every ``discover`` block and into
``config["verdict_rule"]``, and every law row states it (``rule``).

``orbitlaw``: held-out ``se`` selection at a precision of 2% RMS of ln (``discover --tolerance 0.02``): a law
is not told apart from a simpler one it departs from by less, and a law of Newton's form is ``newtonian``
only with positive evidence at that precision: the free fit's departure from Newton's form, the constant and the
exact law's departure lie within it over intervals resampled over systems, and the rows resolve a departure of
twice it (:func:`orbitlaw.discovery.sr.verdict.newton_test`; else ``unresolved``, with LAW.json's ``power``
saying how many systems would resolve it). 2% is the precision rule's choice (docs/controls.md, "The study's
precision"): the largest, over the seeds it was run at, of the finest precision at which k-NN on the true state
is ``newtonian`` (1.5% at ``--seed 10``, 2% at ``--seed 13``); 1% before 2026-12-07. An exact test (0) certifies
no learned readout, not even k-NN on the true state, whose errors are a few percent per system.
``reference``: the reference's score selection, which has no precision to set (0: the intervals alone)."""


def study_preset(name: str) -> StudyPreset:
    """The record of study preset ``name``; a one-line ValueError naming the choices for an unknown name."""
    if name not in STUDY_PRESETS:
        raise ValueError(f"unknown study preset {name!r}: choose one of {', '.join(STUDY_PRESETS)}")
    return STUDY_PRESETS[name]


def describe() -> str:
    """``--preset``'s help: ``name (summary)`` per study preset."""
    return ", ".join(f"{p.name} ({p.summary})" for p in STUDY_PRESETS.values())


def study_config(preset: str, attentions: list[str] | None = None, seed: int | None = None,
                 protocol: str = "orbitlaw", precision: str | None = None, archs: list[str] | None = None) -> dict:
    """A deep copy of ``preset``'s config under ``protocol``, with the attention list, the baseline architectures
    (``archs``: lstm, rnn, mamba; each one more model beside the GPTs) and (optionally) every seed shifted
    by ``seed``: every stage's settings resolved (``orbitlaw run --show-config`` prints it)."""
    record = study_preset(preset)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}: choose {' or '.join(PROTOCOLS)}")
    config = copy.deepcopy(record.config)
    config["preset"] = preset
    config["protocol"] = protocol
    config["verdict_rule"] = {**VERDICT_RULE[protocol], "protocol": protocol}
    config["notes"] = []
    if record.kind == "path":
        if protocol == "reference":
            _reference_path(config)
        else:
            config["path"].pop("reference", None)
    if config.get("controls"):
        _resolve_controls(config["controls"], protocol, seed)
    if record.kind != "models":  # the controls (or the path) alone: no attention models, no LLM baselines
        if attentions and record.kind == "path":
            config["path"]["attentions"] = _attentions(attentions)
        return config
    config["probe"]["protocol"] = protocol
    config["solar_probe"]["protocol"] = protocol
    config["discover"].update(protocol=protocol, **VERDICT_RULE[protocol])
    notes = list(record.notes)
    if protocol == "reference" and record.reference_scale:
        config["train"]["precision"] = "fp32"
    if precision is not None:  # an explicit choice overrides the protocol's (bf16 is a documented option)
        if precision not in ("bf16", "fp32"):
            raise ValueError(f"unknown precision {precision!r}; choose bf16 or fp32")
        config["train"]["precision"] = precision
    if config["train"].get("precision") == "bf16" and record.reference_scale:
        notes.append("bf16 autocast (the reference trains in fp32: --protocol reference or --precision fp32)")
    config["notes"] = notes
    if attentions:
        config["attentions"] = _attentions(attentions)
    if archs is not None:
        from orbitlaw.models.architectures import BASELINES as baselines  # torch: only when --arch is given
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


def _resolve_controls(controls: dict, protocol: str, seed: int | None) -> None:
    """The controls' probe and symbolic regression under ``protocol`` (the study's one verdict rule) and every
    seed of theirs shifted by ``seed``, in place."""
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


def _attentions(attentions: list[str]) -> list[str]:
    """``--attention``'s list, checked: distinct variants of the registry."""
    from orbitlaw.kernels.registry import NAMES as ATTENTIONS

    bad = [a for a in attentions if a not in ATTENTIONS]
    if bad or len(set(attentions)) != len(attentions):
        raise ValueError(f"--attention must list distinct variants of {', '.join(ATTENTIONS)}; got "
                         f"{','.join(attentions)}")
    return list(attentions)
