"""Nothing is computed on damaged inputs, and nothing is followed out of a run or a dataset: a
flipped byte in a dataset file or in a checkpoint's weights, a manifest missing a key,
of the wrong shape or naming a file outside the dataset, and links out of a run are all refused with one
line naming the file, before anything is computed or written, and no error quotes a file's contents."""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, tiny_train_config

from orbitlaw import orbits
from orbitlaw.cli import main
from orbitlaw.discovery.probes.probe import ProbeConfig, finetune
from orbitlaw.models import checkpoint
from orbitlaw.models.evaluate import evaluate, load_run
from orbitlaw.models.train import train

SMALL = TINY_MODEL
SECRET = "TOPSECRET-a1b2c3d4e5"


@pytest.fixture(scope="module")
def env(tiny_run):
    return tiny_run


_train_config = tiny_train_config


def _probe_config(run, data, out):
    return ProbeConfig(run=str(run), data=str(data), out=str(out), steps=1, batch=2, train_sequences=12,
                       heldout_sequences=4, device="cpu", eval_train_sequences=2)


def _one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert len(text.strip().splitlines()) == 1, text
    return text


def _copy(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _flip(path, index, fn):
    """Rewrite one element of a .npy file in place (``fn(old) -> new``), as a flipped bit on disk would."""
    arr = np.load(path, mmap_mode="r+")
    arr[index] = fn(arr[index])
    arr.flush()
    del arr


def _cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    return code, err


# ----------------------------------------------------------------------------------------------------
# Damaged datasets


def test_an_in_range_token_flip_is_refused_by_train_evaluate_and_probe(env, tmp_path):
    data, run = env
    bad = _copy(data, tmp_path / "data")
    for split in ("train", "val"):
        _flip(bad / split / "tokens.npy", (2, 7, 0), lambda v: v ^ 1)  # still a valid bin id
    with pytest.raises(ValueError, match=r"train/tokens.npy is corrupted: checksum mismatch") as err:
        train(_train_config(bad, tmp_path / "r"), progress=False)
    _one_line(err)
    assert not (tmp_path / "r").exists()  # refused before the run directory was written
    with pytest.raises(ValueError, match=r"val/tokens.npy is corrupted: checksum mismatch") as err:
        evaluate(run, bad, split="val", n_seq=4)
    _one_line(err)
    _refused_by_probe(run, bad, tmp_path / "p", "train/tokens.npy")


def _refused_by_probe(run, data, out, file: str) -> None:
    """A probe on the damaged ``data`` fails with one line naming ``file``, before ``out`` is written."""
    with pytest.raises(ValueError, match=rf"{file} is corrupted: checksum mismatch") as err:
        finetune(_probe_config(run, data, out), progress=False)
    _one_line(err)
    assert not out.exists()


def test_a_flipped_force_byte_is_refused_by_probe(env, tmp_path):
    data, run = env
    bad = _copy(data, tmp_path / "data")
    flip_exponent = lambda v: np.frombuffer(struct.pack("<d", v)[:7] + b"\x7e", "<f8")[0]  # noqa: E731
    _flip(bad / "train" / "forces.npy", (3, 5, 0, 0), flip_exponent)
    _refused_by_probe(run, bad, tmp_path / "p", "train/forces.npy")


def test_verify_names_a_damaged_file_no_reader_of_tokens_would_open(env, tmp_path):
    data, _ = env
    bad = _copy(data, tmp_path / "data")
    _flip(bad / "train" / "velocities.npy", (0, 1, 0, 0), lambda v: v + 1e-12)
    assert len(orbits.load_dataset(bad)["train"].tokens) == 16  # on-read: the velocities are not read, so not hashed
    with pytest.raises(ValueError, match="velocities.npy is corrupted: checksum mismatch"):
        np.asarray(orbits.load_dataset(bad)["train"].velocities)
    with pytest.raises(ValueError, match="velocities.npy is corrupted: checksum mismatch"):
        orbits.load_dataset(bad, verify=True)  # every file, now


def _manifest_cases():
    """(name, edit of the manifest dict returning the manifest to write)."""
    def drop(key):
        def edit(m):
            del m[key]
            return m
        return edit

    def drop_files(m):
        del m["split_info"]["train"]["files"]
        return m

    def set_key(key, value):
        def edit(m):
            m[key] = value
            return m
        return edit

    cases = [(f"no {key}", drop(key)) for key in ("config_hash", "preset", "seed", "params", "splits", "tokenizer",
                                                  "split_info")]
    cases += [("no files", drop_files), ("a JSON list", lambda m: [m]), ("seed edited", set_key("seed", 1)),
              ("seed a string", set_key("seed", "0")), ("splits a list", set_key("splits", ["train"])),
              ("tokenizer empty", set_key("tokenizer", {}))]
    return cases


@pytest.mark.parametrize("name, edit", _manifest_cases(), ids=[c[0] for c in _manifest_cases()])
def test_a_malformed_manifest_is_refused_by_load_and_verify(env, tmp_path, capsys, name, edit):
    data, run = env
    bad = _copy(data, tmp_path / "data")
    manifest = json.loads((bad / "manifest.json").read_text())
    (bad / "manifest.json").write_text(json.dumps(edit(manifest)))
    with pytest.raises(ValueError, match="manifest.json is corrupted") as err:
        orbits.load_dataset(bad)
    _one_line(err)
    code, text = _cli(capsys, "verify", "--data", bad)
    assert code == 2 and "manifest.json is corrupted" in text and "intact" not in text, text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text, text
    if name in ("a JSON list", "no tokenizer"):  # these gave tracebacks in every reader
        with pytest.raises(ValueError, match="manifest.json is corrupted"):
            train(_train_config(bad, tmp_path / "r"), progress=False)
        with pytest.raises(ValueError, match="manifest.json is corrupted"):
            evaluate(run, bad, n_seq=4)
        with pytest.raises(ValueError, match="manifest.json is corrupted"):
            finetune(_probe_config(run, bad, tmp_path / "p"), progress=False)


@pytest.mark.parametrize("where", ["../elsewhere/tokens.npy", "absolute", "train/../../elsewhere/tokens.npy"])
def test_a_file_entry_outside_the_dataset_is_refused(env, tmp_path, capsys, where):
    data, _ = env
    bad = _copy(data, tmp_path / "data")
    elsewhere = _copy(data / "train", tmp_path / "elsewhere")  # a well-formed file: it would load
    entry = str(elsewhere / "tokens.npy") if where == "absolute" else where
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["split_info"]["train"]["files"]["tokens"]["file"] = entry
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="manifest.json is corrupted: .*tokens") as err:
        orbits.load_dataset(bad)
    _one_line(err)
    code, text = _cli(capsys, "verify", "--data", bad)
    assert code == 2 and "manifest.json is corrupted" in text and len(text.strip().splitlines()) == 1, text
    with pytest.raises(ValueError, match="manifest.json is corrupted"):
        train(_train_config(bad, tmp_path / "r"), progress=False)


