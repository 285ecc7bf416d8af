"""The Python API (``orbitlaw.simulate``, ``train``, ``probe``, ``discover``; ``LawRegressor``): each step gives what
its command gives on the same inputs and seed, and the regressor reads as a scikit-learn estimator."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import sympy
from conftest import TINY_MODEL, TINY_ORBITS, run_cli

import orbitlaw

G = 4 * np.pi**2
FAST = {"seeds": 1, "points": 300, "restarts": 1, "budget": 2000}  # one search seed at the fewest evaluations


def _rows(law, n=2000, seed=0, noise=0.01):
    """Controls-like rows: r in AU, planet and star masses in Msun, and ``law(r, m1, m2)`` with multiplicative
    noise."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"r": rng.uniform(0.5, 5.0, n), "m1": rng.uniform(1e-4, 1e-2, n), "m2": rng.uniform(0.5, 1.5, n)})
    y = pd.Series(law(X.r, X.m1, X.m2) * np.exp(rng.normal(0, noise, n)), name="F")
    return X, y


def test_import_orbitlaw_loads_no_torch_and_names_the_api():
    code = ("import sys, orbitlaw; assert 'torch' not in sys.modules; "
            "assert {'simulate', 'train', 'probe', 'discover', 'LawRegressor', 'Law'} <= set(dir(orbitlaw)); "
            "orbitlaw.LawRegressor; assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        orbitlaw.nope  # noqa: B018


def test_the_regressor_finds_newton_and_reads_it_as_sympy_latex_predictions_and_a_front():
    X, y = _rows(lambda r, m1, m2: G * m1 * m2 / r**2)
    model = orbitlaw.LawRegressor(**FAST).fit(X, y)
    assert model.verdict_ == "newtonian" and model.newtonian_
    r, m1, m2 = sympy.symbols("r m1 m2")
    law = model.sympy()
    constant = law / (m1 * m2 / r**2)
    assert constant.is_number and abs(float(constant) / G - 1) < 0.01  # C·m1·m2/r² with C within 1% of 4π²
    assert model.latex() == sympy.latex(law) and "r^{2}" in model.latex()
    predicted = model.predict(X)
    assert predicted.shape == (len(X),) and np.allclose(predicted, float(constant) * X.m1 * X.m2 / X.r**2)
    assert np.allclose(model.predict(X.to_numpy()), predicted)  # an array's columns in the fitted order
    assert model.score(X, y) > 0.99  # RegressorMixin's R²
    front = model.pareto_
    assert list(front.columns[:2]) == ["complexity", "expression"] and front["complexity"].is_monotonic_increasing
    assert model.law_.record["rule"]["precision"] == 0.02  # the study's precision by default
    assert list(model.feature_names_in_) == ["r", "m1", "m2"] and model.n_features_in_ == 3


def test_the_regressor_tells_a_law_apart_and_clones_as_an_estimator():
    from sklearn.base import clone

    X, y = _rows(lambda r, m1, m2: G * m1 * m2 / r**3, seed=1)
    model = orbitlaw.LawRegressor(**FAST).fit(X.to_numpy(), y.to_numpy(), feature_names=["r", "m1", "m2"])
    assert model.verdict_ == "power-law" and not model.newtonian_
    assert model.law_.record["power_law"]["exponents"] == {"r": -3, "m1": 1, "m2": 1}
    twin = clone(model)
    assert twin.get_params() == model.get_params() and not hasattr(twin, "law_")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="call fit"):
        twin.predict(X)
    with pytest.raises(ValueError, match="no column 'r'"):
        model.predict(X.rename(columns={"r": "d"}))
    with pytest.raises(ValueError, match="3 columns but 2 feature names"):
        orbitlaw.LawRegressor(**FAST).fit(X.to_numpy(), y, feature_names=["r", "m1"])


