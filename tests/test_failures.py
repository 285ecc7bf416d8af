"""A command that fails leaves its output as it was, and refuses what it cannot do in one line: a resume
takes the run's lock before reading the run; a failure (a full disk, simulated by a writer that raises ENOSPC;
an unreachable endpoint; a bad token) removes what a new output got and puts a resumed one back; each value a
command cannot use is refused naming the value and the fix."""

import errno
import json
import shutil

import numpy as np
import pytest
from conftest import TINY_MODEL, tiny_train_config

from orbitlaw.cli import main
from orbitlaw.models import checkpoint
from orbitlaw.provenance import OutputLock

SMALL = TINY_MODEL


@pytest.fixture(scope="module")
def env(tiny_run):
    return tiny_run


_config = tiny_train_config


def _train_args(data, out, *extra, **settings):
    """`orbitlaw train` of the fixture's model (its settings through --config) to 4 steps into ``out``."""
    config = out.parent / f"{out.name}.train.json"
    config.write_text(json.dumps({"preset": "tiny", "model_overrides": SMALL, "max_steps": 4, "checkpoint_every": 2,
                                  "eval_every": 2, "batch_size": 4, "seed": 0, **settings}))
    return ["train", "--data", str(data), "--config", str(config), "--out", str(out), "--quiet", *extra]


def _cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) <= 1, err  # every failure is one line
    return code, err


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


# ----------------------------------------------------------------------------------------------------
# Item 5: a resume takes the lock before it reads the run


def test_a_resume_beside_a_running_train_is_refused_before_it_reads_the_run(env, tmp_path, capsys):
    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    weights = checkpoint.latest(run) / "model.safetensors"
    with OutputLock(run / ".lock", f"run {run}"):  # a running train, halfway through replacing its checkpoint
        weights.write_bytes(weights.read_bytes()[:100])
        code, err = _cli(capsys, *_train_args(data, run, "--resume"))
    assert code == 2 and "being written by another orbitlaw process" in err, err
    assert "corrupted" not in err


# ----------------------------------------------------------------------------------------------------
# Item 6: a failed command leaves its output as it was


def test_a_full_disk_in_a_new_run_leaves_no_run(env, tmp_path, monkeypatch, capsys):
    data, _ = env
    monkeypatch.setattr(checkpoint, "save_file", _full_disk)  # the weights' writer: the first checkpoint fails
    code, err = _cli(capsys, *_train_args(data, tmp_path / "r"))
    assert code == 1 and "No space left on device" in err and str(tmp_path / "r") in err, err
    assert not (tmp_path / "r").exists()  # no config.json and metrics.jsonl without a checkpoint


def test_a_full_disk_in_a_resumed_run_leaves_it_as_it_was(env, tmp_path, monkeypatch, capsys):
    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    before = _files(run)
    monkeypatch.setattr(checkpoint, "save_file", _full_disk)
    code, err = _cli(capsys, *_train_args(data, run, "--resume"))
    assert code == 1 and "No space left on device" in err, err
    assert _files(run) == before  # its checkpoint, config.json and metrics.jsonl (no rows past the checkpoint)
    monkeypatch.undo()
    assert _cli(capsys, *_train_args(data, run, "--resume"))[0] == 0  # and it resumes


def test_out_of_vocabulary_tokens_leave_no_run(env, tmp_path, capsys):
    from orbitlaw.orbits.manifest import file_digest as _file_digest
    from orbitlaw.orbits.manifest import manifest_digest

    data, _ = env
    bad = tmp_path / "data"
    shutil.copytree(data, bad)
    tokens = np.load(bad / "train" / "tokens.npy", mmap_mode="r+")
    tokens[:, 5, 1] = 65535  # past the first position, which train checks before writing anything
    tokens.flush()
    del tokens
    manifest = json.loads((bad / "manifest.json").read_text())  # a manifest that agrees: the ids are checked
    info = manifest["split_info"]["train"]["files"]["tokens"]
    info["sha256_of_blocks"] = _file_digest(np.load(bad / "train" / "tokens.npy", mmap_mode="r"),
                                            manifest["shard_size"])
    manifest["manifest_sha256"] = manifest_digest(manifest)  # resealed, as an adversary could
    (bad / "manifest.json").write_text(json.dumps(manifest))
    code, err = _cli(capsys, *_train_args(bad, tmp_path / "r"))
    assert code == 2 and "outside the vocabulary" in err, err
    assert not (tmp_path / "r").exists()


