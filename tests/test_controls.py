"""The positive control's pieces: the binary preset, chunked regression models, their training, resume,
probes and the window oracles (docs/controls.md)."""

import json

import numpy as np
import pytest
import torch
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.discovery.probes import probe_data
from orbitlaw.discovery.probes.oracle import OracleConfig, run_oracle, window_features
from orbitlaw.models.checkpoint import latest, load
from orbitlaw.models.presets import build_model
from orbitlaw.models.train import TrainConfig, read_metrics, train


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("binary")
    pre = orbits.simulate("binary", {"train": 48, "val": 4}, 0, root / "pre", progress=False,
                          overrides={"seq_len": 41, "steps": 20})
    probe = orbits.simulate("binary", {"train": 24}, 1, root / "probe", progress=False,
                            overrides={"seq_len": 41, "steps": 20})
    return pre, probe


def _config(data, out, **kw):
    base = dict(data=str(data), out=str(out), preset="control", chunk_steps=3, input_noise=0.01, max_steps=6,
                checkpoint_every=3, eval_every=3, log_every=1, batch_size=8, lr=1e-3, seed=3)
    return TrainConfig(**{**base, **kw})


_cli = run_cli  # in this process: the same exit code and output, without a new interpreter


def _assert_near_train_from_step(predictions, first):
    """near_train (at most 5,000 rows: here all it may pick) holds exactly the unlabelled held-out rows from
    planet step ``first`` on, the first whose window is whole."""
    csv = np.genfromtxt(predictions, delimiter=",", names=True, dtype=None, encoding=None)
    near, labelled = (np.asarray(csv[c]).astype(str) == "True" for c in ("near_train", "labelled"))
    np.testing.assert_array_equal(near, ~labelled & (csv["step"] >= first))


def test_binary_preset_draws_both_masses_and_resolves_the_orbit(tmp_path):
    split = orbits.load_dataset(orbits.simulate("binary", {"train": 300}, 4, tmp_path / "d", progress=False))["train"]
    m = np.asarray(split.masses)
    assert np.all((m >= 0.2) & (m <= 1.0)) and np.all(m[:, 0] <= m[:, 1])  # planet = the lighter body
    assert np.unique(np.log10(m[:, 0]).round(1)).size > 5  # both masses vary per system
    assert np.all(np.asarray(split.dt) == orbits.tokenizer.TIME_STEPS[1])
    pos = np.asarray(split.positions)
    rel = pos[:, :, 0] - pos[:, :, 1]
    angle = np.abs(np.diff(np.unwrap(np.arctan2(rel[..., 1], rel[..., 0]), axis=1), axis=1))
    assert 0.05 < angle.min() and angle.max() < 1.3  # rad per step: curvature resolved, never aliased
    # Newton's law: the stored force on the planet is G m1 m2 / r^2
    r = np.hypot(rel[..., 0], rel[..., 1])
    f = np.hypot(*np.moveaxis(np.asarray(split.forces)[:, :, 0], -1, 0))
    assert np.allclose(f, orbits.G * m[:, :1] * m[:, 1:] / r**2, rtol=1e-12)


def test_bad_binary_parameters_are_refused():
    with pytest.raises(ValueError, match="time_step_index"):
        orbits.preset_params("binary", {"time_step_index": 5})
    with pytest.raises(ValueError, match="mass_loguniform"):
        orbits.preset_params("binary", {"mass_loguniform": [1.0, 0.1]})