def test_discover_is_the_command_and_law_json_reads_back(tmp_path):
    X, y = _rows(lambda r, m1, m2: G * m1 * m2 / r**2, seed=2)
    table = tmp_path / "rows.csv"
    X.assign(F=y).to_csv(table, index=False)
    flags = ["--seeds", 1, "--points", 300, "--restarts", 1, "--budget", 2000, "--workers", 1]
    done = run_cli("discover", "--input", table, "--target", "F", *flags, "--out", tmp_path / "cli.json")
    assert done.returncode == 0, done.stderr
    cli = orbitlaw.Law.read(tmp_path / "cli.json")
    api = orbitlaw.discover(table, "F", **FAST)
    for key in ("expression", "verdict", "newton_departure", "newton_departure_exact", "rule", "resolution"):
        assert api.record[key] == cli.record[key], key
    assert cli.record["rule"]["precision"] == 0.02  # the command's default is the study's precision
    written = orbitlaw.discover(table, "F", out=tmp_path / "api.json", **FAST)
    assert orbitlaw.Law.read(tmp_path / "api.json").expression == written.expression == cli.expression
    assert repr(cli) == f"Law({cli.expression!r}, verdict='newtonian')"
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a LAW.json"):
        orbitlaw.Law.read(tmp_path / "bad.json")
    (tmp_path / "torn.json").write_text('{"expression": ')
    with pytest.raises(ValueError, match="cannot read .*torn.json as LAW.json"):
        orbitlaw.Law.read(tmp_path / "torn.json")


def test_the_default_precision_is_the_studys_and_zero_is_the_exact_test():
    from orbitlaw.discovery.sr.rule import PRECISION
    from orbitlaw.discovery.sr.symbolic import DiscoverConfig
    from orbitlaw.study.presets import VERDICT_RULE

    assert DiscoverConfig("F").rule_tolerance == PRECISION == VERDICT_RULE["orbitlaw"]["tolerance"]
    assert DiscoverConfig("F", selection="best").rule_tolerance == 0.0
    assert DiscoverConfig("F", protocol="reference").rule_tolerance == 0.0 == VERDICT_RULE["reference"]["tolerance"]
    assert DiscoverConfig("F", tolerance=0).rule_tolerance == 0.0
    with pytest.raises(ValueError, match="must be a fraction"):
        DiscoverConfig("F", tolerance=True).validate()


def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix in (".npy", ".safetensors", ".csv")}


def test_simulate_train_and_probe_give_what_their_commands_give(tmp_path):
    overrides = tmp_path / "orbits.json"
    overrides.write_text(json.dumps(TINY_ORBITS))
    splits = {"train": 16, "val": 8}
    assert run_cli("simulate", "--preset", "two-body", "--splits", "train=16,val=8", "--seed", 3, "--config",
                   overrides, "--out", tmp_path / "cli-data", "--quiet").returncode == 0
    data = orbitlaw.simulate("two-body", splits, tmp_path / "api-data", seed=3, overrides=TINY_ORBITS, progress=False)
    assert _tree(data) == _tree(tmp_path / "cli-data") and len(_tree(data)) > 2
    assert orbitlaw.load_dataset(data)["train"].tokens.shape[0] == 16

    settings = {"preset": "tiny", "model_overrides": TINY_MODEL, "max_steps": 2, "checkpoint_every": 2,
                "eval_every": 2, "batch_size": 4, "seed": 0}
    config = tmp_path / "train.json"
    config.write_text(json.dumps(settings))
    done = run_cli("train", "--data", data, "--config", config, "--out", tmp_path / "cli-run", "--quiet")
    assert done.returncode == 0, done.stderr
    summary = orbitlaw.train(data, tmp_path / "api-run", progress=False, **settings)
    assert summary["step"] == 2 and _tree(tmp_path / "api-run") == _tree(tmp_path / "cli-run")
    model, run_config = orbitlaw.load_model(tmp_path / "api-run")
    assert sum(p.numel() for p in model.parameters()) > 0 and run_config["train"]["max_steps"] == 2

    probe = {"steps": 2, "batch": 4, "checkpoint_every": 2, "eval_train_sequences": 4, "near_train": 50}
    flags = [x for k, v in probe.items() for x in (f"--{k.replace('_', '-')}", v)]
    done = run_cli("probe", "--run", tmp_path / "cli-run", "--data", data, "--out", tmp_path / "cli-probe",
                   "--device", "cpu", "--quiet", *flags)
    assert done.returncode == 0, done.stderr
    result = orbitlaw.probe(tmp_path / "api-probe", run=str(tmp_path / "api-run"), data=str(data), device="cpu",
                            progress=False, **probe)
    assert result["metrics"] and _tree(tmp_path / "api-probe") == _tree(tmp_path / "cli-probe")
    assert (tmp_path / "api-probe" / "predictions.csv").stat().st_size > 0
    with pytest.raises(ValueError, match="unknown probe 'nope'"):
        orbitlaw.probe(tmp_path / "x", kind="nope")
