"""The inductive-bias probe (orbitlaw probe --inductive-bias): its curve and score, its target functions
and oracles, an end-to-end run with a kill -9 resume, and one-line errors."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import run_cli
from scipy import stats

from orbitlaw import orbits
from orbitlaw.discovery.probes.inductive_bias import (
    _pair_distances,
    calibration_curve,
    choose_projection,
    linear_oracle,
    mlp_oracle,
)
from orbitlaw.models.train import TrainConfig, train


def test_the_curve_of_an_oracle_against_itself_is_the_diagonal_and_a_constant_model_scores_its_distances():
    rng = np.random.default_rng(0)
    results = [{"linear": rng.standard_normal(60), "model": None} for _ in range(3)]
    for r in results:
        r["model"] = r["linear"].copy()
    same = calibration_curve(results, "linear", bins=10)
    assert same["score"] == 0.0
    assert same["oracle_distance"] == same["distance"]
    assert sum(same["pairs"]) == 3 * 60 * 59 // 2
    for r in results:
        r["model"] = np.full(60, 0.7)
    flat = calibration_curve(results, "linear", bins=10)
    full = [d for d in flat["oracle_distance"] if d is not None]
    assert flat["score"] == pytest.approx(np.mean(full)) and all(d == 0 for d in flat["distance"] if d is not None)
    for r in results:
        r["model"] = 2 * r["linear"]  # twice the oracle's distances: the score is the mean distance per bin
    double = calibration_curve(results, "linear", bins=10)
    assert double["score"] == pytest.approx(np.mean(full))


def test_the_projection_kept_is_the_candidate_whose_distances_rank_best_with_the_state():
    rng = np.random.default_rng(1)
    state = rng.standard_normal((120, 5)) * np.array([3.0, 1.0, 1.0, 0.2, 0.1])
    w = choose_projection(state, np.random.default_rng(7), candidates=20)
    candidates = np.random.default_rng(7)
    pick = candidates.choice(120, 120, replace=False)
    W = candidates.standard_normal((20, 5))
    ref = _pair_distances(state[pick])
    rho = [stats.spearmanr(_pair_distances(state[pick] @ c), ref).statistic for c in W]
    assert np.array_equal(w, W[int(np.argmax(rho))])


def test_the_oracles_fit_a_linear_target_and_the_mlp_is_seeded():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 5))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.25
    X_new = rng.standard_normal((50, 5))
    np.testing.assert_allclose(linear_oracle(X, y, X_new), X_new @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.25,
                               atol=1e-9)
    a, b = mlp_oracle(X, y, X_new, seed=3, epochs=200), mlp_oracle(X, y, X_new, seed=3, epochs=200)
    assert np.array_equal(a, b)
    assert np.corrcoef(a, X_new @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]))[0, 1] > 0.9


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("ib")
    data = orbits.simulate("two-body", {"train": 24, "val": 4}, 0, base / "data", progress=False)
    train(TrainConfig(data=str(data), out=str(base / "run"), preset="tiny", max_steps=4, checkpoint_every=4,
                      eval_every=4, batch_size=4, seed=1, device="cpu",
                      model_overrides={"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64}), progress=False)
    return base


def _probe(run, out, *extra):
    return [sys.executable, "-m", "orbitlaw", "probe", "--inductive-bias", "--run", str(run / "run"), "--data",
            str(run / "data"), "--out", str(out), "--datasets", "3", "--dataset-sequences", "6", "--iterations", "4",
            "--samples", "40", "--device", "cpu", "--quiet", *extra]


def _stable(doc):
    return {k: doc[k] for k in ("scores", "target_scores", "curves", "datasets", "settings", "state")}


def test_the_probe_writes_its_curve_and_resumes_after_a_kill(run, tmp_path):
    whole = subprocess.run(_probe(run, tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr
    doc = json.loads((tmp_path / "whole" / "inductive_bias.json").read_text())
    assert set(doc["scores"]) == {"linear", "mlp"} and all(np.isfinite(v) for v in doc["scores"].values())
    assert doc["target_scores"]["linear"] == pytest.approx(0, abs=1e-9)  # the target is linear in the state
    assert len(doc["datasets"]) == 3 and len(doc["curves"]["mlp"]["model"]["pairs"]) == 20
    assert sum(doc["curves"]["linear"]["model"]["pairs"]) == 3 * 40 * 39 // 2
    assert doc["seed"] == 0 and doc["code_version"] and doc["reference_sizes"]["datasets"] == 100
    assert (tmp_path / "whole" / "inductive_bias.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_probe(run, killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (killed / "datasets" / "000.npz").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "inductive_bias.json").exists()
    again = subprocess.run(_probe(run, killed), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert _stable(json.loads((killed / "inductive_bias.json").read_text())) == _stable(doc)


def test_bad_inductive_bias_input_is_one_line(run, tmp_path):
    def err(cmd):
        result = run_cli(*cmd[3:])  # in this process: the errors are the command's, not a new interpreter's
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 or result.returncode == 2, result.stderr
        return result.stderr

    plain = orbits.simulate("vafa2025", {"train": 8}, 0, tmp_path / "plain", progress=False)
    cmd = _probe(run, tmp_path / "a")
    assert "stores no forces" in err([*cmd[:cmd.index("--data") + 1], str(plain), *cmd[cmd.index("--data") + 2:]])
    clash = err(_probe(run, tmp_path / "b", "--target", "force-vector"))
    assert "--target force-vector is for the fine-tuned probe" in clash
    assert "not allowed with argument" in err(_probe(run, tmp_path / "c", "--linear"))
    assert "more than the split's 24 sequences" in err(_probe(run, tmp_path / "d", "--dataset-sequences", "999"))
    assert "fewer than 2 unrevealed" in err(_probe(run, tmp_path / "f", "--labels-per-sequence", "1000"))
    assert "--reference-sizes sets" in err(_probe(run, tmp_path / "g", "--reference-sizes"))
    assert not any((tmp_path / d).exists() for d in "abcdfg")  # nothing left behind
    ok = run_cli(*_probe(run, tmp_path / "e")[3:])
    assert ok.returncode == 0, ok.stderr
    assert "different settings" in err(_probe(run, tmp_path / "e", "--seed", "4"))
