"""Training runs: exact resume after a real kill, signals, NaN, bad input, torchrun, evaluation."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.models.loop import scheduled_lr
from orbitlaw.models.metrics import read_metrics
from orbitlaw.models.train import TrainConfig, TrainingStopped, learning_rate, train

SMALL = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return orbits.simulate("vafa2025", {"train": 64, "val": 8}, 0, tmp_path_factory.mktemp("d") / "data",
                           progress=False)


def _config(data, out, **kw):
    base = dict(data=str(data), out=str(out), preset="tiny", max_steps=12, checkpoint_every=3, eval_every=6,
                log_every=1, batch_size=4, seed=5, model_overrides=SMALL)
    return TrainConfig(**{**base, **kw})


def _losses(run):
    return [(r["step"], r["train_loss"], r.get("val_loss")) for r in read_metrics(run)]


def _script(cfg: TrainConfig, resume: bool) -> list[str]:
    code = ("import sys; from orbitlaw.models.train import TrainConfig, TrainingStopped, train\n"
            f"try: train(TrainConfig(**{cfg.__dict__!r}), resume={resume}, progress=False)\n"
            "except TrainingStopped as exc: print(exc, file=sys.stderr); sys.exit(exc.exit_code)")
    return [sys.executable, "-c", code]


def test_killed_run_resumes_to_identical_losses(data, tmp_path):
    ref = train(_config(data, tmp_path / "ref"), progress=False)
    assert ref["step"] == 12
    cfg = _config(data, tmp_path / "run")
    proc = subprocess.Popen(_script(cfg, False))
    latest = tmp_path / "run" / "latest"
    deadline = time.time() + 120
    while time.time() < deadline and not (latest.exists() and latest.read_text().strip() == "ckpt-00000006"):
        time.sleep(0.01)
    time.sleep(0.05)
    proc.kill()  # SIGKILL: no chance to save anything
    proc.wait()
    assert proc.returncode != 0
    resumed = subprocess.run(_script(cfg, True), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert _losses(tmp_path / "run") == _losses(tmp_path / "ref")
    assert (tmp_path / "run" / "loss.png").exists()


def test_sigterm_saves_a_checkpoint_and_resume_matches(data, tmp_path):
    ref = _config(data, tmp_path / "ref", checkpoint_every=100)
    train(ref, progress=False)
    cfg = _config(data, tmp_path / "run", checkpoint_every=100)
    proc = subprocess.Popen(_script(cfg, False), stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 4):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "continue with --resume" in err
    train(cfg, resume=True, progress=False)
    assert _losses(tmp_path / "run") == _losses(tmp_path / "ref")


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(data, tmp_path, monkeypatch):
    from orbitlaw.models import gpt

    original = gpt.GPT.loss
    calls = {"n": 0}

    def poisoned(self, out, targets):
        calls["n"] += 1
        loss = original(self, out, targets)
        return loss * float("nan") if calls["n"] == 5 else loss

    monkeypatch.setattr(gpt.GPT, "loss", poisoned)
    cfg = _config(data, tmp_path / "run", eval_every=100)
    with pytest.raises(TrainingStopped, match="loss became nan at step 5.*last good checkpoint is step 3"):
        train(cfg, progress=False)
    assert (tmp_path / "run" / "latest").read_text().strip() == "ckpt-00000003"
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1, 2, 3, 4]


_cli = run_cli  # in this process: the same exit code and output, without a new interpreter


def test_bad_training_input_gives_one_line_errors(data, tmp_path):
    base = ["train", "--data", str(data), "--preset", "tiny", "--out", str(tmp_path / "r"), "--quiet"]
    cases = [
        (["--attention", "flash"], "invalid choice: 'flash'"),
        (["--preset", "huge"], "invalid choice: 'huge'"),
        (["--attention", "lssar", "--p", "0"], "--p must be > 0"),
        (["--max-steps", "0"], "max-steps must be >= 1"),
        (["--seed", "-1"], "seed must be >= 0"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "no CUDA device is available"))
    for extra, message in cases:
        args = base + extra if "--preset" not in extra else [a for a in base if a != "tiny"] + extra
        if "--preset" in extra:
            args = ["train", "--data", str(data), "--out", str(tmp_path / "r"), "--quiet", *extra]
        result = _cli(*args)
        assert result.returncode == 2, (extra, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "r").exists()
    result = _cli("train", "--data", str(tmp_path / "nowhere"), "--preset", "tiny", "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and "not an orbitlaw dataset" in result.stderr


def test_vocabulary_mismatch_and_existing_run_are_refused(data, tmp_path):
    with pytest.raises(ValueError, match="does not match the model"):
        train(_config(data, tmp_path / "v", model_overrides={**SMALL, "vocab_size": 7010}), progress=False)
    train(_config(data, tmp_path / "run", max_steps=3), progress=False)
    with pytest.raises(ValueError, match="pass --resume"):
        train(_config(data, tmp_path / "run", max_steps=3), progress=False)


def test_corrupted_checkpoint_on_resume_is_reported(data, tmp_path):
    run = tmp_path / "run"
    train(_config(data, run, max_steps=3), progress=False)
    weights = run / "ckpt-00000003" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="model.safetensors is corrupted or truncated"):
        train(_config(data, run, max_steps=6), resume=True, progress=False)
    assert (run / "metrics.jsonl").read_text() == before
    assert weights.stat().st_size == 1000  # nothing overwritten


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch has no torch.distributed")
def test_torchrun_two_processes_match_one_process(data, tmp_path):
    common = ["train", "--data", str(data), "--preset", "tiny", "--max-steps", "3", "--batch-size", "4",
              "--log-every", "1", "--eval-every", "100", "--checkpoint-every", "100", "--quiet", "--seed", "3",
              "--device", "cpu"]  # two processes on the CPU (gloo), also on a machine with one GPU
    single = _cli(*common, "--out", str(tmp_path / "one"))
    assert single.returncode == 0, single.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # torchrun of the environment running the tests (a `torchrun` on PATH may be another environment's)
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "orbitlaw", *common, "--out", str(tmp_path / "two")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    one, two = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "two")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two, strict=True):
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-4 * abs(a["train_loss"]), (a, b)
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    assert config["world_size"] == 2


def test_evaluate_writes_metrics_and_extrapolates_with_rope(data, tmp_path):
    learned = tmp_path / "learned"
    train(_config(data, learned, max_steps=2), progress=False)
    result = _cli("evaluate", "--run", str(learned), "--data", str(data), "--sequences", "4")
    assert result.returncode == 0, result.stderr
    ev = json.loads((learned / "eval.json").read_text())
    for key in ("loss", "accuracy", "position_error_au", "r2_positions", "code_version"):
        assert key in ev
    assert 0 <= ev["accuracy"]["x"] <= 1 and ev["position_error_au"] > 0
    base = ev["baselines"]
    assert base["targets"] > 0 and set(base) == {"targets", "model", "repeat_last", "constant_velocity"}
    assert all(base[k]["position_error_au"] >= 0 for k in ("model", "repeat_last", "constant_velocity"))
    bad = _cli("evaluate", "--run", str(learned), "--data", str(data), "--lengths", "1,2")
    assert bad.returncode == 2 and "needs rotary positions" in bad.stderr

    rope = tmp_path / "rope"
    train(_config(data, rope, max_steps=2, pos="rope"), progress=False)
    result = _cli("evaluate", "--run", str(rope), "--data", str(data), "--sequences", "4", "--lengths", "1,2,4",
                  "--extrapolation-sequences", "2")
    assert result.returncode == 0, result.stderr
    ext = json.loads((rope / "eval.json").read_text())["extrapolation"]
    assert ext["context"] == 64 and set(ext["loss"]) == {"1", "2", "4"}
    assert all(v > 0 for v in ext["loss"].values())


def test_resume_refuses_settings_that_change_the_trajectory(data, tmp_path):
    run = tmp_path / "run"
    train(_config(data, run, max_steps=3), progress=False)
    with pytest.raises(ValueError, match="different batch_size, lr than the run"):
        train(_config(data, run, max_steps=6, batch_size=2, lr=1e-3), resume=True, progress=False)
    with pytest.raises(ValueError, match="micro_batch must be between 1 and the batch size"):
        train(_config(data, tmp_path / "other", micro_batch=-1), progress=False)
    assert train(_config(data, run, max_steps=5), resume=True, progress=False)["step"] == 5


def test_baseline_guesses_repeat_and_extrapolate_each_body():
    from orbitlaw.models.evaluate import _baseline_guesses

    # targets of one sequence with 2 bodies per step: body A moves +10 bins a step, body B stays; a pad at the end
    true = np.array([[100, 50], [900, 900], [110, 50], [900, 900], [120, 50], [900, 900], [130, 50], [7002, 7002]])
    pred = true.copy()
    target, guesses = _baseline_guesses(true, pred, bodies=2, num_bins=7000)
    assert target.tolist() == [[120, 50], [900, 900], [130, 50]]
    assert guesses["repeat_last"].tolist() == [[110, 50], [900, 900], [120, 50]]
    assert guesses["constant_velocity"].tolist() == target.tolist()
    assert _baseline_guesses(true[:3], pred[:3], bodies=2, num_bins=7000) is None


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch has no torch.distributed")
def test_the_study_hands_torchrun_the_whole_training_configuration(data, tmp_path):
    from orbitlaw.study import stages

    spec = {"preset": "tiny", "pos": "rope", "max_steps": 2, "batch_size": 4, "lr": 1e-3, "schedule": "cosine",
            "warmup_steps": 1, "eval_every": 2, "checkpoint_every": 2, "log_every": 1, "eval_sequences": 3,
            "seed": 0, "device": "cpu", "weight_decay": 0.05, "model_overrides": SMALL}
    result = stages.train(data, tmp_path / "runs" / "softmax", "softmax", spec, progress=False, nproc=2)
    assert result["steps"] == 2
    config = json.loads((tmp_path / "runs" / "softmax" / "config.json").read_text())
    assert config["world_size"] == 2
    for key, value in spec.items():  # nothing dropped on the way (eval_sequences was, before)
        assert config["train"][key] == value, key


def test_lr_schedules_warm_up_then_hold_or_decay_to_their_floor():
    """The one schedule pretraining and the probe's fine-tune share: linear warmup, then constant, or a
    cosine reaching min_lr at step total_steps (half-way at the middle)."""
    assert [scheduled_lr(1.0, s, 10, "constant", warmup_steps=4) for s in (0, 1, 3, 4, 9)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    cos = [scheduled_lr(1.0, s, 10, "cosine", min_lr=0.1) for s in range(11)]
    assert cos[0] == 1.0 and cos[-1] == pytest.approx(0.1) and cos[5] == pytest.approx(0.55)
    assert all(a > b for a, b in zip(cos, cos[1:], strict=False))
    cfg = TrainConfig(data="d", out="o", max_steps=100, lr=1e-3, min_lr=1e-4, schedule="cosine", warmup_steps=10)
    assert [learning_rate(cfg, s) for s in (0, 9, 10, 100)] == [
        scheduled_lr(1e-3, s, 100, "cosine", 10, 1e-4) for s in (0, 9, 10, 100)]
    assert learning_rate(cfg, 9) == pytest.approx(1e-3) and learning_rate(cfg, 100) == pytest.approx(1e-4)


def test_a_diverged_update_stops_before_it_is_saved_and_evaluate_refuses_such_weights(data, tmp_path, monkeypatch):
    from orbitlaw.models import checkpoint
    from orbitlaw.models import train as train_module

    real = train_module.make_optimizer

    def overflowing(model, cfg, device):  # the last (6th) update overflows a weight, as an lr far too large would
        optimizer, steps = real(model, cfg, device), {"n": 0}
        step = optimizer.step

        def poisoned(*a, **kw):
            out = step(*a, **kw)
            steps["n"] += 1
            if steps["n"] == 6:
                with torch.no_grad():
                    next(model.parameters()).fill_(float("inf"))
            return out
        optimizer.step = poisoned
        return optimizer

    monkeypatch.setattr(train_module, "make_optimizer", overflowing)
    run = tmp_path / "run"
    with pytest.raises(TrainingStopped, match="step 6 made 1 weight tensors non-finite .*good checkpoint is step 3"):
        train(_config(data, run, max_steps=6, eval_every=100), progress=False)
    assert (run / "latest").read_text().strip() == "ckpt-00000003"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]  # strict JSON only
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and all(np.isfinite(r["train_loss"]) for r in rows)
    monkeypatch.undo()
    weights, state = checkpoint.load(run / "ckpt-00000003")
    weights[next(iter(weights))][0] = float("nan")  # a checkpoint a diverged run wrote before this check
    bad = tmp_path / "bad"
    bad.mkdir()
    checkpoint.save(bad, 3, _NamedWeights(weights), state)
    (bad / "config.json").write_text((run / "config.json").read_text())
    out = run_cli("evaluate", "--run", bad, "--data", data)
    assert out.returncode == 2 and "holds non-finite weights (1 of" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    for value in ("inf", "nan", "-1"):
        refused = run_cli("train", "--data", data, "--preset", "tiny", "--out", tmp_path / "r", "--lr", value,
                          "--quiet")
        assert refused.returncode == 2 and "--lr must be a finite number >= 0" in refused.stderr, refused.stderr
    assert not (tmp_path / "r").exists()
    for field, value in (("min_lr", float("inf")), ("weight_decay", -0.1), ("grad_clip", float("nan"))):
        with pytest.raises(ValueError, match=f"{field} must be a finite number >= 0"):
            _config(data, tmp_path / "r", **{field: value}).validate()
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        _config(data, tmp_path / "r", betas=(0.9, 1.0)).validate()


class _NamedWeights(torch.nn.Module):
    """A module whose state dict is ``weights``, to save a checkpoint of chosen tensors."""

    def __init__(self, weights):
        super().__init__()
        self.weights = weights

    def state_dict(self, *a, **kw):
        return self.weights


def test_a_batch_that_cannot_fit_in_memory_is_refused_before_anything_is_written(data, tmp_path, monkeypatch):
    from orbitlaw.models import memory
    from orbitlaw.models.presets import model_config

    start = time.perf_counter()
    huge = run_cli("train", "--data", data, "--preset", "tiny", "--max-steps", "1", "--batch-size", "100000", "--out",
                   tmp_path / "r", "--quiet")
    assert huge.returncode == 2 and "a step of --batch-size 100000" in huge.stderr and "GiB free" in huge.stderr
    assert len(huge.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
    assert time.perf_counter() - start < 10
    config, cpu = model_config("tiny", "softmax"), torch.device("cpu")
    one = memory.step_bytes_lower_bound(config, 1, 256)
    assert one == 4 * 256 * (config.n_layer * 8 * config.n_embd + 4 * config.vocab_size)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 20 * one)  # 20 sequences fit at once
    with pytest.raises(ValueError, match="set --micro-batch 16 \\(it divides the batch and fits\\)"):
        memory.check_fits(config, 64, 64, 64, 256, cpu)
    memory.check_fits(config, 64, 64, 16, 256, cpu)  # 16 at once fit
    with pytest.raises(ValueError, match="one sequence alone does not fit"):
        monkeypatch.setattr(memory, "available_bytes", lambda device: one // 2)
        memory.check_fits(config, 64, 64, 1, 256, cpu)
