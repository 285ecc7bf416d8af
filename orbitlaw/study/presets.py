"""Study presets: how big each stage of ``orbitlaw run`` is.

- ``smoke``: every stage at toy size, a few minutes on 2 CPU cores (what CI and the README run). Its
  numbers only show that the pipeline works.
- ``cpu``: the strongest study 2 CPU cores do in about an hour: tiny GPTs (2 layers, 128 wide; about
  20 minutes of pretraining each, 3.3M tokens) on two-body orbits, probes fine-tuned for 300 steps.
- ``gpu-109m``: the reference scale (Vafa et al. 2025): the 108.5M GPT pretrained on the ``vafa2025``
  data, the 10,000-sequence two-body probe set, 10k fine-tuning steps, SR with 5 seeds. Meant for
  ``torchrun --nproc_per_node N orbitlaw run --preset gpu-109m ...`` on GPUs; not run on CPU.

At ``smoke`` and ``cpu`` scale the models are pretrained on the ``two-body`` preset (the same
distribution as the probe set) instead of ``vafa2025``: a tiny model learns one distribution in minutes,
the full reference mixture not. All models use rotary positions so that length extrapolation can be
measured (the reference GPT uses learned positions).
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
        "linear_probe": {"sequences": 100, "steps_per_sequence": 5},
        "discover": {"seeds": 2, "points": 300, "restarts": 1, "budget": 10_000},
        "attention_figure": {"sequences": 2},
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
        "linear_probe": {"sequences": 1000, "steps_per_sequence": 10},
        "discover": {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000},
        "attention_figure": {"sequences": 4},
    },
    "gpu-109m": {
        "attentions": ["softmax", "lssar"],
        "pretrain_data": {"preset": "vafa2025", "splits": {"train": 10_000_000, "val": 10_000}, "seed": 0},
        "probe_data": {"preset": "two-body", "splits": {"train": 10_000}, "seed": 1},
        "solar_data": {"preset": "solar-system", "splits": {"train": 8}, "seed": 2},
        "train": {"preset": "gpt-109m", "pos": "rope", "max_steps": 100_000, "batch_size": 64, "lr": 6e-4,
                  "schedule": "cosine", "warmup_steps": 2_000, "eval_every": 1_000, "checkpoint_every": 1_000,
                  "log_every": 50, "eval_sequences": 256, "seed": 0},
        "evaluate": {"lengths": [1, 2, 4, 8, 16], "sequences": 1_000, "extrapolation_sequences": 32},
        "probe": {"steps": 10_000, "batch": 64, "checkpoint_every": 500, "train_sequences": 9_000,
                  "heldout_sequences": 1_000,
                  "eval_train_sequences": 256, "near_train": 5_000, "seed": 0},
        "solar_probe": {"steps": 2_000, "batch": 8, "labels_per_sequence": 10, "seed": 0},
        "linear_probe": {"sequences": 2_000, "steps_per_sequence": 10},
        "discover": {"seeds": 5, "points": 1000, "restarts": 3, "budget": 30_000},
        "attention_figure": {"sequences": 8},
    },
}


def study_config(preset: str, attentions: list[str] | None = None, seed: int | None = None) -> dict:
    """A deep copy of ``preset`` with the attention list and (optionally) every seed shifted by ``seed``."""
    if preset not in PRESETS:
        raise ValueError(f"unknown study preset {preset!r}: choose one of {', '.join(PRESETS)}")
    config = copy.deepcopy(PRESETS[preset])
    config["preset"] = preset
    if attentions:
        from models.attention import ATTENTIONS

        bad = [a for a in attentions if a not in ATTENTIONS]
        if bad or len(set(attentions)) != len(attentions):
            raise ValueError(f"--attention must list distinct variants of {', '.join(ATTENTIONS)}; got "
                             f"{','.join(attentions)}")
        config["attentions"] = list(attentions)
    if seed:
        for section in ("pretrain_data", "probe_data", "train", "probe", "solar_probe"):
            config[section]["seed"] += seed
    return config