def test_a_chunked_model_reads_each_position_through_its_own_window():
    torch.manual_seed(0)
    model = build_model("control", chunk=6, block_size=6)
    x = torch.randn(2, 15, 2)
    full = model.hidden_states(x)
    for e in (0, 4, 5, 9, 14):
        window = x[:, max(0, e - 5):e + 1]
        ref = model.hidden_states(window)
        for layer in range(len(full)):
            torch.testing.assert_close(full[layer][:, e], ref[layer][:, -1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="chunk"):
        build_model("control", chunk=7, block_size=6)


@pytest.mark.parametrize("chunk", [6, None])
def test_hidden_states_at_some_positions_are_those_of_the_whole_read(chunk):
    # the probe reads only the positions its rows are read at; a chunked model then reads only those windows
    torch.manual_seed(0)
    model = build_model("control", chunk=chunk, block_size=6 if chunk else 15)
    x = torch.randn(2, 15, 2)
    full = model.hidden_states(x)
    for at in ([1, 3, 5, 7, 13], [0, 2, 4], [5, 6, 14], list(range(15))):
        part = model.hidden_states(x, torch.tensor(at))
        for layer in range(len(full)):
            torch.testing.assert_close(part[layer], full[layer][:, at], rtol=1e-5, atol=1e-6)


def test_linear_probe_features_are_the_whole_read_at_each_row(data, tmp_path):
    # hidden_features reads only the positions its rows sit at: the states there must be the whole read's
    from orbitlaw.discovery.probes.linear_probe import hidden_features, probe_rows
    from orbitlaw.models.batches import read_sequences, token_offset
    from orbitlaw.models.evaluate import load_run

    pre, probe = data
    train(_config(pre, tmp_path / "run", max_steps=1), progress=False)
    model, run_config = load_run(str(tmp_path / "run"), "cpu")
    split = probe_data.open_split(str(probe), "train")
    context = int(run_config["context"])
    plan = probe_data.default_plan(len(split), 12, 12, 0, 0)
    rows = probe_rows(split, plan, model.config, context, 12, 5, 0)["heldout"]
    feats = hidden_features(model, split, rows, context, 5, "cpu")
    seqs = np.unique(rows["sequence"])
    with torch.no_grad():
        whole = model.hidden_states(read_sequences(model.config, split, seqs, context))
    b, p = np.searchsorted(seqs, rows["sequence"]), rows["token"] - token_offset(model.config)
    assert len(np.unique(p)) < whole[0].shape[1]  # positions no row reads are skipped
    for layer, h in enumerate(whole):
        np.testing.assert_allclose(feats[layer], h[b, p].numpy(), rtol=1e-5, atol=1e-6)


def test_chunked_training_resumes_exactly(data, tmp_path):
    pre, _ = data
    ref = train(_config(pre, tmp_path / "ref"), progress=False)
    cfg = json.loads((tmp_path / "ref" / "config.json").read_text())
    assert cfg["model"]["chunk"] == 6 and cfg["model"]["block_size"] == 6 and cfg["context"] == 39
    assert cfg["train"]["input_noise"] == 0.01
    train(_config(pre, tmp_path / "run", max_steps=3), progress=False)
    train(_config(pre, tmp_path / "run"), resume=True, progress=False)
    assert ref["step"] == 6
    steps = lambda run: [(r["step"], r["train_loss"], r.get("val_loss")) for r in read_metrics(run)]  # noqa: E731
    assert steps(tmp_path / "run") == steps(tmp_path / "ref")
    a, _ = load(latest(tmp_path / "ref"))
    b, _ = load(latest(tmp_path / "run"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="input_noise"):  # a different noise would change the trajectory
        train(_config(pre, tmp_path / "run", input_noise=0.02, max_steps=9), resume=True, progress=False)


def test_chunk_flags_on_a_token_model_are_one_line_errors(data, tmp_path):
    pre, _ = data
    out = _cli("train", "--data", str(pre), "--preset", "tiny", "--chunk-steps", "3", "--out", str(tmp_path / "r"),
               "--max-steps", "1", "--quiet")
    assert out.returncode != 0 and "regression model" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
    out = _cli("train", "--data", str(pre), "--preset", "control", "--input-noise", "nan", "--out",
               str(tmp_path / "r"), "--max-steps", "1", "--quiet")
    assert out.returncode != 0 and "input-noise" in out.stderr


def test_probes_and_discover_accept_a_chunked_regression_run(data, tmp_path):
    pre, probe = data
    train(_config(pre, tmp_path / "run", max_steps=3), progress=False)
    plan = ("--train-sequences", "12", "--heldout-sequences", "12")
    out = _cli("probe", "--run", str(tmp_path / "run"), "--data", str(probe), "--out", str(tmp_path / "p"),
               "--steps", "4", "--batch", "4", *plan, "--quiet")
    assert out.returncode == 0, out.stderr
    metrics = json.loads((tmp_path / "p" / "metrics.json").read_text())
    assert metrics["counts"]["heldout_unlabelled"] == 12 * 20 - 24  # every planet step of 20, 2 labels each
    _assert_near_train_from_step(tmp_path / "p" / "predictions.csv", 3)  # ending at planet t: star t-3 .. planet t
    assert np.isfinite(metrics["metrics"]["heldout_unlabelled"]["r2_log"])
    out = _cli("probe", "--linear", "--run", str(tmp_path / "run"), "--data", str(probe), "--out",
               str(tmp_path / "lin"), *plan, "--quiet")
    assert out.returncode == 0, out.stderr
    linear = json.loads((tmp_path / "lin" / "linear_probes.json").read_text())
    assert linear["best"]["x"]["r2"] > 0.999  # the embedding of the planet's own position
    out = _cli("discover", "--input", str(tmp_path / "p" / "predictions.csv"), "--target", "F_pred", "--seeds", "1",
               "--budget", "2000", "--out", str(tmp_path / "LAW.json"))
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "LAW.json").read_text())["verdict"]


