"""Experiment tracking (--log-to tensorboard|wandb): the trackers receive exactly the rows of
metrics.jsonl, a resumed run continues them without duplicates, and a tracker that cannot start is a
one-line error that leaves no run behind. W&B runs offline (no account, no network)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orbitlaw import orbits
from orbitlaw.models.metrics import read_metrics
from orbitlaw.models.tracking import check_tracker
from orbitlaw.models.train import TrainConfig, train

SMALL = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return orbits.simulate("two-body", {"train": 16, "val": 4}, 0, tmp_path_factory.mktemp("d") / "data",
                           progress=False)


def _settings(**kw) -> dict:
    return {"preset": "tiny", "max_steps": 6, "checkpoint_every": 4, "eval_every": 3, "log_every": 1,
            "batch_size": 4, "seed": 2, "device": "cpu", "model_overrides": SMALL, **kw}


def _killed_after_step_6(run: Path, train_to) -> None:
    """Train to step 4 (a checkpoint), then to 6, then put the run back as a kill after step 6 would leave
    it had its last checkpoint been step 4's: steps 5 and 6 are logged, and a resume redoes them."""
    train_to(4)
    saved = run.parent / "ckpt-4"
    shutil.copytree(run / "ckpt-00000004", saved)
    train_to(6)
    shutil.rmtree(run / "ckpt-00000006")
    shutil.copytree(saved, run / "ckpt-00000004", dirs_exist_ok=True)
    (run / "latest").write_text("ckpt-00000004\n")


def _rows(run: Path, key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in read_metrics(run) if r.get(key) is not None]


def test_tensorboard_receives_the_metrics_and_a_resume_replaces_the_steps_it_redoes(data, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"

    def train_to(steps):
        train(TrainConfig(data=str(data), out=str(run), log_to="tensorboard", **_settings(max_steps=steps)),
              resume=run.exists(), progress=False)

    _killed_after_step_6(run, train_to)
    train_to(6)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    for key in ("train_loss", "val_loss", "lr"):
        logged = [(e.step, e.value) for e in events.Scalars(key)]
        expected = _rows(run, key)
        assert [s for s, _ in logged] == [s for s, _ in expected], key  # steps 5, 6 once each
        assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-6), key
    assert [s for s, _ in _rows(run, "train_loss")] == [1, 2, 3, 4, 5, 6]


def _wandb_history(path: Path) -> list[dict]:
    own = Path(sys.executable).parent / "wandb"  # this environment's, before another one's on PATH
    wandb = str(own) if own.exists() else shutil.which("wandb")
    out = subprocess.run([wandb, "leet", "inspect", "--json", str(path)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [r["history"]["item"] for r in records if r.get("type") == "history"]


def test_wandb_offline_run_holds_the_metrics_and_a_resume_continues_the_same_run(data, tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(tmp_path / "cfg"),
           "WANDB_CACHE_DIR": str(tmp_path / "cache"), "WANDB_DATA_DIR": str(tmp_path / "wdata")}
    run = tmp_path / "run"

    def train_to(steps):
        settings = tmp_path / "train.json"
        settings.write_text(json.dumps(_settings(max_steps=steps)))
        cmd = [sys.executable, "-m", "orbitlaw", "train", "--data", str(data), "--config", str(settings), "--out",
               str(run), "--log-to", "wandb", "--quiet"] + (["--resume"] if run.exists() else [])
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr

    train_to(4)
    run_id = (run / "wandb-id.txt").read_text().strip()
    (log,) = run.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb")
    history = _wandb_history(log)
    assert [(h["_step"], h["train_loss"]) for h in history] == _rows(run, "train_loss")
    assert [(h["_step"], h["val_loss"]) for h in history if "val_loss" in h] == _rows(run, "val_loss")
    shutil.rmtree(run)

    _killed_after_step_6(run, train_to)
    train_to(6)
    assert (run / "wandb-id.txt").read_text().strip() != run_id  # a new run directory, a new W&B run
    run_id = (run / "wandb-id.txt").read_text().strip()
    logged = [h["_step"] for log in sorted(run.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
              for h in _wandb_history(log)]
    assert sorted(set(logged)) == [1, 2, 3, 4, 5, 6]  # one W&B run across three processes
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["log_to"] == "wandb" and config["train"]["max_steps"] == 6


def test_a_tracker_that_cannot_start_is_one_line_and_leaves_no_run(data, tmp_path, monkeypatch):
    import importlib.util

    with pytest.raises(ValueError, match="unknown --log-to 'mlflow'"):
        check_tracker("mlflow")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match=r"`log_to` wandb needs the wandb package: pip install 'orbitlaw\[tracking\]'"):
        check_tracker("wandb")
    monkeypatch.undo()

    settings = tmp_path / "train.json"
    settings.write_text(json.dumps(_settings()))
    run = tmp_path / "run"
    bad = subprocess.run([sys.executable, "-m", "orbitlaw", "train", "--data", str(data), "--config", str(settings),
                          "--out", str(run), "--log-to", "wandb", "--quiet"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "WANDB_MODE": "no-such-mode"})
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith("orbitlaw train: error: --log-to wandb:") and not run.exists()
    flag = subprocess.run([sys.executable, "-m", "orbitlaw", "train", "--data", str(data), "--preset", "tiny",
                           "--out", str(run), "--log-to", "mlflow"], capture_output=True, text=True, timeout=120)
    assert flag.returncode == 2 and "--log-to" in flag.stderr and not run.exists()
