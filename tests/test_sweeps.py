"""The LSSAR write-up's experiments on the toolkit: passkey retrieval and the length-extrapolation
sweep, at toy size (the full sweeps are experiments: benchmarks/experiments/passkey.py,
benchmarks/experiments/extrapolation.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orbitlaw.models.passkey import DIGITS, KEY, QUERY, PasskeyConfig, make_batch, run_passkey

ROOT = Path(__file__).resolve().parents[1]


def test_passkey_sequences_hide_one_key_and_end_with_the_query():
    tokens, key = make_batch(np.random.default_rng(0), 64, 40)
    t = tokens.numpy()
    assert t.shape == (64, 40, 2) and key.shape == (64, 2)
    assert np.all(t[:, -1] == QUERY)
    is_key = np.all(t >= KEY, axis=-1) & np.all(t < KEY + DIGITS, axis=-1)
    assert np.all(is_key.sum(1) == 1)  # exactly one key token, before the query
    assert np.array_equal(t[is_key] - KEY, key.numpy())
    assert np.all(t[:, :-1][~is_key[:, :-1]] < DIGITS)  # everything else is filler digits
    depths = np.argmax(is_key, axis=1)
    assert depths.min() < 10 and depths.max() > 29  # anywhere before the query


def test_a_passkey_run_learns_the_key_and_reports_accuracy_per_length(tmp_path):
    out = run_passkey(PasskeyConfig(attention="lssar-adaptive", steps=150, train_length=16, test_samples=50,
                                    test_multiples=[1, 2]), out=tmp_path / "pk.json")
    assert json.loads((tmp_path / "pk.json").read_text())["accuracy"] == out["accuracy"]
    assert out["accuracy"]["1"] > 0.5 > 0.01  # far above chance (1/100) after 150 steps
    assert out["config"]["attention"] == "lssar-adaptive" and out["code_version"]


@pytest.mark.parametrize("cfg, message", [({"train_length": 4}, "train-length must be at least 8"),
                                          ({"test_multiples": [0]}, "test multiples must be >= 1")])
def test_passkey_bad_settings_are_one_line(cfg, message):
    with pytest.raises(ValueError, match=message):
        run_passkey(PasskeyConfig(**cfg))


def test_toy_sweeps_write_their_tables(tmp_path):
    for script, extra in (("passkey.py", ["--steps", "3", "--train-length", "8", "--test-samples", "4"]),
                          ("extrapolation.py", ["--steps", "2", "--context", "16", "--width", "32", "--sequences",
                                                "1", "--train-sequences", "20", "--batch", "4"])):
        out = tmp_path / script.replace(".py", ".json")
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "experiments" / script), "--seeds", "2", "--only",
                        "softmax,relu-l1", "--work", str(tmp_path / "work"), "--out", str(out), *extra],
                       check=True, cwd=ROOT, capture_output=True, timeout=600)
        doc = json.loads(out.read_text())
        assert set(doc["table"]) == {"softmax", "relu-l1"} and out.with_suffix(".png").exists()
        entry = doc["table"]["softmax"]["16" if script == "passkey.py" else "16"]
        assert entry["sd"] is not None and len(entry["accuracy" if script == "passkey.py" else "loss"]) == 2