def test_a_dataset_file_or_manifest_linked_out_of_the_dataset_is_refused(env, tmp_path):
    data, _ = env
    bad = _copy(data, tmp_path / "data")
    outside = _copy(data, tmp_path / "outside")
    (bad / "train" / "tokens.npy").unlink()
    (bad / "train" / "tokens.npy").symlink_to(outside / "train" / "tokens.npy")  # identical bytes
    with pytest.raises(ValueError, match="tokens.npy leads outside the dataset") as err:
        np.asarray(orbits.load_dataset(bad)["train"].tokens)
    _one_line(err)
    with pytest.raises(ValueError, match="leads outside the dataset"):
        train(_train_config(bad, tmp_path / "r"), progress=False)
    (bad / "manifest.json").unlink()
    (bad / "manifest.json").symlink_to(outside / "manifest.json")
    with pytest.raises(ValueError, match="manifest.json leads outside the dataset"):
        orbits.load_dataset(bad)


# ----------------------------------------------------------------------------------------------------
# Damaged checkpoints


def _flip_weight_byte(weights, which: int, mask: int):
    """XOR byte ``which`` (0 = lowest mantissa byte, 3 = sign and exponent) of the first float32 of the
    first tensor of a safetensors file with ``mask``."""
    raw = bytearray(weights.read_bytes())
    header = struct.unpack("<Q", raw[:8])[0]
    raw[8 + header + which] ^= mask
    weights.write_bytes(bytes(raw))