def _probe(env, out, *extra):
    data, run = env
    return ["probe", "--data", str(data), "--out", str(out), "--train-sequences", "12", "--heldout-sequences", "4",
            "--device", "cpu", "--quiet", *extra] + ([] if "--oracle" in extra else ["--run", str(run)])


def test_a_full_disk_in_probe_leaves_no_directory(env, tmp_path, monkeypatch, capsys):
    from orbitlaw.discovery.probes import probe_data

    monkeypatch.setattr(probe_data, "write_csv_atomic", _full_disk)  # the predictions' writer
    out = tmp_path / "oracle"
    code, err = _cli(capsys, *_probe(env, out, "--oracle", "true-law"))
    assert code == 1 and "No space left on device" in err, err
    assert not out.exists()
    monkeypatch.setattr(checkpoint, "save_file", _full_disk)  # a fine-tune's first checkpoint
    out = tmp_path / "probe"
    code, err = _cli(capsys, *_probe(env, out, "--steps", "1", "--batch", "2", "--eval-train-sequences", "2"))
    assert code == 1 and "No space left on device" in err, err
    assert not out.exists()
    assert not list(tmp_path.iterdir())  # nor a lock or a temporary beside them


def test_llm_run_against_an_unreachable_endpoint_leaves_nothing(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from orbitlaw.discovery.llm.runner import run as run_llm

    monkeypatch.setenv("ORBITLAW_LLM_API_KEY", "sk-test-failures")
    out = tmp_path / "llm"
    with pytest.raises(RuntimeError, match="every request failed"):
        run_llm("openai-compatible", "m", 1, out, base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5.0,
                run_discovery=False, progress=False)
    assert not out.exists()  # no prompts/ left behind


# ----------------------------------------------------------------------------------------------------
# Item 7: refused in one line naming the value and the fix


def test_train_resume_with_nothing_to_resume_is_refused(env, tmp_path, capsys):
    data, _ = env
    code, err = _cli(capsys, *_train_args(data, tmp_path / "new", "--resume"))
    assert code == 2 and "nothing to resume" in err and "without --resume" in err, err
    assert not (tmp_path / "new").exists()


def test_a_negative_warmup_is_refused(env, tmp_path, capsys):
    data, _ = env
    with pytest.raises(ValueError, match="warmup_steps must be >= 0"):
        _config(data, tmp_path / "r", warmup_steps=-5).validate()
    code, err = _cli(capsys, "train", "--data", data, "--preset", "tiny", "--warmup-steps", "-5", "--out",
                     tmp_path / "r", "--quiet")
    assert code == 2 and "warmup-steps must be >= 0" in err and "-5" in err, err
    assert not (tmp_path / "r").exists()


def test_evaluate_refuses_zero_sequences(env, tmp_path, capsys):
    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    code, err = _cli(capsys, "evaluate", "--run", run, "--data", data, "--sequences", "0")
    assert code == 2 and "--sequences" in err and "got 0" in err, err
    assert not (run / "eval.json").exists()


def test_evaluate_refuses_zero_extrapolation_sequences(env, tmp_path, capsys):
    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    code, err = _cli(capsys, "evaluate", "--run", run, "--data", data, "--lengths", "1",
                     "--extrapolation-sequences", "0")
    assert code == 2 and "--extrapolation-sequences must be >= 1" in err, err
    assert not (run / "eval.json").exists()  # no NaN loss written


def test_simulate_refuses_splits_larger_than_the_disk(tmp_path, capsys):
    code, err = _cli(capsys, "simulate", "--preset", "binary", "--splits", "train=10000000000", "--seed", "0",
                     "--out", tmp_path / "d", "--quiet")
    assert code == 1 and "No space left for --splits train=10000000000" in err and "lower the split sizes" in err, err
    assert not list(tmp_path.iterdir())


def test_plot_names_the_image_it_was_asked_for(env, tmp_path, capsys):
    data, _ = env
    for out in (tmp_path / "noimage", tmp_path / "figure.txt"):
        code, err = _cli(capsys, "plot", "--data", data, "--out", out)
        assert code == 2 and f"{out} does not name an image file" in err and ".tmp" not in err, err
    code, err = _cli(capsys, "plot", "--data", data, "--out", tmp_path)
    assert code == 2 and "is a directory" in err, err
    out = tmp_path / "new" / "system.png"  # a directory that does not exist yet is made, as other outputs do
    assert _cli(capsys, "plot", "--data", data, "--out", out)[0] == 0 and out.is_file()


def test_discover_names_a_directory_given_as_its_input(tmp_path, capsys):
    code, err = _cli(capsys, "discover", "--input", tmp_path, "--target", "F", "--out", tmp_path / "LAW.json")
    assert code == 2 and "is a directory, not a CSV file" in err and "does not exist" not in err, err


def test_a_damaged_trainer_state_is_called_damaged(env, tmp_path, monkeypatch, capsys):
    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    ckpt = checkpoint.latest(run)
    state = ckpt / "trainer.pt"
    raw = state.read_bytes()
    at = raw.index(b"ctorch\nByteStorage\n") + len(b"ctorch\n")
    state.write_bytes(raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:])  # one flipped bit: torch.CyteStorage
    code, err = _cli(capsys, *_train_args(data, run, "--resume"))  # checked against its checksum
    assert code == 2 and "trainer.pt is corrupted or truncated" in err, err
    (ckpt / "checksums.json").unlink()  # a checkpoint from before checksums, allowed: torch's refusal is read
    monkeypatch.setenv(checkpoint.ALLOW_UNCHECKED_ENV, "0")  # the flag sets it to 1; restored after the test
    code, err = _cli(capsys, "--allow-unchecked", *_train_args(data, run, "--resume"))
    assert code == 2 and "trainer.pt is corrupted or truncated" in err and "could run code" not in err, err


