"""``orbitlaw import``: trajectories made elsewhere (REBOUND simulations and archives, tables) as datasets, checked
against independent sources: the toolkit's own simulator (a table of its states gives back its tokens and forces)
and REBOUND (the elements it was given, its archive against its integrator)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_ORBITS, run_cli

from orbitlaw import orbits
from orbitlaw.orbits.importer import import_trajectories

rebound = pytest.importorskip("rebound")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A two-body dataset of the toolkit's simulator and the same systems as a table (CSV) of its states."""
    root = tmp_path_factory.mktemp("imported")
    data = orbits.simulate("two-body", {"train": 6}, 3, root / "data", overrides=TINY_ORBITS, progress=False)
    split = orbits.load_dataset(data)["train"]
    S = split.positions.shape[1]
    seq, step, body = np.meshgrid(np.arange(len(split)), np.arange(S), np.arange(2), indexing="ij")
    table = pd.DataFrame({"system": seq.ravel(), "t": split.times[seq, step].ravel(),
                          "body": np.array(["planet", "star"])[body].ravel(),
                          "x": split.positions[seq, step, body, 0].ravel(),
                          "y": split.positions[seq, step, body, 1].ravel(),
                          "mass": split.masses[seq, body].ravel(),
                          "vx": split.velocities[seq, step, body, 0].ravel(),
                          "vy": split.velocities[seq, step, body, 1].ravel()})
    table.to_csv(root / "states.csv", index=False)
    return split, table, root


def test_a_table_of_the_simulators_states_gives_back_its_tokens_forces_and_elements(simulated, tmp_path):
    split, table, root = simulated
    r = run_cli("import", "--table", root / "states.csv", "--out", tmp_path / "mine", "--val", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert run_cli("verify", "--data", tmp_path / "mine").returncode == 0
    got = orbits.load_dataset(tmp_path / "mine", verify=True)
    assert {k: len(v) for k, v in got.items()} == {"train": 4, "val": 2}
    train = got["train"]
    L = split.tokens.shape[1]
    assert np.array_equal(train.tokens[:, :L], split.tokens[:4])  # same bins, same layout, same time-step token
    np.testing.assert_allclose(train.forces, split.forces[:4], rtol=1e-12)
    for name in ("a", "e", "omega", "mean_anomaly0"):  # osculating elements at t = 0: the ones drawn
        np.testing.assert_allclose(getattr(train, name), getattr(split, name)[:4], rtol=1e-9, atol=1e-9)
    import_trajectories(root / "states.csv", tmp_path / "api", val=2)  # the API writes what the command writes
    for f in sorted((tmp_path / "mine").rglob("*")):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "api" / f.relative_to(tmp_path / "mine")).read_bytes(), f.name
    params = train.manifest["params"]
    assert train.manifest["preset"] == "imported" and params["source"]["kind"] == "table"
    assert params["source"]["files"][0]["name"] == "states.csv" and params["derived"]["velocities"] == "given"
    # without velocities they are central differences; without masses, no force labels, stated by the probe
    table.drop(columns=["vx", "vy", "mass"]).to_csv(tmp_path / "bare.csv", index=False)
    assert run_cli("import", "--table", tmp_path / "bare.csv", "--out", tmp_path / "bare", "--quiet").returncode == 0
    bare = orbits.load_dataset(tmp_path / "bare")["train"]
    assert np.array_equal(bare.tokens, np.concatenate([got["train"].tokens, got["val"].tokens]))
    np.testing.assert_allclose(bare.velocities[:, 1:-1], split.velocities[:, 1:-1], rtol=0.05, atol=0.05)
    assert np.isnan(bare.forces).all() and np.isnan(bare.masses).all()
    # with masses but no velocities: forces from the positions, no orbital elements guessed from differences
    table.drop(columns=["vx", "vy"]).to_csv(tmp_path / "novel.csv", index=False)
    assert run_cli("import", "--table", tmp_path / "novel.csv", "--out", tmp_path / "novel", "--quiet").returncode == 0
    novel = orbits.load_dataset(tmp_path / "novel")["train"]
    np.testing.assert_allclose(novel.forces, split.forces, rtol=1e-12)
    assert np.isnan(novel.a).all() and np.isnan(novel.e).all()
    from orbitlaw.discovery.probes.probe_data import open_split

    with pytest.raises(ValueError, match="has no force labels: its systems' masses are unknown"):
        open_split(tmp_path / "bare", "train")