@pytest.mark.parametrize("which, mask", [(0, 0x01), (3, 0x40)], ids=["mantissa", "exponent"])
def test_a_flipped_weight_is_refused_by_evaluate_and_resume(env, tmp_path, which, mask):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    _flip_weight_byte(checkpoint.latest(bad) / "model.safetensors", which, mask)
    with pytest.raises(ValueError, match="model.safetensors is corrupted or truncated: checksum mismatch") as err:
        evaluate(bad, data, n_seq=4)
    _one_line(err)
    assert not (bad / "eval.json").exists()
    with pytest.raises(ValueError, match="model.safetensors is corrupted or truncated: checksum mismatch"):
        train(_train_config(data, bad, max_steps=4), resume=True, progress=False)


def test_a_flipped_trainer_state_byte_is_refused_on_resume(env, tmp_path):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    state = checkpoint.latest(bad) / "trainer.pt"
    raw = bytearray(state.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    state.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="trainer.pt is corrupted or truncated: checksum mismatch"):
        train(_train_config(data, bad, max_steps=4), resume=True, progress=False)


def test_a_checkpoint_without_checksums_is_refused_unless_allowed(env, tmp_path, monkeypatch, capsys):
    """The documented choice (models/checkpoint.py): no checksums.json, nothing to check against, so refused
    unless asked for explicitly; then it loads unchecked."""
    data, run = env
    old = _copy(run, tmp_path / "run")
    (checkpoint.latest(old) / checkpoint.CHECKSUMS).unlink()
    with pytest.raises(ValueError, match="has no checksums.json, so model.safetensors cannot be checked"):
        load_run(old)
    code, err = _cli(capsys, "evaluate", "--run", old, "--data", data, "--sequences", "2")
    assert code == 2 and "pass orbitlaw --allow-unchecked" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv(checkpoint.ALLOW_UNCHECKED_ENV, "0")  # what the flag sets, restored after the test
    assert _cli(capsys, "--allow-unchecked", "evaluate", "--run", old, "--data", data, "--sequences", "2")[0] == 0
    model, _ = load_run(old)
    reference, _ = load_run(run)
    for key, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    train(_train_config(data, old, max_steps=4), resume=True, progress=False)
    assert (checkpoint.latest(old) / checkpoint.CHECKSUMS).exists()  # the next save writes one


# ----------------------------------------------------------------------------------------------------
# Links out of a run


def test_a_checkpoint_directory_linked_out_of_the_run_is_refused(env, tmp_path):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    ckpt = checkpoint.latest(bad)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(ckpt, outside / ckpt.name)
    ckpt.symlink_to(outside / ckpt.name, target_is_directory=True)
    with pytest.raises(ValueError, match="leads outside the run") as err:
        evaluate(bad, data, n_seq=4)
    _one_line(err)
    with pytest.raises(ValueError, match="leads outside the run"):
        train(_train_config(data, bad, max_steps=4), resume=True, progress=False)
    assert (outside / ckpt.name / "model.safetensors").exists()  # nothing touched out there