def test_probe_nan_names_no_directory_that_does_not_exist(env, tmp_path, monkeypatch, capsys):
    import torch

    from orbitlaw.discovery.probes import probe

    monkeypatch.setattr(probe, "masked_mse", lambda pred, target: pred.float().sum() * torch.nan)
    out = tmp_path / "probe"
    code, err = _cli(capsys, *_probe(env, out, "--steps", "2", "--batch", "2", "--eval-train-sequences", "2"))
    assert code == 3 and "probe loss became nan at step 1" in err, err
    assert "nothing is kept" in err and "--lr" in err and not out.exists()


def test_a_full_disk_names_the_file_it_was_writing(env, tmp_path, monkeypatch, capsys):
    import os

    data, good = env
    run = tmp_path / "run"
    shutil.copytree(good, run)
    monkeypatch.setattr(os, "fsync", _full_disk)  # where a full disk shows when the writes were buffered
    code, err = _cli(capsys, "evaluate", "--run", run, "--data", data, "--sequences", "2")
    assert code == 1 and f"No space left on device: {run / 'eval.json'}" in err and ".tmp" not in err, err
    assert not (run / "eval.json").exists() and not list(run.glob(".*tmp*"))


def test_a_refused_command_leaves_no_directory_it_would_have_made(env, tmp_path, capsys):
    data, run = env
    table = tmp_path / "t.csv"
    r = np.linspace(1, 3, 60)
    table.write_text("r,m1,m2,F\n" + "".join(f"{x},1,1,{39.5 / x**2}\n" for x in r))
    new = tmp_path / "new"
    cases = [
        (["discover", "--input", table, "--target", "nope", "--out", new / "a" / "LAW.json"],
         "column 'nope' not found"),
        (["discover", "--input", table, "--target", "F", "--features", "r,m1,m2", "--subset", "zz", "--out",
          new / "b" / "LAW.json"], "column 'zz' not found"),
        (["train", "--data", tmp_path / "nowhere", "--preset", "tiny", "--out", new / "c" / "run"],
         "not an orbitlaw dataset"),
        (["probe", "--run", run, "--data", tmp_path / "nowhere", "--out", new / "d" / "probe"], "nowhere"),
    ]
    for args, message in cases:
        code, err = _cli(capsys, *args)
        assert code == 2 and message in err, (args, err)
        assert not new.exists(), (args, sorted(p.relative_to(tmp_path) for p in new.rglob("*")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_probe_batch_that_cannot_fit_and_a_split_with_nothing_held_out_are_one_line(env, tmp_path, capsys):
    data, run = env
    code, err = _cli(capsys, "probe", "--run", run, "--data", data, "--out", tmp_path / "p", "--batch", "100000000",
                     "--steps", "1", "--quiet")
    assert code == 2 and "a step of --batch 100000000" in err and "lower --batch (to at most" in err, err
    code, err = _cli(capsys, "probe", "--run", run, "--data", data, "--out", tmp_path / "p", "--train-sequences",
                     "1000000000", "--steps", "1", "--quiet")
    assert code == 2 and "--train-sequences 1000000000 leaves no held-out sequence of the split's 16" in err, err
    assert not (tmp_path / "p").exists()
