"""May a run continue? ``--resume`` follows the same trajectory as an uninterrupted run only with the same model,
the same trajectory settings (``train_config.TRAJECTORY_SETTINGS``) and the same dataset; anything else is
refused in one line before a step is taken."""

from __future__ import annotations

import json
from pathlib import Path

from orbitlaw.models import checkpoint
from orbitlaw.models.gpt import GPTConfig
from orbitlaw.models.train_config import TRAJECTORY_SETTINGS, TrainConfig
from orbitlaw.provenance import inside
from orbitlaw.validate import FieldError


def find_checkpoint(run: Path, resume: bool) -> Path | None:
    """The checkpoint to resume from (None: a new run); one-line ValueError when ``resume`` does not match
    what the run directory holds."""
    ckpt = checkpoint.latest(run) if run.exists() else None
    if ckpt is not None and not resume:
        raise ValueError(f"{run} already holds a training run; pass --resume to continue it or choose "
                         "another --out")
    if ckpt is None and resume:
        raise FieldError(message=f"`resume`: {run} has no checkpoint to resume from (nothing to resume); train "
                         "without `resume` to start a new run there")
    return ckpt


def check_same_model(run: Path, mcfg: GPTConfig) -> None:
    """One-line ValueError when the run's config.json describes another model than ``mcfg`` (a setting
    missing from an older run's file had its default), or is a link out of the run."""
    config_file = inside(run, run / "config.json", "run")
    try:
        saved = {**GPTConfig().to_dict(), **json.loads(config_file.read_text())["model"]}
    except (OSError, ValueError, KeyError, TypeError):
        return  # no readable record: the checkpoint's own run_config is compared after loading
    new = mcfg.to_dict()
    if saved.get("arch") != new["arch"]:
        raise FieldError(message=f"`resume` with `arch` {new['arch']}, but the run in {run} is a {saved.get('arch')} "
                         "model")
    changed = sorted(k for k in new if saved.get(k) != new[k])
    if changed:
        raise FieldError(message=f"`resume` with different model settings ({', '.join(changed)}) than the run in "
                         f"{run}")


def check_same_trajectory(saved: dict, run_config: dict, cfg: TrainConfig, run: Path) -> None:
    """One-line ValueError when the checkpoint's ``run_config`` (``saved``) and this one's would not continue the
    same trajectory: another model, trajectory setting, cosine length or dataset."""
    if {**GPTConfig().to_dict(), **saved["model"]} != run_config["model"]:  # older runs lack newer settings
        raise FieldError(message=f"`resume` with different model settings than the run in {run}")
    # runs saved before a setting existed ran with its default (precision: bf16)
    changed = [k for k in TRAJECTORY_SETTINGS
               if saved["train"].get(k, getattr(TrainConfig, k, None)) != run_config["train"].get(k)]
    if cfg.schedule == "cosine" and saved["train"]["max_steps"] != cfg.max_steps:
        changed.append("max_steps (it sets the cosine schedule)")
    if changed:
        raise FieldError(message=f"`resume` with different {', '.join(changed)} than the run in {run}: the run would "
                         "not continue the same trajectory")
    if saved["dataset"]["config_hash"] != run_config["dataset"]["config_hash"]:
        raise FieldError(message=f"`resume` with a different dataset than the run in {run} was trained on")
