"""``orbitlaw run``: the whole study at the smoke preset, its caching and its errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from orbitlaw.cli import main
from orbitlaw.study.stages import Study


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """(study directory, what the run printed on stderr): the smoke study run as a user runs it, in its own
    process, with every warning shown (worker processes included)."""
    out = tmp_path_factory.mktemp("study") / "smoke"
    done = subprocess.run([sys.executable, "-m", "orbitlaw", "run", "--preset", "smoke", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "default"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stderr


@pytest.fixture(scope="module")
def study(smoke):
    return smoke[0]


def test_the_smoke_study_prints_no_stray_warnings(smoke):
    # numeric warnings where they are expected (an SR trial overflowing far off the data) are silenced at their
    # source; anything else printed as a warning is a fault to find
    printed = [line for line in smoke[1].splitlines() if "Warning:" in line]
    assert printed == []


def test_smoke_study_writes_results_and_report(study):
    # how long the smoke study takes is not asserted: a test is no benchmark (benchmarks/quickstart.py times it)
    out = study
    results = json.loads((out / "results.json").read_text())
    assert [m["attention"] for m in results["models"]] == ["softmax", "lssar", "lstm"]  # smoke: one baseline
    assert [m["arch"] for m in results["models"]] == ["gpt", "gpt", "lstm"]
    for m in results["models"]:
        assert m["val_loss"] > 0 and set(m["extrapolation"]) == {"1", "2", "4", "8", "16"}
        assert set(m["inductive_bias"]["scores"]) == {"linear", "mlp"}
        assert m["rollout"]["steps"] == 24 and m["rollout"]["mean_repeat_last_error_au"] > 0
        assert m["probe_r2"] is not None and m["steps"] == results["config"]["train"]["max_steps"]
        law = m["law"]
        assert {"expression", "newtonian", "power_law", "seeds_agreeing", "seeds"} <= set(law)
        assert isinstance(law["newtonian"], bool) and 1 <= law["seeds_agreeing"] <= law["seeds"]
        # one rule for every verdict, stated in every law row; the force probe judged as an acceleration too
        assert law["rule"]["precision"] == 0.02 and law["rule"]["quantity"] == "force"
        accel = law["acceleration"]
        assert accel["rule"] == {**law["rule"], "quantity": "acceleration"} and "verdict" in accel
        if m["arch"] == "gpt":  # the frozen state's own readout, judged by the same rule
            assert m["law_frozen"]["rule"] == law["rule"] and "verdict" in m["law_frozen"]
    rules = [c["law"]["rule"] for c in results["controls"]] + [results["oracle"]["law"]["rule"]]
    assert {(r["precision"], r["selection"]) for r in rules} == {(0.02, "se")}
    assert results["config"]["verdict_rule"] == {"selection": "se", "tolerance": 0.02, "protocol": "orbitlaw"}
    assert results["oracle"]["probe_r2"] > 0.3  # the kNN oracle on the true state predicts the force
    assert {"expression", "newtonian"} <= set(results["oracle"]["law"])
    assert results["code_version"] and results["seeds"]["train"] == 0 and results["config"]["preset"] == "smoke"
    assert {"train:lssar", "law:lstm", "controls:train:tokens"} <= set(Study(out, False).timings())  # the profile
    # the progress plan (k of N) names exactly the stages the study ran, once each
    plan = json.loads((out / "stages" / Study.PLAN).read_text())["stages"]
    ran = {m.stem.replace("__", ":") for m in (out / "stages").glob("*.json")} - {"plan"}
    assert len(plan) == len(set(plan)) and set(plan) == ran
    report = (out / "report.md").read_text()
    assert "| attention | val loss | loss @8x | loss @16x |" in report and "| lssar |" in report
    assert "\\|F\\| ±2% se" in report and "\\|a\\| ±2% se" in report  # each verdict cell states its rule
    assert "## What this does and does not show" in report
    for name, path in results["figures"].items():
        assert (out / path).stat().st_size > 5_000, name
        assert f"]({path})" in report
    assert {"loss_curves", "extrapolation", "attention_maps", "attention_entropy", "force_arrows_softmax",
            "pareto_lssar", "controls_r2", "controls_forces", "inductive_bias_lstm", "rollout_softmax",
            "rollout_lstm"} <= set(results["figures"])
    assert "| lstm | lstm |" in report and "**Inductive bias and rollouts.**" in report
    # every preset runs the controls beside its models (orbitlaw.study.controls), at toy size here
    names = [c["name"] for c in results["controls"]]
    assert names == ["W3-s0", "W1", "W3-untrained", "full", "tokens", "knn-state", "knn-W3", "mlp-W3"]
    for c in results["controls"]:
        assert {"name", "window", "probe_r2", "probe_r2_log", "linear_probe_r2", "linear_probe_r2_log_accel", "law",
                "newtonian", "verdict", "newtonian_seeds"} <= set(c)
        if c["kind"] == "model":  # the frozen state's ln|a|, the acceleration target's log
            assert math.isfinite(c["linear_probe_r2_log_accel"]) and c["linear_probe_r2_log_accel"] <= 1.0
        assert c["verdict"] in ("newtonian", "inverse-square-planet-mass", "power-law", "not-a-power-law",
                                "inconclusive") and "expression" in c["law"]
    assert results["controls"][0]["window"] == 3 and results["controls"][1]["window"] == 1
    assert "## Controls: can the probe see Newton when it is there?" in report and "| W3-untrained | 3 |" in report


def test_rerun_is_served_from_the_stage_cache(study, capsys):
    out = study
    before = json.loads((out / "results.json").read_text())
    assert main(["run", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    # no stage ran again (each prints "orbitlaw run: <stage>" when it runs); checked, not timed
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("orbitlaw run:")] == []
    after = json.loads((out / "results.json").read_text())
    assert after["models"] == before["models"] and after["oracle"] == before["oracle"]
    assert after["controls"] == before["controls"]


def test_each_stage_announces_itself_as_k_of_n_with_the_time_spent_and_left(tmp_path, capsys):
    s = Study(tmp_path / "s", progress=False)
    s.plan(["first", "second", "third"])
    for name in ("first", "second"):
        s.stage(name, {}, [], lambda: {})
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("orbitlaw run:")]
    assert lines[0] == "orbitlaw run: [1/3] first (0:00 in)"
    assert lines[1] == "orbitlaw run: [2/3] second (0:00 in, about 0:00 left)"
    s.plan(["third", "fourth"])  # a stage known only later (the path's replication) adds to N
    s.stage("fourth", {}, [], lambda: {})
    assert capsys.readouterr().err.strip().startswith("orbitlaw run: [3/4] fourth")
    # a new invocation after a code change: the stages done by the old code are not counted as done
    again = Study(tmp_path / "s", progress=False)
    again.source = "another version of the code"
    again.plan(["first", "second", "third", "fourth"])
    again.stage("first", {}, [], lambda: {})
    assert capsys.readouterr().err.strip() == "orbitlaw run: [1/4] first (0:00 in)"


def test_stage_cache_is_keyed_by_config(tmp_path):
    s = Study(tmp_path / "s", progress=False)
    out = tmp_path / "s" / "thing"
    calls = []

    def make(value):
        def fn():
            calls.append(value)
            out.mkdir(exist_ok=True)
            (out / "f").write_text(str(value))
            return {"value": value}
        return fn

    assert s.stage("x", {"a": 1}, [out], make(1)) == {"value": 1}
    assert s.stage("x", {"a": 1}, [out], make(2)) == {"value": 1} and calls == [1]  # cached
    (out / "stale").write_text("from the old config")
    assert s.stage("x", {"a": 2}, [out], make(3)) == {"value": 3}  # new config: old outputs removed
    assert not (out / "stale").exists()

    def killed():
        (out / "partial").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        s.stage("y", {"b": 1}, [out], killed)
    assert s.stage("y", {"b": 1}, [out], make(4)) == {"value": 4}  # resumed: the tool's own state is kept
    assert (out / "partial").exists()

    s.source = "another-source"  # a code change: the same config runs again, its old outputs removed
    assert s.stage("x", {"a": 2}, [out], make(5)) == {"value": 5} and calls[-1] == 5
    # each finished stage keeps how long it took (benchmarks/quickstart.py --profile reads them); a killed one none
    timings = s.timings()
    assert set(timings) == {"x", "y"} and all(set(t) == {"wall_seconds", "cpu_seconds"} for t in timings.values())
    assert all(t["wall_seconds"] >= 0 for t in timings.values())


@pytest.mark.parametrize("args, message", [
    (["--attention", "softmax,bogus"], "--attention must list distinct variants"),
    (["--attention", "lssar,lssar"], "--attention must list distinct variants"),
    (["--llm-reference", "/nonexistent/vafa2025"], "no llm-prompts/ directory"),
    (["--llm-results", "/nonexistent/run"], "no results.json"),
    (["--workers", "0"], "--workers and --nproc-per-node must be >= 1"),
    (["--arch", "lstm,gru"], "--arch must list distinct baselines of lstm, rnn, mamba"),
    (["--arch", "gpt"], "--arch must list distinct baselines"),
])
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "study"
    assert main(["run", "--preset", "smoke", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_show_config_lists_the_baselines(capsys):
    assert main(["run", "--preset", "cpu", "--arch", "lstm,rnn", "--show-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["archs"] == ["lstm", "rnn"] and config["inductive_bias"]["datasets"] == 10
    assert main(["run", "--preset", "smoke", "--arch", "", "--show-config"]) == 0
    assert json.loads(capsys.readouterr().out)["archs"] == []