def test_a_checkpoint_file_linked_out_of_its_directory_is_refused(env, tmp_path):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    weights = checkpoint.latest(bad) / "model.safetensors"
    shutil.move(weights, tmp_path / "w.safetensors")
    weights.symlink_to(tmp_path / "w.safetensors")
    with pytest.raises(ValueError, match="model.safetensors leads outside the checkpoint"):
        evaluate(bad, data, n_seq=4)


def test_a_latest_link_out_of_the_run_is_refused_without_quoting_its_target(env, tmp_path, capsys):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + " and more private text\n")
    for target in [secret] + ([Path("/etc/passwd")] if Path("/etc/passwd").is_file() else []):
        (bad / "latest").unlink()
        (bad / "latest").symlink_to(target)
        with pytest.raises(ValueError, match="latest leads outside the run") as err:
            evaluate(bad, data, n_seq=4)
        text = _one_line(err)
        assert SECRET not in text and "root:" not in text
        with pytest.raises(ValueError, match="latest leads outside the run"):
            train(_train_config(data, bad, max_steps=4), resume=True, progress=False)
        code, out = _cli(capsys, "evaluate", "--run", bad, "--data", data)
        assert code == 2 and SECRET not in out and "root:" not in out and len(out.strip().splitlines()) == 1, out


def test_a_damaged_latest_inside_the_run_is_not_quoted(env, tmp_path):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    (bad / "latest").unlink()
    (bad / "latest").write_text(SECRET + "\n")
    with pytest.raises(ValueError, match="not a checkpoint of this run") as err:
        evaluate(bad, data, n_seq=4)
    assert SECRET not in _one_line(err)


def test_a_run_config_linked_out_of_the_run_is_refused(env, tmp_path):
    data, run = env
    bad = _copy(run, tmp_path / "run")
    shutil.move(bad / "config.json", tmp_path / "config.json")
    (bad / "config.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(ValueError, match="config.json leads outside the run"):
        evaluate(bad, data, n_seq=4)


@pytest.mark.parametrize("damage", ["header byte", "empty file", "cut in the header"])
def test_a_damaged_npy_file_is_one_line_in_every_reader_and_repair_rebuilds_it(env, tmp_path, capsys, damage):
    data, run = env
    bad = _copy(data, tmp_path / "data")
    tokens = bad / "val" / "tokens.npy"  # the split evaluate reads, as train and verify do
    raw = bytearray(tokens.read_bytes())
    if damage == "header byte":
        raw[raw.index(b"'descr'") + 2] ^= 0x55  # numpy parses the header with ast/tokenize: a TokenError
    tokens.write_bytes(b"" if damage == "empty file" else bytes(raw[:40]) if damage == "cut in the header"
                       else bytes(raw))
    for args in (("verify", "--data", bad), ("evaluate", "--run", run, "--data", bad),
                 ("train", "--data", bad, "--preset", "tiny", "--out", tmp_path / "r", "--max-steps", "1", "--quiet")):
        code, err = _cli(capsys, *args)
        assert code == 2 and "tokens.npy is corrupted: not a readable .npy file" in err, (args, err)
        assert "--repair" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()
    manifest = json.loads((bad / "manifest.json").read_text())
    splits = ",".join(f"{name}={info['count']}" for name, info in manifest["split_info"].items())
    again = ["simulate", "--preset", manifest["preset"], "--splits", splits, "--seed", manifest["seed"], "--out", bad,
             "--config", tmp_path / "params.json", "--quiet"]
    (tmp_path / "params.json").write_text(json.dumps(manifest["params"]))
    damaged = tokens.read_bytes()
    assert _cli(capsys, *again)[0] == 0 and tokens.read_bytes() == damaged  # without --repair: left as it is
    assert _cli(capsys, *again, "--repair")[0] == 0
    for f in sorted(data.rglob("*.npy")):  # rebuilt byte for byte as it was first written
        assert (bad / f.relative_to(data)).read_bytes() == f.read_bytes(), f
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "params.json"]  # no staging or damaged copy left
    assert _cli(capsys, "verify", "--data", bad)[0] == 0
