"""Datasets on disk: determinism, resume after a real kill, atomicity, refusals and bad input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.orbits import blocks, writer

_cli = run_cli  # in this process: the same exit code and output, without a new interpreter


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*.npy"))}


def test_worker_count_does_not_change_bytes(tmp_path):
    splits = {"train": 2 * blocks.SHARD_SIZE + 17, "val": 5}
    one = orbits.simulate("vafa2025", splits, 7, tmp_path / "one", workers=1, progress=False)
    two = orbits.simulate("vafa2025", splits, 7, tmp_path / "two", workers=2, progress=False)
    assert _files(one) == _files(two)
    m1, m2 = (json.loads((p / "manifest.json").read_text()) for p in (one, two))
    assert m1["split_info"] == m2["split_info"]


def test_sequence_depends_only_on_seed_split_and_index(tmp_path):
    a = orbits.simulate("two-body", {"train": 40}, 3, tmp_path / "a", progress=False)
    b = orbits.simulate("two-body", {"train": 10, "val": 3}, 3, tmp_path / "b", progress=False)
    c = orbits.simulate("two-body", {"train": 10}, 4, tmp_path / "c", progress=False)
    ta, tb, tc = (orbits.load_dataset(p)["train"].tokens for p in (a, b, c))
    assert np.array_equal(ta[:10], tb)  # a prefix of a split is the smaller split
    assert not np.array_equal(tb, tc)  # another seed, other systems
    vb = orbits.load_dataset(b)["val"].tokens
    assert not np.array_equal(vb, tb[:3])  # another split, other systems


def test_load_dataset_interface(tmp_path):
    path = orbits.simulate("two-body", {"train": 12, "test": 3}, 0, tmp_path / "d", progress=False)
    data = orbits.load_dataset(path)
    assert set(data) == {"train", "test"}
    tr = data["train"]
    assert tr.tokens.shape == (12, 1000, 2) and tr.tokens.dtype == np.uint16
    assert tr.positions.shape == (12, 500, 2, 2) and tr.velocities.shape == (12, 500, 2, 2)
    assert tr.forces.shape == (12, 500, 2, 2) and tr.times.shape == (12, 500)
    assert tr.masses.shape == (12, 2) and np.all(tr.masses[:, 0] <= tr.masses[:, 1])
    np.testing.assert_allclose(tr.times[:, 1], tr.dt)
    assert isinstance(tr.tokens, np.memmap)
    manifest = tr.manifest
    for key in ("format_version", "preset", "params", "seed", "tokenizer", "split_info", "code_version"):
        assert key in manifest
    assert manifest["split_info"]["train"]["files"]["tokens"]["shape"] == [12, 1000, 2]
    assert orbits.load_dataset(path, verify=True)["test"].tokens.shape == (3, 1000, 2)
    vafa = orbits.load_dataset(orbits.simulate("vafa2025", {"x": 4}, 0, tmp_path / "v", progress=False))["x"]
    assert vafa.positions is None and vafa.masses.shape == (4, 11)


def test_continuous_representation_matches_the_tokens(tmp_path):
    for preset in ("vafa2025", "two-body"):
        path = orbits.simulate(preset, {"train": 6}, 2, tmp_path / preset, progress=False)
        split = orbits.load_dataset(path)["train"]
        xy = split.continuous()
        assert xy.shape == (6, 999, 2) and xy.dtype == np.float64
        ids, _ = split.tokenizer.encode(np.where(np.isnan(xy), 0.0, xy))
        assert np.array_equal(ids[np.isfinite(xy)], split.tokens[:, 1:][np.isfinite(xy)])
        np.testing.assert_array_equal(split.continuous(slice(2, 4)), xy[2:4])


def test_rerun_is_a_no_op_and_a_different_dataset_is_refused(tmp_path):
    out = tmp_path / "d"
    orbits.simulate("two-body", {"train": 5}, 0, out, progress=False)
    before = (out / "manifest.json").stat().st_mtime_ns
    orbits.simulate("two-body", {"train": 5}, 0, out, progress=False)
    assert (out / "manifest.json").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="different dataset"):
        orbits.simulate("two-body", {"train": 5}, 1, out, progress=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an orbitlaw dataset"):
        orbits.simulate("two-body", {"train": 5}, 0, tmp_path / "other", progress=False)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_resume_after_kill_is_bitwise_identical(tmp_path):
    splits = "train=14000,val=300"
    ref = tmp_path / "ref"
    assert _cli("simulate", "--preset", "vafa2025", "--splits", splits, "--seed", "11", "--out", str(ref),
                "--workers", "2", "--quiet").returncode == 0
    out = tmp_path / "out"
    args = [sys.executable, "-m", "orbitlaw", "simulate", "--preset", "vafa2025", "--splits", splits,
            "--seed", "11", "--out", str(out), "--quiet"]
    done = tmp_path / ".out.partial" / "done.jsonl"
    for kills in range(2):  # kill it twice at different points, then let it finish
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            if done.exists() and len(done.read_text().splitlines()) >= 3 + 4 * kills:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists(), "a killed run must not leave a dataset behind"
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert _files(out) == _files(ref)
    assert not (tmp_path / ".out.partial").exists()


def test_truncated_or_corrupted_files_are_reported(tmp_path):
    path = orbits.simulate("two-body", {"train": 6}, 0, tmp_path / "d", progress=False)
    tokens = path / "train" / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-5] ^= 0xFF
    tokens.write_bytes(bytes(data))
    assert len(orbits.load_dataset(path, verify=False)["train"].tokens) == 6  # shapes still fine
    with pytest.raises(ValueError, match="tokens.npy is corrupted: checksum"):
        orbits.load_dataset(path)["train"].tokens  # noqa: B018 (checked when first read)
    with pytest.raises(ValueError, match="tokens.npy is corrupted: checksum"):
        orbits.load_dataset(path, verify=True)
    tokens.write_bytes(bytes(data[:-100]))
    with pytest.raises(ValueError, match="tokens.npy"):
        orbits.load_dataset(path, verify=True)
    (path / "manifest.json").write_text("{ not json")
    with pytest.raises(ValueError, match="manifest.json is corrupted"):
        orbits.load_dataset(path)
    (path / "manifest.json").write_text('{"format_version": 1, "split_info": {"train": {"files": {"tokens": {}}}}}')
    with pytest.raises(ValueError, match="manifest.json is corrupted: it has no 'config_hash'"):
        orbits.load_dataset(path)  # a manifest missing a key: one line, not a KeyError traceback


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "kepler"], "invalid choice: 'kepler'"),
        (["--splits", "train=0"], "N must be > 0"),
        (["--splits", "train=-5"], "N must be > 0"),
        (["--splits", "train"], "malformed --splits entry"),
        (["--splits", "train=ten"], "malformed --splits entry"),
        (["--splits", "train=1,train=2"], "given twice"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--config", "CFG:{\"e_max\": 1.2}"], "eccentricity must stay below 1"),
        (["--config", "CFG:{\"mass_uniform\": [0, 0.01]}"], "positive solar masses"),
        (["--config", "CFG:{\"mass_uniform\": [-1, 0.01]}"], "positive solar masses"),
        (["--config", "CFG:{\"a_range\": [1, 1e300]}"], "a_range [1, 1e+300] is outside the physical range [0.001, "
                                                       "100000] AU"),
        (["--config", "CFG:{\"mass_uniform\": [1e-4, 1e6]}"], "outside the physical range [1e-12, 1000] solar masses"),
        (["--config", "CFG:{\"eccentricity\": 0.5}"], "unknown parameter 'eccentricity'"),
        (["--config", "CFG:{not json"], "not valid JSON"),
    ],
)
def test_bad_input_gives_one_line_error_and_writes_nothing(tmp_path, args, message):
    base = {"--preset": "two-body", "--splits": "train=3", "--seed": "0", "--out": str(tmp_path / "d")}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if value.startswith("CFG:"):
            (tmp_path / "cfg.json").write_text(value[4:])
            value = str(tmp_path / "cfg.json")
        base[flag] = value
    result = _cli("simulate", *[x for kv in base.items() for x in kv], "--quiet")
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["cfg.json"])


def test_solar_system_custom_planet_that_is_not_elliptic_is_refused(tmp_path):
    bad = [list(p) for p in orbits.presets.SOLAR_SYSTEM]
    bad[2][3] = 1.3  # Earth on a hyperbola
    (tmp_path / "cfg.json").write_text(json.dumps({"planets": bad}))
    result = _cli("simulate", "--preset", "solar-system", "--splits", "s=8", "--seed", "0", "--out",
                  str(tmp_path / "d"), "--config", str(tmp_path / "cfg.json"))
    assert result.returncode == 2
    assert result.stderr.strip() == ("orbitlaw simulate: error: planet Earth: eccentricity 1.3 is not in "
                                     "[0, 1): orbit not elliptic")
    assert not (tmp_path / "d").exists()


def test_unwritable_destination(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # root ignores permission bits: use a read-only file system instead
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(locked)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a read-only tmpfs here")
        expected = "Read-only file system"
    else:
        locked.chmod(0o500)
        expected = "Permission denied"
    try:
        result = _cli("simulate", "--preset", "two-body", "--splits", "t=3", "--seed", "0",
                      "--out", str(locked / "d"), "--quiet")
        assert result.returncode == 2  # a path the user gave (docs/trust.md, "Exit codes")
        assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr
        assert list(locked.iterdir()) == []
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(locked)], check=False)
        locked.chmod(0o700)


def test_full_disk_fails_up_front_and_leaves_nothing(small_disk):
    mnt = small_disk("2m")
    result = _cli("simulate", "--preset", "two-body", "--splits", "train=100", "--seed", "0",
                  "--out", str(mnt / "d"), "--quiet")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "No space left" in result.stderr
    assert list(mnt.iterdir()) == []


def test_plot_from_api_and_cli(tmp_path):
    path = orbits.simulate("vafa2025", {"train": 4}, 0, tmp_path / "d", progress=False)
    ax = orbits.plot_system(orbits.load_dataset(path)["train"], 1, out=tmp_path / "api.png")
    assert ax.get_xlabel() == "x (AU)" and (tmp_path / "api.png").stat().st_size > 10_000
    result = _cli("plot", "--data", str(path), "--index", "2", "--out", str(tmp_path / "cli.png"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cli.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = _cli("plot", "--data", str(path), "--index", "9", "--out", str(tmp_path / "x.png"))
    assert bad.returncode == 2 and "out of range" in bad.stderr and not (tmp_path / "x.png").exists()


def _peak_rss_mb(n: int, out: Path) -> float:
    code = ("import resource; from orbitlaw import orbits; "
            f"orbits.simulate('vafa2025', {{'train': {n}}}, 0, {str(out)!r}, progress=False); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.strip())


def test_memory_stays_flat_as_the_dataset_grows(tmp_path):
    small = _peak_rss_mb(1_000, tmp_path / "small")
    large = _peak_rss_mb(30_000, tmp_path / "large")  # 120 MB of tokens on disk
    assert large < small + 40, (small, large)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _simulate_with_workers(tmp_path, seed: int, blocks_done: int, **popen):
    """A ``simulate --workers 2`` process, once ``blocks_done`` blocks are written, and its worker pids."""
    args = [sys.executable, "-m", "orbitlaw", "simulate", "--preset", "vafa2025", "--splits", "train=40000",
            "--seed", str(seed), "--out", str(tmp_path / "d"), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(args, **popen)
    done = tmp_path / ".d.partial" / "done.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (done.exists() and done.read_text().count("\n") >= blocks_done):
        time.sleep(0.02)
    workers = [c for c in _children(proc.pid) if "spawn" in Path(f"/proc/{c}/cmdline").read_text()]
    assert workers, "no worker processes found"
    return args, proc, workers


def test_a_killed_worker_is_reported_and_the_run_resumes(tmp_path):
    args, proc, workers = _simulate_with_workers(tmp_path, 4, 2, stderr=subprocess.PIPE, text=True)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert err.strip().splitlines() == [
        "orbitlaw simulate: error: a worker process died (killed, or out of memory); the finished blocks are "
        "kept: re-run the same command to resume"]
    again = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert orbits.load_dataset(tmp_path / "d", verify=True)["train"].tokens.shape == (40000, 1000, 2)


@pytest.mark.parametrize("config, message", [
    ({"planets": 3}, "planets must be a list of 2 integers"),
    ({"planets": [1.5, 3]}, "planets must be a list of 2 integers"),
    ({"seq_len": None}, "seq_len must be an integer >= 2"),
    ({"e_beta": [0.8]}, "e_beta must be a list of 2 numbers"),
    ({"planet_mass_gamma": [-1, 0, 1e-3]}, "needs positive shape and scale"),
])
def test_malformed_config_values_are_refused_before_anything_is_written(tmp_path, config, message):
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    result = _cli("simulate", "--preset", "vafa2025", "--splits", "t=5", "--seed", "0", "--out",
                  str(tmp_path / "d"), "--config", str(tmp_path / "cfg.json"))
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.json"]


def test_a_finished_stage_killed_before_its_rename_is_published_without_regenerating(tmp_path, monkeypatch):
    out = tmp_path / "d"
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst) == out:
            raise KeyboardInterrupt  # the kill lands between the manifest and the rename
        return real_replace(src, dst)

    monkeypatch.setattr(writer.os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        orbits.simulate("two-body", {"train": 5}, 0, out, progress=False)
    monkeypatch.setattr(writer.os, "replace", real_replace)
    monkeypatch.setattr(writer, "_write_block", lambda task: pytest.fail("regenerated a finished block"))
    orbits.simulate("two-body", {"train": 5}, 0, out, progress=False)
    assert orbits.load_dataset(out, verify=True)["train"].tokens.shape == (5, 1000, 2)


def test_kill_9_of_simulate_leaves_no_worker_running(tmp_path):
    _, proc, workers = _simulate_with_workers(tmp_path, 5, 1, stderr=subprocess.DEVNULL)
    proc.kill()  # kill -9 of the command itself
    proc.wait()
    deadline = time.time() + 30
    while time.time() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    alive = [w for w in workers if Path(f"/proc/{w}").exists()
             and Path(f"/proc/{w}/stat").read_text().split()[2] != "Z"]
    assert not alive, f"workers {alive} outlived their parent"


@pytest.mark.parametrize("args, message", [
    (["--splits", "manifest.json=2"], "split name 'manifest.json' is not allowed"),
    (["--splits", "done.jsonl=2"], "split name 'done.jsonl' is not allowed"),
    (["--out", "."], "exists and is not an orbitlaw dataset"),
])
def test_names_that_would_collide_are_refused_and_nothing_is_left(tmp_path, monkeypatch, args, message):
    (tmp_path / "keep.txt").write_text("a file the user had")
    base = {"--preset": "two-body", "--splits": "t=2", "--seed": "0", "--out": "d"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    monkeypatch.chdir(tmp_path)
    result = _cli("simulate", *[x for kv in base.items() for x in kv], "--quiet")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    assert not any(p.name.startswith(".") for p in tmp_path.parent.iterdir() if tmp_path.name in p.name)


def test_verify_names_a_flipped_byte(tmp_path):
    path = orbits.simulate("two-body", {"train": 6}, 0, tmp_path / "d", progress=False)
    ok = _cli("verify", "--data", str(path))
    assert ok.returncode == 0 and "intact (1 split, 6 sequences)" in ok.stderr
    tokens = np.load(path / "train" / "tokens.npy", mmap_mode="r+")
    tokens[2, 7, 0] ^= 1
    tokens.flush()
    del tokens
    bad = _cli("verify", "--data", str(path))
    assert bad.returncode == 2 and "tokens.npy is corrupted: checksum mismatch" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_block_damaged_while_a_run_was_stopped_is_written_again_on_resume(tmp_path, monkeypatch):
    splits = {"train": 3, "val": 2}  # two blocks: the run is stopped after the first
    reference = orbits.simulate("two-body", splits, 4, tmp_path / "ref", progress=False)
    out, real = tmp_path / "d", writer._write_block
    calls = []

    def stopped_after_one(task):
        calls.append(task[3])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(writer, "_write_block", stopped_after_one)
    with pytest.raises(KeyboardInterrupt):
        orbits.simulate("two-body", splits, 4, out, progress=False)
    monkeypatch.setattr(writer, "_write_block", real)
    written = calls[0]
    staged = tmp_path / ".d.partial" / written / "tokens.npy"
    raw = bytearray(staged.read_bytes())
    raw[-3] ^= 0xFF  # a byte of the finished block changes while the run is stopped
    staged.write_bytes(bytes(raw))
    orbits.simulate("two-body", splits, 4, out, progress=False)
    orbits.load_dataset(out, verify=True)
    for f in sorted(reference.rglob("*.npy")):
        assert (out / f.relative_to(reference)).read_bytes() == f.read_bytes(), f


def test_a_repair_killed_at_any_point_leaves_a_whole_copy_and_a_rerun_finishes(tmp_path, monkeypatch):
    splits = {"train": 3}
    out = orbits.simulate("two-body", splits, 2, tmp_path / "d", progress=False)
    first = (out / "train" / "tokens.npy").read_bytes()

    def damage():
        raw = bytearray(first)
        raw[-3] ^= 0xFF
        (out / "train" / "tokens.npy").write_bytes(bytes(raw))

    damage()
    (tmp_path / ".d.damaged").mkdir()  # a stale copy a repair killed during its clean-up left: not a reason to skip
    real = os.replace

    def killed_at_the_swap(src, dst):
        if Path(dst) == out:
            raise KeyboardInterrupt  # the damaged copy is aside, the rebuilt one not yet in place
        return real(src, dst)

    monkeypatch.setattr(writer.os, "replace", killed_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        orbits.simulate("two-body", splits, 2, out, progress=False, repair=True)
    monkeypatch.setattr(writer.os, "replace", real)
    assert not out.exists() and (tmp_path / ".d.partial" / "manifest.json").exists()  # one whole copy staged
    orbits.simulate("two-body", splits, 2, out, progress=False)  # the plain re-run publishes it
    assert (out / "train" / "tokens.npy").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    damage()

    def killed_while_building(task):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "_write_block", killed_while_building)
    with pytest.raises(KeyboardInterrupt):
        orbits.simulate("two-body", splits, 2, out, progress=False, repair=True)
    monkeypatch.undo()
    assert (out / "manifest.json").exists() and not writer.intact(out)  # the damaged copy still in place
    orbits.simulate("two-body", splits, 2, out, progress=False, repair=True)
    assert writer.intact(out) and (out / "train" / "tokens.npy").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