def test_window_oracle_reads_exactly_the_positions_a_chunked_model_sees(data, tmp_path):
    _, probe = data
    split = orbits.load_dataset(probe)["train"]
    rows = probe_data.planet_rows(split, np.arange(3), 41)
    X = window_features(split, rows, 2)  # W = 2: star(t-2), planet(t-1), star(t-1), planet(t)
    pos = np.asarray(split.positions)
    i = np.flatnonzero((rows["sequence"] == 1) & (rows["step"] == 5))[0]
    expect = np.concatenate([pos[1, 3, 1], pos[1, 4, 0], pos[1, 4, 1], pos[1, 5, 0]])
    np.testing.assert_array_equal(X[i], expect)
    first = np.flatnonzero((rows["sequence"] == 1) & (rows["step"] == 0))[0]
    np.testing.assert_array_equal(X[first], np.tile(pos[1, 0, 0], 4))  # before the start: the first position
    for oracle in ("knn-window", "mlp-window"):
        result = run_oracle(OracleConfig(oracle=oracle, data=str(probe), out=str(tmp_path / oracle),
                                         train_sequences=12, heldout_sequences=12, window_steps=3))
        assert result["kind"] == oracle and np.isfinite(result["metrics"]["heldout_unlabelled"]["r2"])


def test_the_binned_window_oracle_reads_the_bin_centres_of_those_positions(data, tmp_path):
    """The resolution control's input: each coordinate of the window at its tokeniser bin's centre (within half a
    bin, 0.0071 AU, of the position; the same centre as the token the model reads decodes to)."""
    _, probe = data
    split = orbits.load_dataset(probe)["train"]
    rows = probe_data.planet_rows(split, np.arange(3), 41)
    exact, binned = window_features(split, rows, 2), window_features(split, rows, 2, "bins")
    spec = split.tokenizer
    assert np.all(np.abs(binned - exact) <= spec.width / 2 + 1e-12) and not np.array_equal(binned, exact)
    np.testing.assert_array_equal(binned, spec.decode(spec.encode(exact)[0]))
    result = run_oracle(OracleConfig(oracle="mlp-window", data=str(probe), out=str(tmp_path / "bins"),
                                     train_sequences=12, heldout_sequences=12, window_inputs="bins"))
    assert result["settings"]["window_inputs"] == "bins"
    with pytest.raises(ValueError, match="window-inputs"):
        OracleConfig(oracle="mlp-window", data="d", out="o", window_inputs="tokens").validate()
    with pytest.raises(ValueError, match="window_inputs"):
        OracleConfig(oracle="knn", data="d", out="o", window_inputs="bins").validate()


