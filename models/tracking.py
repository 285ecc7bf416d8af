"""Optional experiment tracking: the rows the trainer writes to ``RUN/metrics.jsonl`` (which stays the
record) also go to TensorBoard or Weights & Biases (the reference study's tracker).

- ``tensorboard``: event files in ``RUN/tensorboard/`` (``tensorboard --logdir RUN``); a resumed run
  purges the events after its checkpoint's step, as ``metrics.jsonl`` is cut back, so the curves show
  one trajectory.
- ``wandb``: one W&B run per run directory (its id is kept in ``RUN/wandb-id.txt``, so a resumed run
  continues it), with the run's ``config.json`` as its config and its files under ``RUN/wandb/``. The
  project is ``$WANDB_PROJECT`` (default ``orbitlaw``); ``WANDB_MODE=offline`` works without a network
  (``wandb sync RUN/wandb/offline-run-*`` uploads later). W&B keeps steps increasing: after a resume,
  rows at or below the last step it already has are dropped by W&B (``metrics.jsonl`` keeps them).

Both packages are optional (``pip install "orbitlaw[tracking]"``) and imported only when asked for.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from orbitlaw.provenance import write_text_atomic
from orbitlaw.validate import FieldError

TRACKERS = ("none", "tensorboard", "wandb")


def check_tracker(name: str) -> None:
    """One-line ValueError for an unknown tracker or one whose package is not installed."""
    if name not in TRACKERS:
        raise ValueError(f"unknown --log-to {name!r}; choose {', '.join(TRACKERS)}")
    package = None if name == "none" else name  # each tracker's package has its name
    if package is not None:
        import importlib.util

        if importlib.util.find_spec(package) is None:
            raise FieldError(message=f"`log_to` {name} needs the {package} package: pip install 'orbitlaw[tracking]'")


class Tracker:
    """Sends metric rows (``{"step": int, name: float, ...}``) to nothing; subclasses send them somewhere."""

    def log(self, row: dict) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker(Tracker):
    def __init__(self, run: Path, step: int):
        from torch.utils.tensorboard import SummaryWriter

        # events after the step the run (re)starts from belong to a trajectory that is being redone
        self.writer = SummaryWriter(log_dir=str(run / "tensorboard"), purge_step=step + 1)

    def log(self, row: dict) -> None:
        for name, value in row.items():
            if name != "step" and value is not None:
                self.writer.add_scalar(name, value, row["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker(Tracker):
    def __init__(self, run: Path, config: dict, step: int):
        try:
            import wandb
        except Exception as exc:  # a broken install (a protobuf mismatch, say) is a one-line error too
            raise FieldError(message=f"`log_to` wandb: the wandb package does not import: {exc}") from None

        id_file = run / "wandb-id.txt"
        if id_file.exists() and step > 0:  # a resumed run continues its W&B run; a fresh start gets a new one
            run_id = id_file.read_text().strip()
        else:
            run_id = secrets.token_hex(4)
            write_text_atomic(id_file, run_id + "\n")
        try:
            self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "orbitlaw"), id=run_id, resume="allow",
                                  name=run.resolve().name, dir=str(run), config=config, allow_val_change=True)
        except Exception as exc:  # wandb's errors (login, network, settings) come in many types
            why = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise FieldError(message=f"`log_to` wandb: {why} (WANDB_MODE=offline logs without an account or a "
                             "network)") \
                from None

    def log(self, row: dict) -> None:
        self.run.log({k: v for k, v in row.items() if k != "step" and v is not None}, step=row["step"])

    def close(self) -> None:
        self.run.finish()


def open_tracker(name: str, run: Path, config: dict, step: int) -> Tracker:
    """The tracker ``name`` (one of :data:`TRACKERS`) for run directory ``run``, starting at ``step`` (the
    step a resumed run continues from, 0 for a new one); ``config`` is the run's ``config.json``."""
    check_tracker(name)
    if name == "tensorboard":
        return TensorBoardTracker(Path(run), step)
    if name == "wandb":
        return WandbTracker(Path(run), config, step)
    return Tracker()
