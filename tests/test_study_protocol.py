"""``orbitlaw run --protocol`` and ``--show-config``: the resolved configuration of each study preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orbitlaw.cli import main
from orbitlaw.models.train import TrainConfig
from orbitlaw.study.presets import STUDY_PRESETS, VERDICT_RULE, study_config

REFERENCE_RECIPE = {"preset": "gpt-109m", "pos": "learned", "lr": 6e-4, "schedule": "constant", "warmup_steps": 0,
                    "batch_size": 512, "max_steps": 600_000}


def test_gpu_109m_under_the_reference_protocol_is_the_reference():
    c = study_config("gpu-109m", protocol="reference")
    assert {k: c["train"][k] for k in REFERENCE_RECIPE} == REFERENCE_RECIPE and c["train"]["precision"] == "fp32"
    assert c["pretrain_data"]["preset"] == "vafa2025" and c["pretrain_data"]["splits"]["train"] == 10_000_000
    assert c["probe_data"] == {"preset": "two-body-exoplanet", "splits": {"train": 10_000}, "seed": 1}
    assert (c["probe"]["train_sequences"], c["probe"]["heldout_sequences"]) == (9_000, 1_000)
    assert (c["probe"]["steps"], c["probe"]["batch"], c["probe"]["protocol"]) == (10_000, 64, "reference")
    assert c["solar_probe"]["protocol"] == "reference"
    assert c["discover"]["protocol"] == "reference" and (c["discover"]["seeds"], c["discover"]["restarts"]) == (5, 3)
    assert c["evaluate"]["lengths"] == [1]  # learned positions cannot be evaluated past their block
    assert c["protocol"] == "reference" and c["notes"] == []


def test_gpu_109m_under_the_orbitlaw_protocol_departs_only_where_documented():
    ref, own = study_config("gpu-109m", protocol="reference"), study_config("gpu-109m")
    assert own["protocol"] == "orbitlaw" and own["probe"]["protocol"] == own["discover"]["protocol"] == "orbitlaw"
    assert own["train"]["precision"] == "bf16" and any("bf16" in n for n in own["notes"])
    same = {k: v for k, v in own["train"].items() if k != "precision"}
    assert same == {k: v for k, v in ref["train"].items() if k != "precision"}
    assert own["probe_data"] == ref["probe_data"] and own["pretrain_data"] == ref["pretrain_data"]
    rope = study_config("gpu-109m-rope", protocol="reference")
    assert rope["train"]["pos"] == "rope" and rope["evaluate"]["lengths"] == [1, 2, 4, 8, 16]
    assert any("rotary" in n for n in rope["notes"])


@pytest.mark.parametrize("preset", ["smoke", "cpu"])
def test_small_presets_say_what_they_cannot_match(preset):
    c = study_config(preset, protocol="reference")
    assert c["probe"]["protocol"] == c["discover"]["protocol"] == "reference"
    assert c["probe_data"]["preset"] == "two-body" and any("two-body" in n for n in c["notes"])
    assert STUDY_PRESETS[preset].config["train"] == c["train"]  # the training recipe stays the preset's


def test_show_config_prints_the_resolved_config_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--preset", "gpu-109m", "--protocol", "reference", "--show-config"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == json.loads(json.dumps(study_config("gpu-109m", protocol="reference")))
    assert list(tmp_path.iterdir()) == []


def test_misspelled_protocol_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--preset", "smoke", "--protocol", "referense", "--out", "x"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'referense'" in err and len(err.strip().splitlines()) == 1


def test_a_study_needs_out_unless_it_only_shows_its_config(capsys):
    assert main(["run", "--preset", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "--out STUDY is required" in err and len(err.strip().splitlines()) == 1


def test_bf16_is_an_option_under_the_reference_protocol():
    c = study_config("gpu-109m", protocol="reference", precision="bf16")
    assert c["train"]["precision"] == "bf16" and any("bf16" in n for n in c["notes"])
    assert study_config("gpu-109m", precision="fp32")["notes"] == []


def test_training_precision_is_validated():
    with pytest.raises(ValueError, match="precision must be one of bf16, fp32; got 'fp16'"):
        TrainConfig(data="d", out="o", precision="fp16").validate()


@pytest.mark.parametrize("preset", ["smoke", "cpu", "controls"])
def test_the_controls_law_settings_are_valid_under_both_protocols(preset):
    """The controls and the models are judged by one rule, VERDICT_RULE: 2% precision under orbitlaw (the
    precision rule's choice), the reference's score selection (no precision) under reference."""
    from orbitlaw.discovery.sr.backends import SearchSettings
    from orbitlaw.discovery.sr.symbolic import discover_law

    G = 4 * np.pi**2
    rng = np.random.default_rng(0)
    table = {"r": rng.uniform(1, 3, 200), "m1": rng.uniform(0.2, 1, 200), "m2": rng.uniform(0.2, 1, 200)}
    table["a_pred"] = G * table["m2"] / table["r"] ** 2
    for protocol, tolerance in (("orbitlaw", 0.02), ("reference", 0.0)):
        config = study_config(preset, protocol=protocol)
        spec = config["controls"]["discover"]
        # one rule: the controls' symbolic regression is the models' (and the LLM answers')
        assert {k: spec[k] for k in ("tolerance", "selection")} == VERDICT_RULE[protocol]
        if preset != "controls":
            assert {k: config["discover"][k] for k in ("tolerance", "selection")} == VERDICT_RULE[protocol]
        assert config["verdict_rule"] == {**VERDICT_RULE[protocol], "protocol": protocol}
        assert spec["tolerance"] == tolerance
        law = discover_law(table, "a_pred", seeds=1, points=50, restarts=1, settings=SearchSettings(budget=1000),
                           protocol=spec["protocol"], quantity="acceleration", tolerance=spec["tolerance"],
                           selection=spec["selection"])
        assert law["settings"]["tolerance"] == tolerance and law["verdict"]
        assert law["rule"]["precision"] == tolerance and law["rule"]["quantity"] == "acceleration"


@pytest.mark.parametrize("preset", ["smoke", "cpu", "gpu-109m", "controls"])
@pytest.mark.parametrize("protocol", ["orbitlaw", "reference"])
def test_the_controls_probe_settings_are_valid_under_both_protocols(preset, protocol):
    """The fine-tune a study hands its controls' probes passes ProbeConfig's checks before any stage runs (the
    reference's fine-tune reads every labelled step: no windows_per_sequence)."""
    from orbitlaw.discovery.probes.probe import ProbeConfig

    probe = study_config(preset, protocol=protocol)["controls"]["probe"]
    ProbeConfig(run="r", data="d", out="o", target="acceleration-magnitude", **probe).validate()
    assert ("windows_per_sequence" in probe) == (protocol == "orbitlaw")


def test_each_study_preset_is_one_record_that_the_cli_and_study_config_read(capsys):
    """``--preset`` offers the registry's names with their summaries, and what sets a preset apart is its record's:
    its notes, the reference scale's precision, models or the controls alone."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for record in STUDY_PRESETS.values():
        assert f"{record.name} ({record.summary})" in shown
        for protocol in ("orbitlaw", "reference"):
            c = study_config(record.name, protocol=protocol)
            assert c["preset"] == record.name and ("attentions" in c) == record.models
            assert c["notes"][:len(record.notes)] == list(record.notes)
            if record.reference_scale:
                assert c["train"]["precision"] == {"orbitlaw": "bf16", "reference": "fp32"}[protocol]
    with pytest.raises(ValueError, match="unknown study preset 'tiny': choose one of smoke, cpu"):
        study_config("tiny")
