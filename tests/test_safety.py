"""Opening someone else's run or resume files runs nothing from them; one writer per output."""

import json
import os
import pickle

import numpy as np
import pytest
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.discovery.sr.expression_text import parse
from orbitlaw.discovery.sr.symbolic import discover_law
from orbitlaw.models.train import TrainConfig, train


class _Planted:
    """A pickle that, if ever unpickled by a loader that runs code, creates ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _cli(*args):
    return run_cli(*args)  # in this process: a payload that ran would have touched its file here too


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    data = orbits.simulate("binary", {"train": 16, "val": 4}, 0, root / "data", progress=False,
                           overrides={"seq_len": 21, "steps": 10})
    train(TrainConfig(data=str(data), out=str(root / "run"), preset="control", chunk_steps=2, max_steps=2,
                      checkpoint_every=2, eval_every=2, batch_size=4), progress=False)
    return data, root / "run"


def test_a_malicious_trainer_state_is_never_run(run, tmp_path):
    data, good = run
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    marker = tmp_path / "pwned"
    ckpt = bad / (bad / "latest").read_text().strip()
    with open(ckpt / "trainer.pt", "wb") as f:
        pickle.dump(_Planted(marker), f)
    import hashlib

    sums = json.loads((ckpt / "checksums.json").read_text())  # an adversary rewrites the checksum too
    sums["sha256"]["trainer.pt"] = hashlib.sha256((ckpt / "trainer.pt").read_bytes()).hexdigest()
    (ckpt / "checksums.json").write_text(json.dumps(sums))
    out = _cli("evaluate", "--run", str(bad), "--data", str(data))  # needs the weights only
    assert out.returncode == 0, out.stderr
    out = _cli("train", "--data", str(data), "--preset", "control", "--chunk-steps", "2", "--max-steps", "4",
               "--checkpoint-every", "2", "--batch-size", "4", "--out", str(bad), "--resume", "--quiet")
    assert out.returncode != 0 and "not safe to load" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not marker.exists()


def test_latest_must_name_a_checkpoint_inside_the_run(run, tmp_path):
    data, good = run
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    for pointer in ("../elsewhere", str(good / (good / "latest").read_text().strip()), "ckpt-1/../../x"):
        (bad / "latest").write_text(pointer + "\n")
        out = _cli("evaluate", "--run", str(bad), "--data", str(data))
        assert out.returncode != 0 and "not a checkpoint of this run" in out.stderr, pointer
        assert len(out.stderr.strip().splitlines()) == 1


def test_expression_text_is_parsed_never_evaluated(tmp_path):
    import sympy

    x0, x1 = sympy.symbols("x0 x1")
    symbols = {"x0": x0, "x1": x1}
    for expr in (39.4784176043574 * x0 * x1 / x0**2, sympy.exp(-0.3 * x0) + sympy.sin(2.5 * x0) / x1,
                 1.7e18 * sympy.exp(-144 * x0), x0 ** sympy.Rational(3, 2) - 1.23456789012345e-5):
        assert parse(str(expr), symbols) == sympy.sympify(str(expr), locals=symbols)
    marker = tmp_path / "pwned"
    for evil in (f"__import__('os').system('touch {marker}')", "x0.__class__", "(lambda: 1)()", "x0[0]",
                 "open('x')", "sin(x0, x1)", "y9"):
        with pytest.raises(ValueError):
            parse(evil, symbols)
    assert not marker.exists()


@pytest.mark.timeout(60)
def test_expression_text_refuses_numbers_it_cannot_build_in_bounded_time():
    import sympy

    symbols = {"x0": sympy.Symbol("x0"), "x1": sympy.Symbol("x1"), "x2": sympy.Symbol("x2")}
    for huge in ("39.5*x1*x2/x0**2 + 0*10**10**8", "x0**(10**8)", "2**-5000", "((10**99)**9)**9",
                 "(" * 5000 + "x0" + ")" * 5000,
                 # sympy folds these into numbers past a float64's range; the cosine of one never returns
                 "cos(exp(4.05e6))", "x0*cos(exp(4050000))", "sin(1e309*x0)", "x0/exp(-4.05e6)"):
        with pytest.raises(ValueError) as err:
            parse(huge, symbols)
        assert len(str(err.value).splitlines()) == 1
    assert parse("39.5*x1*x2/x0**2 + 0*10**10", symbols) == 39.5 * symbols["x1"] * symbols["x2"] / symbols["x0"] ** 2
    assert parse("x0**(-2.0)*1.5**900", symbols) == symbols["x0"] ** -2.0 * sympy.Float("1.5") ** 900
    big = symbols["x0"] * sympy.exp(700) + sympy.cos(sympy.Float("1e307"))
    assert parse("x0*exp(700) + cos(1e307)", symbols) == big


def test_a_planted_discover_resume_file_runs_nothing_and_is_recomputed(tmp_path):
    rng = np.random.default_rng(0)
    r, m1, m2 = rng.uniform(0.5, 5, 400), rng.uniform(0.1, 1, 400), rng.uniform(0.1, 1, 400)
    table = {"r": r, "m1": m1, "m2": m2, "F": 39.478 * m1 * m2 / r**2}
    kw = dict(seeds=1, points=150, restarts=1, resume_dir=tmp_path / "resume")
    from orbitlaw.discovery.sr.backends import SearchSettings

    kw["settings"] = SearchSettings(budget=2000)
    first = discover_law(table, "F", **kw)
    seed_file = tmp_path / "resume" / "seed_0.json"
    saved = json.loads(seed_file.read_text())
    marker = tmp_path / "pwned"
    saved["result"]["expression"] = f"__import__('os').system('touch {marker}')"
    seed_file.write_text(json.dumps(saved))
    again = discover_law(table, "F", **kw)
    assert not marker.exists()
    assert again["expression"] == first["expression"] and again["verdict"] == first["verdict"]
    assert "__import__" not in seed_file.read_text()  # the planted file was replaced by a recomputed one
    saved["result"]["expression"] = "cos(exp(4.05e6))"  # parses, but would hang whatever reads it
    seed_file.write_text(json.dumps(saved))
    assert discover_law(table, "F", **kw)["expression"] == first["expression"]
    assert "4.05e6" not in seed_file.read_text()


def test_a_second_writer_into_the_same_output_is_refused(run, tmp_path):
    from orbitlaw.provenance import OutputLock

    pre, _ = run
    run = tmp_path / "run"
    with OutputLock(run / ".lock", f"run {run}"):  # as a running `orbitlaw train` holds it
        out = _cli("train", "--data", str(pre), "--preset", "control", "--chunk-steps", "2", "--max-steps", "2",
                   "--batch-size", "4", "--out", str(run), "--quiet")
        assert out.returncode != 0 and "being written by another orbitlaw process" in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and not (run / "config.json").exists()
    dest = tmp_path / "d"
    with OutputLock(tmp_path / ".d.lock", f"dataset {dest}"):
        out = _cli("simulate", "--preset", "binary", "--splits", "t=2", "--seed", "0", "--out", str(dest), "--quiet")
        assert out.returncode != 0 and "being written by another orbitlaw process" in out.stderr
        assert not dest.exists() and not (tmp_path / ".d.partial").exists()
    out = _cli("train", "--data", str(pre), "--preset", "control", "--chunk-steps", "2", "--max-steps", "2",
               "--batch-size", "4", "--out", str(run), "--quiet")
    assert out.returncode == 0, out.stderr  # the lock went with its holder
    assert not (run / ".lock").exists()


def test_a_corrupted_token_id_is_a_one_line_error(run, tmp_path):
    import shutil

    data, _ = run
    bad = tmp_path / "data"
    shutil.copytree(data, bad)
    tokens = np.load(bad / "train" / "tokens.npy", mmap_mode="r+")
    tokens[:, 5, 1] = 65535  # a flipped byte: far outside the 7003 ids
    tokens.flush()
    del tokens
    args = ["train", "--data", str(bad), "--preset", "tiny", "--max-steps", "1", "--batch-size", "2", "--quiet"]
    out = _cli(*args, "--out", str(tmp_path / "r"))
    assert out.returncode != 0 and "tokens.npy is corrupted: checksum mismatch" in out.stderr  # its checksum first
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    manifest = json.loads((bad / "manifest.json").read_text())  # a manifest that agrees: the ids are checked
    from orbitlaw.orbits.manifest import file_digest as _file_digest
    from orbitlaw.orbits.manifest import manifest_digest

    info = manifest["split_info"]["train"]["files"]["tokens"]
    flipped = np.load(bad / "train" / "tokens.npy", mmap_mode="r")
    info["sha256_of_blocks"] = _file_digest(flipped, manifest["shard_size"])
    (bad / "manifest.json").write_text(json.dumps(manifest))  # the manifest's own checksum no longer agrees
    out = _cli(*args, "--out", str(tmp_path / "r2"))
    assert out.returncode == 2 and "manifest.json is corrupted: its contents differ from what was written" in out.stderr
    manifest["manifest_sha256"] = manifest_digest(manifest)  # an adversary can reseal it: the ids are checked
    (bad / "manifest.json").write_text(json.dumps(manifest))
    out = _cli(*args, "--out", str(tmp_path / "r2"))
    assert out.returncode != 0 and "token id 65535 is outside the vocabulary" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_full_disk_at_a_checkpoint_is_one_line_and_leaves_no_temporary(run, small_disk):
    data, _ = run
    mnt = small_disk("200k")
    out = _cli("train", "--data", str(data), "--preset", "control", "--chunk-steps", "2", "--max-steps", "2",
               "--checkpoint-every", "1", "--batch-size", "4", "--out", str(mnt / "r"), "--quiet")
    assert out.returncode == 1, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "No space left" in out.stderr, out.stderr
    left = [p.name for p in (mnt / "r").iterdir()] if (mnt / "r").exists() else []
    assert not [n for n in left if n.endswith(".tmp")], left


def test_impossible_sizes_and_foreign_configs_are_one_line_and_write_nothing(run, tmp_path):
    import json as _json

    data, good = run
    (tmp_path / "big.json").write_text(_json.dumps({"seq_len": 1_000_000_000}))
    out = _cli("simulate", "--preset", "two-body", "--splits", "t=2", "--seed", "0", "--out", str(tmp_path / "d"),
               "--config", str(tmp_path / "big.json"))
    assert out.returncode == 2 and "too large" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()
    out = _cli("train", "--data", str(data), "--preset", "control", "--batch-size", "1000000000000", "--max-steps",
               "1", "--out", str(tmp_path / "r"), "--quiet")
    assert out.returncode == 1 and "out of memory" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
    import shutil

    foreign = tmp_path / "foreign"
    shutil.copytree(good, foreign)
    config = _json.loads((foreign / "config.json").read_text())
    config["model"]["from_the_future"] = 1
    (foreign / "config.json").write_text(_json.dumps(config))
    out = _cli("evaluate", "--run", str(foreign), "--data", str(data))
    assert out.returncode == 2 and "does not describe a model" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