def test_a_rebound_simulation_and_its_archive_import_alike_with_the_elements_they_were_given(tmp_path):
    sim = rebound.Simulation()
    sim.units = ("yr", "AU", "Msun")
    sim.add(m=0.9)
    sim.add(m=2e-3, a=1.5, e=0.2, pomega=0.7, M=1.0)
    sim.move_to_com()
    sim.save_to_file(str(tmp_path / "run.bin"), interval=0.3, delete_file=True)
    start = sim.copy()
    sim.integrate(20.0)
    import_trajectories(start, tmp_path / "sim", steps=30)
    r = run_cli("import", "--rebound", tmp_path / "run.bin", "--out", tmp_path / "arch", "--quiet")
    assert r.returncode == 0, r.stderr
    a, b = (orbits.load_dataset(tmp_path / d, verify=True)["train"] for d in ("sim", "arch"))
    assert b.positions.shape[1] == 41  # snapshots every 0.3 yr to 19.8 yr: 41 steps of 0.486 yr from the first
    np.testing.assert_allclose(a.positions, b.positions[:, :30], atol=1e-9)
    np.testing.assert_allclose([a.a[0, 0], a.e[0, 0], a.omega[0, 0], a.mean_anomaly0[0, 0]], [1.5, 0.2, 0.7, 1.0],
                               rtol=1e-9)
    np.testing.assert_allclose(a.masses[0], [2e-3, 0.9])  # the star last
    r_vec = a.positions[0, :, 0] - a.positions[0, :, 1]
    F = np.hypot(*a.forces[0, :, 0].T)
    np.testing.assert_allclose(F, start.G * 2e-3 * 0.9 / np.sum(r_vec**2, axis=1), rtol=1e-12)


def test_bad_trajectories_are_one_line_errors_and_leave_nothing(simulated, tmp_path):
    _, table, _ = simulated
    cases = {
        "nan": (table.assign(x=table["x"].where(table.index != 5)), "column 'x' has a missing, non-numeric"),
        "step": (table.assign(t=table["t"] * 1.1), "not one of the tokeniser's time steps"),
        "unbound": (table.assign(vx=np.where(table["body"] == "planet", table["vx"] * 3, table["vx"])),
                    "is not bound to its star"),
        "missing": (table.drop(index=[3]), "every body needs exactly one row at each time"),
        "columns": (table.drop(columns=["body"]), "has no column body"),
        "3d": (table.assign(z=0.1), "leaves the plane|is not 0"),
        "no-system": (table.assign(system=table["system"].where(table.index != 7)), "column 'system' is missing"),
        "unbound-no-velocities": (table.assign(x=np.where(table["body"] == "planet", table["x"] * (1 + table["t"]),
                                                          table["x"])).drop(columns=["vx", "vy"]),
                                  "is not bound to its star"),
    }
    for name, (bad, message) in cases.items():
        bad.to_csv(tmp_path / f"{name}.csv", index=False)
        r = run_cli("import", "--table", tmp_path / f"{name}.csv", "--out", tmp_path / f"out-{name}", "--quiet")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert re.search(message, r.stderr), (name, r.stderr)
    sim = rebound.Simulation()
    sim.units = ("yr", "AU", "Msun")
    sim.add(m=1.0)
    sim.add(m=0.0, a=1.0)  # a test particle
    with pytest.raises(ValueError, match="a test particle"):
        import_trajectories(sim, tmp_path / "test-particle", steps=3)
    sim = rebound.Simulation()  # REBOUND's default units, G = 1
    sim.add(m=1.0)
    sim.add(m=1e-3, a=1.0)
    with pytest.raises(ValueError, match="G is 1, not in AU, yr and M_sun"):
        import_trajectories(sim, tmp_path / "units", steps=3)
    (tmp_path / "junk.bin").write_bytes(b"not an archive")
    r = run_cli("import", "--rebound", tmp_path / "junk.bin", "--out", tmp_path / "junk", "--quiet")
    assert r.returncode == 2 and "not a REBOUND SimulationArchive" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []  # nothing half-written