def test_training_windows_end_at_a_planet_position(data):
    from orbitlaw.models.batches import regression_batch

    pre, _ = data
    split = orbits.load_dataset(pre)["train"]
    idx = np.arange(8)
    x, y = regression_batch(split, idx, 39, 6, 0.0, (1, 2), "cpu")
    cont = split.continuous(idx).astype(np.float32)
    for b in range(len(idx)):
        hits = [s for s in range(cont.shape[1] - 6) if np.array_equal(cont[b, s:s + 6], x[b].numpy())]
        assert len(hits) == 1 and (hits[0] + 5) % 2 == 0  # the last input is a planet (even position)
        np.testing.assert_array_equal(y[b].numpy(), cont[b, hits[0] + 1:hits[0] + 7])
    x2, _ = regression_batch(split, idx, 39, 6, 0.0, (1, 2), "cpu")
    assert torch.equal(x, x2)  # a pure function of the key
    noisy, _ = regression_batch(split, idx, 39, 6, 0.05, (1, 2), "cpu")
    assert 0.03 < float((noisy - x).std()) < 0.07  # noise on the inputs only, sigma in AU


def test_step_end_windows_end_at_the_star_and_can_keep_only_the_last_target(data):
    from orbitlaw.models.batches import regression_batch

    pre, _ = data
    split = orbits.load_dataset(pre)["train"]
    idx = np.arange(8)
    x, y = regression_batch(split, idx, 39, 6, 0.0, (1, 2), "cpu", "step", "last")
    cont = split.continuous(idx).astype(np.float32)
    for b in range(len(idx)):
        hits = [s for s in range(cont.shape[1] - 6) if np.array_equal(cont[b, s:s + 6], x[b].numpy())]
        assert len(hits) == 1 and (hits[0] + 5) % 2 == 1  # the last input is the star (odd position)
        assert np.isnan(y[b, :-1].numpy()).all()  # only the window's last target: the planet's next position
        np.testing.assert_array_equal(y[b, -1].numpy(), cont[b, hits[0] + 6])


def test_probes_read_a_step_end_run_at_the_star_token(data, tmp_path):
    pre, probe = data
    train(_config(pre, tmp_path / "run", max_steps=3, window_end="step", window_loss="last"), progress=False)
    model = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
    assert (model["window_end"], model["window_loss"]) == ("step", "last")
    split = orbits.load_dataset(probe)["train"]
    planet = probe_data.planet_rows(split, np.arange(2), 41)
    star = probe_data.planet_rows(split, np.arange(2), 41, "step")
    np.testing.assert_array_equal(star["token"], planet["token"] + 1)  # one planet: the star follows it
    np.testing.assert_array_equal(star["F_true"], planet["F_true"])  # the same steps, the same physics
    plan = ("--train-sequences", "12", "--heldout-sequences", "12")
    out = _cli("probe", "--run", str(tmp_path / "run"), "--data", str(probe), "--out", str(tmp_path / "p"),
               "--steps", "2", "--batch", "4", *plan, "--quiet")
    assert out.returncode == 0, out.stderr
    csv = np.genfromtxt(tmp_path / "p" / "predictions.csv", delimiter=",", names=True)
    assert len(csv) == 12 * 19  # every held-out step but the last, whose star token has no next position
    # the symbolic regression's rows (near_train, here every eligible one) see a whole window: W = 3 steps
    # ending at the star of step t need steps t-2 .. t
    _assert_near_train_from_step(tmp_path / "p" / "predictions.csv", 2)
    out = _cli("probe", "--linear", "--run", str(tmp_path / "run"), "--data", str(probe), "--out",
               str(tmp_path / "lin"), *plan, "--quiet")
    assert out.returncode == 0, out.stderr
    linear = json.loads((tmp_path / "lin" / "linear_probes.json").read_text())
    assert linear["best"]["x"]["r2"] < 0.999  # read at the star's token, not the planet's own position
    result = run_oracle(OracleConfig(oracle="knn-window", data=str(probe), out=str(tmp_path / "o"),
                                     train_sequences=12, heldout_sequences=12, window_steps=3, window_end="step"))
    assert np.isfinite(result["metrics"]["heldout_unlabelled"]["r2"])
    _assert_near_train_from_step(tmp_path / "o" / "predictions.csv", 2)  # the fair oracle: the same rows
    out = _cli("probe", "--run", str(tmp_path / "run"), "--data", str(probe), "--out", str(tmp_path / "bad"),
               "--window-end", "step", "--quiet")
    assert out.returncode != 0 and "--window-end" in out.stderr and not (tmp_path / "bad").exists()


