"""The path from the positive control to a GPT over the toolkit's tokens (orbitlaw.study.path): the regression
model's bin inputs and outputs, one change per rung, the replication rule, and the preset as one command."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import tiny_controls

from orbitlaw.models.presets import build_model
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.study import path, presets

SMALL = {"n_embd": 16, "n_head": 2, "n_layer": 1}


def test_bin_ids_and_centres_are_the_tokenisers():
    spec = TokenizerSpec()
    xy = np.random.default_rng(0).uniform(-60, 60, size=(2000, 2))  # beyond [-50, 50) too: clipped alike
    xy[:5] = [[-50, 50], [0, 0], [spec.width, -spec.width], [49.99, -49.99], [-50.01, 1e-12]]
    model = build_model("control", inputs="bins", **SMALL)
    ids = model.config.bin_ids(torch.from_numpy(xy))
    np.testing.assert_array_equal(ids.numpy(), spec.encode(xy)[0])
    np.testing.assert_allclose(model.config.bin_centres(ids).numpy(), spec.decode(ids.numpy()), atol=1e-5)


def test_bin_outputs_predict_a_distribution_over_each_coordinates_bins():
    model = build_model("control", inputs="bins", outputs="bins", **SMALL)
    x = torch.randn(3, 6, 2)
    out, loss = model(x)
    assert out.shape == (3, 6, 2, 7000) and loss is None
    positions = model.positions(out)
    np.testing.assert_allclose(positions.numpy(), model.config.bin_centres(out.argmax(-1)).numpy())
    # the loss on a window's last target only: the logits computed there alone are the whole output's there
    y = torch.full((3, 6, 2), float("nan"))
    y[:, -1] = torch.randn(3, 2)
    none, kept = model(x, y)
    assert none is None
    torch.testing.assert_close(kept, model.loss(out, y))
    ids = model.config.bin_ids(y[:, -1])
    expected = torch.nn.functional.cross_entropy(out[:, -1].reshape(-1, 7000), ids.reshape(-1))
    torch.testing.assert_close(kept, expected)


def test_centre_inputs_read_the_bins_centres_in_au_through_the_position_embedding():
    centres = build_model("control", inputs="centres", **SMALL)
    plain = build_model("control", **SMALL)
    plain.load_state_dict(centres.state_dict())  # the same parameters: a linear embedding of 2 coordinates
    x = torch.randn(3, 6, 2, dtype=torch.float64) * 3
    snapped = centres.config.bin_centres(centres.config.bin_ids(x))
    torch.testing.assert_close(centres(x.float())[0], plain(snapped)[0])
    # positions within one bin read alike; the next bin does not
    jitter = snapped.double() + 0.4 * centres.config.bin_centres(torch.ones(1)).new_tensor(0.0143)
    torch.testing.assert_close(centres(jitter.float())[0], centres(snapped)[0])
    assert not torch.allclose(centres((snapped + 0.0143 * 1.5).float())[0], centres(snapped)[0])


def test_each_end_starts_as_the_token_gpt_does():
    both = build_model("control", inputs="bins", outputs="bins", embed_init="fourier", n_embd=32, n_head=2)
    tokens = build_model("tiny", embed_init="fourier", n_embd=32, n_head=2, n_layer=2)
    torch.testing.assert_close(both.wte_x.weight[:7000], tokens.wte_x.weight[:7000])
    torch.testing.assert_close(both.head.weight[:7000], tokens.head.weight[:7000])
    torch.testing.assert_close(both.head.weight[7000:], tokens.head.weight[7003:14003])
    inputs_only = build_model("control", inputs="bins", embed_init="fourier", n_embd=32, n_head=2)
    assert inputs_only.head.weight.shape == (2, 32) and inputs_only.head.weight.abs().max() < 0.2
    torch.testing.assert_close(inputs_only.wte_y.weight[:7000], tokens.wte_y.weight[:7000])
    outputs_only = build_model("control", outputs="bins", embed_init="fourier", n_embd=32, n_head=2)
    assert isinstance(outputs_only.wte, torch.nn.Linear)
    torch.testing.assert_close(outputs_only.head.weight[7000:], tokens.head.weight[7003:14003])


@pytest.mark.parametrize("settings, message", [
    ({"preset": "tiny", "inputs": "bins"}, "inputs='bins' is for a regression model"),
    ({"preset": "control", "outputs": "tokens"}, "unknown outputs 'tokens'"),
    ({"preset": "control", "bin_lo": 1.0, "bin_hi": 1.0}, "bin_hi > bin_lo"),
])
def test_bad_bin_settings_are_one_line_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        build_model(**settings)


def _path_config(seed=0):
    return presets.study_config("path", seed=seed)


def test_each_rung_changes_exactly_what_it_says():
    config = _path_config()
    rungs = path.rung_settings(config["controls"], config["path"])
    assert [r["rung"] for r in rungs] == [r["name"] for r in path.RUNGS]
    flat = [{**{k: v for k, v in r["train"].items() if k != "model_overrides"},
             **{f"model.{k}": v for k, v in r["train"]["model_overrides"].items()}} for r in rungs]
    changed = [sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
               for a, b in zip(flat, flat[1:], strict=False)]
    schedule = ["checkpoint_every", "log_every", "warmup_steps", "eval_every"]  # follow from max_steps
    assert changed == [["model.inputs"], ["model.embed_init", "model.inputs"], ["input_noise"], ["model.outputs"],
                       sorted(["batch_size", "max_steps", *schedule]), ["chunk_steps", "window_end", "window_loss"]]
    assert flat[-1]["max_steps"] == config["path"]["whole_train"]["max_steps"]


def test_rung_zero_is_the_positive_control_itself():
    from orbitlaw.study.controls import configurations

    config = _path_config(seed=10)
    rows = path.configurations(config["controls"], config["path"])
    control = {c["name"]: c for c in configurations(config["controls"])}
    zero = [r for r in rows if r["rung"] == "positions"]
    assert [r["name"] for r in zero] == ["W3-s10", "W3-s11", "W3-s12", "positions-lssar-s10", "positions-laser-s10"]
    for r in zero[:3] + [next(r for r in rows if r["name"] == "tokens")]:  # the controls study's own rows: the
        assert r["train"] == control[r["name"]]["train"] and r["attention"] == "softmax"  # same stages
    # every attention's chain differs from its rung 0 only by the rungs' changes
    lssar = next(r for r in zero if r["attention"] == "lssar")
    assert lssar["train"] == control["W3-s10"]["train"]
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names))
    assert "bins-in-lssar-s10" in names and "whole-laser-s10" in names and "budget-laser-s10" in names
    assert "centres-in-softmax-s10" in names and "centres-in-laser-s10" in names
    # one untrained negative at bins-in: bins-in's softmax model, one step at lr 0, at the first seed only
    neg = next(r for r in rows if r["name"] == path.UNTRAINED)
    bins_in = next(r for r in rows if r["name"] == "bins-in-softmax-s10")
    assert neg["negative"] and neg["train"]["model_overrides"] == bins_in["train"]["model_overrides"]
    assert (neg["train"]["max_steps"], neg["train"]["lr"], neg["train"]["input_noise"]) == (1, 0.0, 0.0)
    later = path.configurations(config["controls"], config["path"], [11])
    assert path.UNTRAINED not in {r["name"] for r in later}
    assert {"tokens", "tokens-lssar-s10", "tokens-laser-s10"} <= set(names)
    # the whole rung's own row is the width-64, 1x cell: not trained twice
    assert "whole-softmax-w64-x1-s10" not in names and "whole-softmax-w128-x1-s10" in names
    # --attention narrows the size rows too
    narrow = presets.study_config("path", attentions=["softmax"], seed=10)
    assert not [r for r in path.configurations(narrow["controls"], narrow["path"]) if r["attention"] != "softmax"]
    big = next(r for r in rows if r["name"] == "whole-lssar-w128-x9-s10")
    assert big["train"]["max_steps"] == 9 * config["path"]["whole_train"]["max_steps"]
    assert big["train"]["model_overrides"]["n_embd"] == 128 and big["window"] is None


def test_the_reference_protocol_probes_the_top_rungs_on_the_reference_probe_set():
    config = presets.study_config("path", seed=10, protocol="reference")
    controls, spec = config["controls"], config["path"]
    probe = controls["data"]["probe"]
    assert probe["preset"] == "two-body-exoplanet" and probe["seed"] == 21  # the controls' probe seed, shifted
    assert probe["overrides"] == {"seq_len": 201, "steps": 100, "time_step_index": 1}  # the shape trained on
    assert probe["splits"] == _path_config(seed=10)["controls"]["data"]["probe"]["splits"]
    assert controls["target"] == "force-magnitude" and controls["probe"]["protocol"] == "reference"
    assert controls["discover"]["selection"] == "score" and "sizes" not in spec
    rows = path.configurations(controls, spec)
    assert sorted({r["rung"] for r in rows}) == sorted(["positions", "bins-in", "whole", "tokens"])
    assert {"W3-s10", "W3-s11", "W3-s12", "whole-lssar-s10", "tokens", "tokens-laser-s10"} <= {r["name"] for r in rows}
    # the rows keep their rung's cumulative settings: the same models as on the controls' probe set
    plain = {r["name"]: r for r in path.configurations(*(lambda c: (c["controls"], c["path"]))(_path_config(10)))}
    assert all(r["train"] == plain[r["name"]]["train"] for r in rows)
    assert "reference" not in _path_config()["path"]
    with pytest.raises(ValueError, match="unknown path rung 'whole-ish'|unknown path rung whole-ish"):
        path.configurations(controls, {**spec, "rungs": ["whole-ish"]})


def _r(name, rung, index, attention, newtonian, seed=0, budget=None, width=64, ci=(0.0, 0.01)):
    return {"name": name, "rung": rung, "rung_index": index, "attention": attention, "newtonian": newtonian,
            "seed": seed, "budget": budget, "width_row": budget is not None, "width": width,
            "law": {"newton_departure_exact_ci95": list(ci)}}


ROWS = [_r("W3-s0", "positions", 0, "softmax", True),
        _r("bins-in-softmax-s0", "bins-in", 1, "softmax", True),
        _r("no-noise-softmax-s0", "no-noise", 2, "softmax", False, ci=(0.02, 0.03)),
        _r("bins-out-softmax-s0", "bins-out", 3, "softmax", False),
        _r("positions-lssar-s0", "positions", 0, "lssar", True),
        _r("bins-in-lssar-s0", "bins-in", 1, "lssar", False),
        _r("no-noise-lssar-s0", "no-noise", 2, "lssar", False, ci=(0.0, 0.005)),
        _r("bins-out-lssar-s0", "bins-out", 3, "lssar", True),
        _r("whole-softmax-w64-x9-s0", "whole", 5, "softmax", False, budget=9),
        _r("whole-softmax-w64-x1-s0", "whole", 5, "softmax", False, budget=1)]
SPEC = {"attentions": ["softmax", "lssar"], "sizes": {"budgets": [0.3, 1, 9]}}


def test_replication_takes_both_rows_of_each_change_and_the_largest_budget():
    assert path.replication(ROWS, SPEC) == [
        "bins-in-softmax-s0", "no-noise-softmax-s0",  # softmax: lost between bins-in and no-noise
        "positions-lssar-s0", "bins-in-lssar-s0",  # lssar: lost at its first change
        "no-noise-lssar-s0", "bins-out-lssar-s0",  # and back
        "whole-softmax-w64-x9-s0"]


def test_the_path_presets_replicate_every_rung_and_the_anchor():
    every = path.replication(ROWS + [_r("tokens", "tokens", 6, "softmax", True)], {**SPEC, "replicate": "every-rung"})
    assert every == [r["name"] for r in sorted(ROWS, key=lambda r: r["rung_index"]) if not r["width_row"]] + [
        "tokens", "whole-softmax-w64-x9-s0"]
    assert _path_config()["path"]["replicate"] == "every-rung"


def test_the_answer_applies_the_reading_rules():
    replicated = ROWS + [_r("no-noise-softmax-s1", "no-noise", 2, "softmax", True, seed=1),
                         _r("no-noise-softmax-s2", "no-noise", 2, "softmax", False, seed=2),
                         _r("whole-softmax-w64-x9-s1", "whole", 5, "softmax", True, seed=1, budget=9),
                         _r("whole-softmax-w64-x9-s2", "whole", 5, "softmax", True, seed=2, budget=9)]
    a = path.answer(replicated, SPEC)
    assert a["softmax"]["lost_at"] == {"rung": "no-noise", "newtonian": "1/3", "rung_before": "bins-in",
                                       "newtonian_before": "1/1"}
    assert a["softmax"]["largest_budget_newtonian"] == {"w64": "2/3"} and a["softmax"]["restored"]
    assert a["softmax"]["held_at_start"] and a["softmax"]["start_newtonian"] == "1/1"
    assert a["lssar"]["lost_at"]["rung"] == "bins-in"
    # lssar has no size row at the largest budget: not measured, not "not restored"
    assert a["lssar"]["restored"] is None and a["lssar"]["largest_budget_newtonian"] is None
    assert a["lssar"]["differs_from_softmax"] and a["lssar"]["departure_apart_from_softmax_at"] == ["no-noise"]


def test_exact_laws_draw_with_their_intervals(tmp_path):
    from orbitlaw.study.figures import plot_path

    def drawn(rows):
        return [{**r, "training_tokens": 1000 * (1 + (r["budget"] or 1)),
                 "law": {"newton_departure_exact": 1e-16, "newton_departure_exact_ci95": [2e-5, 0.004]}}
                for r in rows]
    first = plot_path(drawn(ROWS), tmp_path / "path.png", 0.01)
    assert first.stat().st_size > 5_000
    # a size row at another training seed is drawn too (an open marker beside its first seed's line)
    again = {**drawn([_r("whole-softmax-w64-x9-s1", "whole", 5, "softmax", False, seed=1, budget=9)])[0],
             "law": {"newton_departure_exact": 0.25, "newton_departure_exact_ci95": [0.2, 0.3]}}
    more = plot_path(drawn(ROWS) + [again], tmp_path / "more.png", 0.01)
    assert more.read_bytes() != first.read_bytes()


@pytest.mark.parametrize("exponents, target, expected", [
    ({"r": -2, "m1": 0, "m2": 0}, "acceleration-magnitude", True),
    ({"r": -2, "m1": 0, "m2": 1}, "acceleration-magnitude", False),
    ({"r": -2, "m1": 1, "m2": 0}, "force-magnitude", True),
    ({"r": -2, "m1": 1, "m2": 1}, "force-magnitude", False),
])
def test_the_lssar_write_ups_law_is_the_inverse_square_without_the_star_mass(exponents, target, expected):
    assert path.ignores_star_mass({"power_law": {"exponents": exponents}}, target) is expected
    assert path.ignores_star_mass({"power_law": None}, target) is False


def _small_path(monkeypatch, path_settings: dict, seeds: tuple[int, ...] = (0,)) -> None:
    """Make the ``path`` preset a few seconds' worth: the tiny controls and the rungs' ``path_settings``."""
    monkeypatch.setitem(presets.STUDY_PRESETS, "path", dataclasses.replace(
        presets.STUDY_PRESETS["path"], config={"controls": tiny_controls(seeds), "path": path_settings}))


def test_the_path_preset_runs_as_one_command(monkeypatch, tmp_path):
    from orbitlaw.cli import main

    _small_path(monkeypatch, {"attentions": ["lssar"], "whole_train": {"batch_size": 4, "max_steps": 6},
                              "sizes": {"attentions": ["lssar"], "widths": [64], "budgets": [0.5, 1]}})
    out = tmp_path / "study"
    assert main(["run", "--preset", "path", "--out", str(out), "--quiet", "--workers", "1"]) == 0
    results = json.loads((out / "results.json").read_text())
    rows = {r["name"]: r for r in results["path"]}
    assert list(rows) == ["positions-lssar-s0", "centres-in-lssar-s0", "bins-in-lssar-s0", "no-noise-lssar-s0",
                          "bins-out-lssar-s0",
                          "budget-lssar-s0", "whole-lssar-s0", "whole-lssar-w64-x0.5-s0", "tokens-lssar-s0"]
    assert rows["whole-lssar-w64-x0.5-s0"]["steps"] == 3 and rows["whole-lssar-s0"]["steps"] == 6
    run_config = json.loads((out / "controls" / "runs" / "bins-out-lssar-s0" / "config.json").read_text())
    assert run_config["model"]["inputs"] == run_config["model"]["outputs"] == "bins"
    assert run_config["train"]["attention"] == "lssar" and run_config["train"]["input_noise"] == 0
    for r in rows.values():
        assert r["law"]["verdict"] and r["law"]["rule"]["quantity"] == "acceleration"
        assert r["law_frozen"]["verdict"] and isinstance(r["m1_over_r2"], bool) and r["training_tokens"] > 0
    assert len(results["path_summary"]) == 9 and results["config"]["path"]["attentions"] == ["lssar"]
    centres = json.loads((out / "controls" / "runs" / "centres-in-lssar-s0" / "config.json").read_text())
    assert centres["model"]["inputs"] == "centres" and centres["model"]["embed_init"] == "normal"
    assert [r["name"] for r in results["controls"]] == ["W1", "W3-untrained"]  # no softmax rung 0 here
    assert results["controls_passes"] is None and results["path_answer"]["lssar"]["restored"] is None
    report = (out / "report.md").read_text()
    assert "## The path" in report and "bins-in: inputs" in report
    if not results["path_answer"]["lssar"]["held_at_start"]:  # at smoke size no row has learnt the law
        assert "so there is no law to lose" in report
    assert (out / results["figures"]["path"]).stat().st_size > 5_000
    # resumes with nothing to do: every stage is cached
    stamp = (out / "stages" / "controls__train__whole-lssar-s0.json").stat().st_mtime_ns
    assert main(["run", "--preset", "path", "--out", str(out), "--quiet", "--workers", "1"]) == 0
    assert (out / "stages" / "controls__train__whole-lssar-s0.json").stat().st_mtime_ns == stamp


def test_the_path_under_the_reference_protocol_runs_as_one_command(monkeypatch, tmp_path, capsys):
    from orbitlaw.cli import main

    _small_path(monkeypatch, {"attentions": ["lssar"], "whole_train": {"batch_size": 4, "max_steps": 6}})
    out = tmp_path / "study"
    assert main(["run", "--preset", "path", "--protocol", "reference", "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [r["name"] for r in results["path"]] == ["positions-lssar-s0", "bins-in-lssar-s0", "whole-lssar-s0",
                                                    "tokens-lssar-s0"]
    manifest = json.loads((out / "controls" / "data" / "probe" / "manifest.json").read_text())
    assert manifest["preset"] == "two-body-exoplanet"
    from orbitlaw.orbits.reader import load_dataset

    probe_set = load_dataset(out / "controls" / "data" / "probe")["train"]
    systems = probe_set.systems()
    assert systems.masses[:, 0].max() <= 1e-3 and set(systems.dt_index) == {1}  # the reference's planets
    assert probe_set.tokens.shape[1] == 201  # in the shape the models were trained on
    for r in results["path"]:
        assert r["target"] == "force-magnitude" and r["law"]["rule"]["quantity"] == "force"
        assert r["law"]["rule"]["selection"] == "score"
    report = (out / "report.md").read_text()
    assert "probe R² (ln\\|F\\|)" in report and "two-body-exoplanet" in report
    # committed as results by benchmarks/experiments/path_results.py: nothing runs again, the answer by today's rules
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "experiments" / "path_results.py"
    done = subprocess.run([sys.executable, str(script), str(out), "--name", "ref", "--to", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    committed = json.loads((tmp_path / "ref.json").read_text())
    assert committed["path"] == results["path"] and committed["path_answer"]["lssar"]["restored"] is None
    assert "## The path" in (tmp_path / "ref.md").read_text() and (tmp_path / "ref.png").stat().st_size > 5_000
    # the same directory under the other protocol would replace these stages: refused, nothing touched
    stamp = (out / "stages" / "controls__probe__whole-lssar-s0.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["run", "--preset", "path", "--out", str(out), "--quiet", "--workers", "1"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "protocol 'reference', not 'orbitlaw'" in err
    assert (out / "stages" / "controls__probe__whole-lssar-s0.json").stat().st_mtime_ns == stamp


def test_a_study_directory_of_another_seed_or_protocol_is_refused_before_anything_runs(tmp_path):
    from orbitlaw.provenance import write_json_atomic
    from orbitlaw.study import stages
    from orbitlaw.study.pipeline import check_same_study

    study = stages.Study(tmp_path, False)
    check_same_study(study, _path_config(seed=10))  # an empty directory
    write_json_atomic(study.path("study.json"), {"config": _path_config(seed=10)})
    check_same_study(study, _path_config(seed=10))  # the same study resumes
    check_same_study(study, presets.study_config("path", attentions=["softmax"], seed=10))  # fewer attentions
    check_same_study(study, presets.study_config("path-gpu", seed=10) | {"path": _path_config(10)["path"]})
    with pytest.raises(ValueError, match="another controls config"):
        check_same_study(study, _path_config(seed=5))
    with pytest.raises(ValueError, match="another path config"):
        check_same_study(study, presets.study_config("path-gpu", seed=10))
    with pytest.raises(ValueError, match="protocol 'orbitlaw', not 'reference'"):
        check_same_study(study, presets.study_config("path", seed=10, protocol="reference"))


def _script(name, monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "experiments" / f"{name}.py"
    monkeypatch.syspath_prepend(str(path.parent))  # as when run: its sibling scripts import
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_size_rows_resume_from_committed_row_files_on_a_new_machine(monkeypatch, tmp_path, capsys):
    sizes = _script("path_sizes", monkeypatch)
    _small_path(monkeypatch, {"attentions": ["lssar"], "whole_train": {"batch_size": 4, "max_steps": 6},
                              "sizes": {"attentions": ["lssar"], "widths": [64], "budgets": [0.5, 2]}}, seeds=(0, 1))
    rows_dir, first = tmp_path / "rows", tmp_path / "first.json"
    common = ["--seed", "0", "--workers", "1", "--rows", str(rows_dir), "--chain", "none"]
    # one session trains one row (the cheapest) and its machine is lost
    sizes.main(["--out", str(tmp_path / "lost"), "--max-rows", "1", "--result", str(first), *common])
    partial = json.loads(first.read_text())
    assert [p.name for p in rows_dir.iterdir()] == ["whole-lssar-w64-x0.5-s0.json"]
    assert not partial["complete"] and partial["missing"] == ["whole-lssar-w64-x2-s0", "whole-lssar-w64-x2-s1"]
    assert partial["path_answer"]["lssar"]["restored"] is None and partial["path"][0]["steps"] == 3
    # the next session, on a new study directory, trains only what the files do not hold
    out, final = tmp_path / "study", tmp_path / "final.json"
    sizes.main(["--out", str(out), "--result", str(final), *common])
    done = json.loads(final.read_text())
    names = ["whole-lssar-w64-x0.5-s0", "whole-lssar-w64-x2-s0", "whole-lssar-w64-x2-s1"]
    assert [r["name"] for r in done["path"]] == names and done["complete"] and done["missing"] == []
    assert done["replicated"] == ["whole-lssar-w64-x2-s0"]
    assert done["path"][0] == partial["path"][0] | {"run": done["path"][0]["run"],
                                                     "predictions": done["path"][0]["predictions"]}
    assert [p.name for p in (out / "controls" / "runs" / names[0]).iterdir()] == ["config.json"]  # not trained
    assert isinstance(done["path_answer"]["lssar"]["restored"], bool)
    assert sorted(p.name for p in rows_dir.iterdir()) == [f"{n}.json" for n in names]
    assert (final.with_suffix(".png")).stat().st_size > 5_000 and "## The path" in final.with_suffix(".md").read_text()
    # the figure alone, drawn again from the result (no study, nothing trained)
    final.with_suffix(".png").unlink()
    sizes.main(["--figure-only", "--result", str(final), "--chain", "none"])
    assert final.with_suffix(".png").stat().st_size > 5_000
    with pytest.raises(SystemExit):  # without --figure-only, the study directory is needed
        sizes.main(["--result", str(final), "--chain", "none"])
    # the answer alone, computed again over the result's rows by this checkout (nothing trained)
    stale = json.loads(final.read_text())
    final.write_text(json.dumps(stale | {"path_answer": {}}))
    sizes.main(["--answer-only", "--result", str(final), "--chain", "none"])
    again = json.loads(final.read_text())
    assert again["path_answer"] == stale["path_answer"] and again["answer_code_version"]
    final.write_text(json.dumps(again | {"chain": {"rows": 49, "code_version": "0.1.0+gabc"}}))
    with pytest.raises(SystemExit, match="answered over a chain of 49 rows at 0.1.0.gabc, not none"):
        sizes.main(["--answer-only", "--result", str(final), "--chain", "none"])  # not the chain it was made with
    # a row made by other code or other dependency versions is refused, not mixed in (nor trained again)
    row_file = rows_dir / f"{names[0]}.json"
    original = row_file.read_text()
    saved = json.loads(original)
    row_file.write_text(json.dumps(saved | {"source": "0" * 16}))
    with pytest.raises(SystemExit, match=f"{names[0]}.json: made by source 0000000000000000"):
        sizes.main(["--out", str(tmp_path / "third"), *common])
    saved["stages"]["train"]["versions"]["torch"] = "1.0"
    row_file.write_text(json.dumps(saved))
    with pytest.raises(SystemExit, match="made with {'torch': '1.0'}"):
        sizes.main(["--out", str(tmp_path / "third"), *common])
    row_file.write_text(original)
    (rows_dir / f"{names[-1]}.json").write_text(json.dumps({"row": names[-1]}))  # read after the good ones
    with pytest.raises(SystemExit, match=f"{names[-1]}.json: not a path row file"):
        sizes.main(["--out", str(tmp_path / "third"), *common])
    assert not (tmp_path / "third" / "stages" / f"controls__train__{names[0]}.json").exists()  # nothing written
    # the chain's rows answer only for this study
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps({"config": {"controls": {}}, "preset": "path-gpu", "seed": 0}))
    with pytest.raises(SystemExit, match="the chain of another study"):
        sizes.main(["--out", str(tmp_path / "third"), *common[:-1], str(chain)])


def _d(name, rung, index, seed, d, ci, resolution=0.015, attention="softmax"):
    return {**_r(name, rung, index, attention, False, seed=seed),
            "law": {"newton_departure_exact": d, "newton_departure_exact_ci95": list(ci),
                    "resolution": {"rms_ln": resolution}}}


def test_the_untrained_negative_at_bins_in_is_read_apart_from_the_chain(tmp_path):
    rows = [_d(f"W3-s{s}", "positions", 0, s, 0.009, (0.008, 0.0095)) for s in (0, 1)]
    rows += [_d(f"bins-in-softmax-s{s}", "bins-in", 2, s, d, (d - 0.001, d + 0.001))
             for s, d in ((0, 0.011), (1, 0.013))]
    untrained = {**_d(path.UNTRAINED, path.UNTRAINED, 2, 0, 0.018, (0.016, 0.02)), "negative": True}
    a = path.answer(rows + [untrained], {"attentions": ["softmax"]})["softmax"]
    assert [g["rung"] for g in a["by_distance"]["rungs"]] == ["positions", "bins-in"]  # not a rung of the chain
    assert a["untrained"]["beyond"] and a["untrained"]["row"]["departure"] == 0.018
    assert a["untrained"]["bins_in"]["envelope"] == pytest.approx([0.01, 0.014])
    near = {**untrained, "law": {**untrained["law"], "newton_departure_exact_ci95": [0.012, 0.02]}}
    assert path.answer(rows + [near], {"attentions": ["softmax"]})["softmax"]["untrained"]["beyond"] is False
    assert path.UNTRAINED not in path.replication(rows + [untrained], {"attentions": ["softmax"],
                                                                         "replicate": "every-rung"})
    from orbitlaw.study.figures import plot_path
    from orbitlaw.study.report import path_section
    drawn = [{**r, "training_tokens": 1000, "width_row": False} for r in rows + [untrained]]
    assert plot_path(drawn, tmp_path / "path.png", 0.01).stat().st_size > 5_000
    text = "\n".join(path_section([], [], {"softmax": a}))
    assert "against the untrained negative at `bins-in`" in text and "beyond it." in text


def test_the_path_is_read_by_distance_and_a_step_inside_the_resolution_is_not_a_loss():
    """The issue's reading: rung 0 at 0.9%, bins-in at 1.1-1.4% (apart from rung 0, but inside its own 1.5%
    resolution: not lost), budget at 6-10% (lost there), whole at 18-30%."""
    rows = [_d(f"W3-s{s}", "positions", 0, s, 0.009, (0.008, 0.0095)) for s in (0, 1)]
    rows += [_d(f"bins-in-softmax-s{s}", "bins-in", 1, s, d, (d - 0.001, d + 0.001))
             for s, d in ((0, 0.011), (1, 0.013))]
    rows += [_d(f"budget-softmax-s{s}", "budget", 4, s, d, (d - 0.01, d + 0.01)) for s, d in ((0, 0.06), (1, 0.10))]
    rows += [_d("whole-softmax-s0", "whole", 5, 0, 0.20, (0.18, 0.22))]
    rows += [_d("tokens", "tokens", 6, 0, 0.0, (0.0, 0.0))]
    a = path.answer(rows, {"attentions": ["softmax"]})["softmax"]["by_distance"]
    assert a["lost_at"]["rung"] == "budget" and a["lost_at"]["rung_before"] == "bins-in"
    assert a["lost_at"]["envelope"] == pytest.approx([0.05, 0.11])
    rungs = {g["rung"]: g for g in a["rungs"]}
    assert list(rungs) == ["positions", "bins-in", "budget", "whole"] and a["anchor"]["mean"] == 0.0
    assert rungs["positions"]["effect"] is None and rungs["bins-in"]["mean"] == pytest.approx(0.012)
    assert rungs["bins-in"]["effect"]["change"] == pytest.approx(0.003)
    assert rungs["bins-in"]["effect"]["ci95"] == pytest.approx([0.01 - 0.0095, 0.014 - 0.008])  # apart, yet not lost
    # the same step with a resolution finer than bins-in's departure is a loss at bins-in
    fine = [{**r, "law": {**r["law"], "resolution": {"rms_ln": 0.005}}} for r in rows]
    assert path.answer(fine, {"attentions": ["softmax"]})["softmax"]["by_distance"]["lost_at"]["rung"] == "bins-in"
    from orbitlaw.study.report import distance_lines
    text = "\n".join(distance_lines(path.answer(rows, {"attentions": ["softmax"]})))
    assert "| softmax | budget | 0, 1 | 8.00% | [5.00%, 11.00%] | 1.5% |" in text and "tokens (anchor)" in text