def test_window_end_on_an_unchunked_run_is_a_one_line_error(data, tmp_path):
    pre, _ = data
    out = _cli("train", "--data", str(pre), "--preset", "control", "--window-end", "step", "--out",
               str(tmp_path / "r"), "--max-steps", "1", "--quiet")
    assert out.returncode != 0 and "--chunk-steps" in out.stderr and not (tmp_path / "r").exists()


def test_the_controls_preset_runs_as_one_command(monkeypatch, tmp_path):
    import dataclasses

    from conftest import tiny_controls

    from orbitlaw.cli import main
    from orbitlaw.study import presets

    monkeypatch.setitem(presets.STUDY_PRESETS, "controls",
                        dataclasses.replace(presets.STUDY_PRESETS["controls"], config={"controls": tiny_controls()}))
    out = tmp_path / "study"
    assert main(["run", "--preset", "controls", "--out", str(out), "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["models"] == [] and len(results["controls"]) == 8
    assert results["seeds"]["controls"] == [0] and results["code_version"]
    report = (out / "report.md").read_text()
    assert "## Controls" in report and "## Models" not in report
    assert (out / results["figures"]["controls_forces"]).stat().st_size > 5_000
    # the probe reads the planet's acceleration, and its law is judged as one (Newton: G m2 / r^2) at the rule's 2%
    assert {c["target"] for c in results["controls"]} == {"acceleration-magnitude"}
    assert "probe R² (ln\\|a\\|)" in report and "Newton: -2, 0, 1" in report
    law = json.loads((out / "controls" / "laws" / "W3-s0" / "LAW.json").read_text())
    assert law["settings"]["quantity"] == "acceleration" and law["settings"]["tolerance"] == 0.02
    assert law["data"]["target"] == "a_pred" and law["rule"]["quantity"] == "acceleration"
    assert "newton_departure_exact" in law and law["exact"]["expression"]
    frozen = json.loads((out / "controls" / "laws-frozen" / "W3-s0" / "LAW.json").read_text())
    assert frozen["data"]["target"] == "a_pred" and frozen["rule"] == law["rule"]
    assert all(c["law_frozen"]["verdict"] for c in results["controls"] if c["kind"] == "model")
    assert "frozen state: verdict" in report


def _row(name, newtonian, kind="model"):
    return {"name": name, "kind": kind, "newtonian": newtonian}


def test_the_pass_rule_needs_two_of_three_positive_seeds_and_no_newtonian_negative():
    from orbitlaw.study.controls import passes

    negatives = [_row("W1", False), _row("W3-untrained", False)]
    ok = passes([_row("W3-s5", True), _row("W3-s6", False), _row("W3-s7", True), *negatives,
                 _row("mlp-W3", True, "oracle")])
    assert ok == {"passed": True, "positive": "2/3", "negatives_newtonian": [], "reasons": []}
    weak = passes([_row("W3-s5", True), _row("W3-s6", False), _row("W3-s7", False), *negatives])
    assert not weak["passed"] and weak["reasons"] == ["positive control newtonian in 1/3 training seeds (needs 2)"]
    leaky = passes([_row(f"W3-s{k}", True) for k in range(3)] + [_row("W1", False), _row("W3-untrained", True)])
    assert not leaky["passed"] and leaky["negatives_newtonian"] == ["W3-untrained"]
    with pytest.raises(ValueError, match="three positive-control rows"):
        passes([_row("W3-s0", True), *negatives])


def test_run_controls_runs_only_the_named_configurations(tmp_path):
    import torch
    from conftest import tiny_controls

    from orbitlaw.study import stages
    from orbitlaw.study.controls import configurations, run_controls

    spec = tiny_controls()
    study = stages.Study(tmp_path / "study", progress=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker of the side-by-side run below: the same arithmetic
    try:
        rows = run_controls(study, spec, 1, False, only={"W1", "knn-W3"})
    finally:
        torch.set_num_threads(threads)
    assert [r["name"] for r in rows] == ["W1", "knn-W3"]
    assert [p.name for p in study.path("controls", "runs").iterdir()] == ["W1"]
    assert [p.name for p in study.path("controls", "oracles").iterdir()] == ["knn-W3"]
    assert all(r["law"] and r["verdict"] for r in rows)
    assert rows[0]["val_loss"] > 0 and rows[1]["val_loss"] is None  # a model's last validation loss; none for an oracle
    with pytest.raises(ValueError, match="unknown control configuration W7"):
        run_controls(study, spec, 1, False, only={"W7"})

    # two workers: W1, a configuration beyond the spec's own (its copy, the way of
    # benchmarks/experiments/control_full_untrained.py; labelled whole-sequence, so it is started first) and the
    # oracle side by side in two processes, rows in the spec's order, each the same as run alone in this process
    w1 = next(c for c in configurations(spec) if c["name"] == "W1")
    side = stages.Study(tmp_path / "side", progress=False)
    both = run_controls(side, spec, 2, False, only={"W1", "W7", "knn-W3"},
                        extra=[{**w1, "name": "W7", "window": None}])
    assert [(r["name"], r["window"]) for r in both] == [("W1", 1), ("W7", None), ("knn-W3", 3)]
    numbers = ("probe_r2", "probe_r2_log", "linear_probe_r2", "linear_probe_r2_log", "val_loss", "verdict",
               "newtonian_seeds")
    for row, alone in zip(both, [rows[0], rows[0], rows[1]], strict=True):
        assert {k: row[k] for k in numbers} == {k: alone[k] for k in numbers}
        assert row["law"]["expression"] == alone["law"]["expression"]
    assert side.path("controls", "laws", "W7", "LAW.json").exists()


def test_evaluate_reports_a_regression_run_against_the_no_physics_predictors(data, tmp_path):
    pre, _ = data
    train(_config(pre, tmp_path / "run", max_steps=3), progress=False)
    out = _cli("evaluate", "--run", str(tmp_path / "run"), "--data", str(pre))
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "run" / "eval.json").read_text())
    base = result["baselines"]
    assert base["targets"] == 4 * 3  # 4 val windows of 6 positions: targets 3-5 have two earlier positions
    assert result["position_error_au"] == base["model"]["position_error_au"] > 0
    assert base["constant_velocity"]["position_error_au"] < base["repeat_last"]["position_error_au"]
    out = _cli("evaluate", "--run", str(tmp_path / "run"), "--data", str(pre), "--lengths", "1,2")
    assert out.returncode != 0 and "regression model" in out.stderr


def test_window_columns_are_a_pure_function_of_seed_and_step():
    from orbitlaw.discovery.probes.probe import ProbeConfig, window_columns

    cfg = ProbeConfig(run="r", data="d", out="o", windows_per_sequence=5, seed=4)
    draws = [window_columns(cfg, 6, 20, step) for step in range(6)]
    for cols in draws:
        assert len(cols) == 5 and np.all(np.diff(cols) > 0) and cols.min() >= 0 and cols.max() < 20
    assert len({tuple(c) for c in draws}) > 1  # a fresh draw each step ...
    np.testing.assert_array_equal(window_columns(cfg, 6, 20, 3), draws[3])  # ... the same on a resume
    np.testing.assert_array_equal(window_columns(cfg, None, 20, 3), np.arange(20))  # a whole-sequence model
    np.testing.assert_array_equal(window_columns(cfg, 6, 4, 3), np.arange(4))  # k >= positions: all of them


def test_windows_per_sequence_reads_k_windows_a_step_and_resumes_exactly(data, tmp_path, monkeypatch):
    import os
    import signal

    from orbitlaw.discovery.probes.probe import ProbeConfig, finetune
    from orbitlaw.models.gpt import GPT
    from orbitlaw.models.loop import TrainingStopped

    pre, probe = data
    train(_config(pre, tmp_path / "run", max_steps=3), progress=False)
    train(_config(pre, tmp_path / "whole", max_steps=3, chunk_steps=None), progress=False)
    reads = []

    def cfg(run, out, **kw):
        return ProbeConfig(run=str(tmp_path / run), data=str(probe), out=str(tmp_path / out), steps=4, batch=4,
                           checkpoint_every=2, train_sequences=12, heldout_sequences=12, schedule="cosine",
                           target="acceleration-magnitude", **kw)

    original = GPT.hidden_states

    def counting(self, tokens, at=None):
        reads.append(None if at is None else len(at))
        return original(self, tokens, at)

    with monkeypatch.context() as patch:
        patch.setattr(GPT, "hidden_states", counting)
        ref = finetune(cfg("run", "p", windows_per_sequence=5), progress=False)
    assert reads[:4] == [5, 5, 5, 5]  # the fine-tuning steps read 5 windows of each sequence; predicting, all
    assert all(r == 20 for r in reads[4:]) and ref["positions_per_step"] == 5
    assert json.loads((tmp_path / "p" / "metrics.json").read_text())["settings"]["windows_per_sequence"] == 5

    # stopped by SIGTERM during step 3 (it saves there), then run again: the uninterrupted result
    def killing(self, tokens, at=None):
        reads.append(None)
        if len(reads) == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, tokens, at)

    reads.clear()
    with monkeypatch.context() as patch, pytest.raises(TrainingStopped):
        patch.setattr(GPT, "hidden_states", killing)
        finetune(cfg("run", "resumed", windows_per_sequence=5), progress=False)
    resumed = tmp_path / "resumed"
    assert (resumed / "latest").read_text().strip() == "ckpt-00000003" and not (resumed / "metrics.json").exists()
    finetune(cfg("run", "resumed", windows_per_sequence=5), progress=False)
    assert (resumed / "predictions.csv").read_bytes() == (tmp_path / "p" / "predictions.csv").read_bytes()
    # every position, every step: a different fit; a whole-sequence model reads every position either way
    finetune(cfg("run", "all"), progress=False)
    assert (tmp_path / "all" / "predictions.csv").read_bytes() != (tmp_path / "p" / "predictions.csv").read_bytes()
    finetune(cfg("whole", "w5", windows_per_sequence=5), progress=False)
    finetune(cfg("whole", "w"), progress=False)
    assert (tmp_path / "w5" / "predictions.csv").read_bytes() == (tmp_path / "w" / "predictions.csv").read_bytes()
    with pytest.raises(ValueError, match="`windows_per_sequence` subsamples"):
        finetune(cfg("run", "bad", windows_per_sequence=5, protocol="reference"), progress=False)
    out = _cli("probe", "--run", str(tmp_path / "run"), "--data", str(probe), "--out", str(tmp_path / "bad"),
               "--windows-per-sequence", "0", "--quiet")
    assert out.returncode != 0 and "windows-per-sequence" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_a_batch_without_a_label_has_zero_loss():
    from orbitlaw.discovery.probes.probe import masked_mse

    pred = torch.ones(2, 3, 1, requires_grad=True)
    loss = masked_mse(pred, torch.full((2, 3, 1), float("nan")))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(pred.grad, torch.zeros_like(pred))
    target = torch.full((2, 3, 1), float("nan"))
    target[0, 1] = 3.0
    assert masked_mse(pred, target).item() == 4.0
