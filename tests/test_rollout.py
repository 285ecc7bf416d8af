"""orbitlaw rollout: token alignment checked with models that know the answer (the true next token, or a
copy of the body's previous one), sampling reproducible by seed, the command's files and one-line errors."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.models.rollout import rollout
from orbitlaw.models.train import TrainConfig, train


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return orbits.load_dataset(orbits.simulate("vafa2025", {"train": 8, "val": 4}, 0,
                                               tmp_path_factory.mktemp("d") / "data", progress=False))


class Teller(torch.nn.Module):
    """Logits peaked at a fixed next-token table: ``table[t]`` is emitted after t + 1 tokens."""

    def __init__(self, table: np.ndarray, vocab: int):
        super().__init__()
        self.table, self.vocab = torch.from_numpy(table.astype(np.int64)), vocab
        self.config = SimpleNamespace(regression=False, pos="none", block_size=10_000)

    def forward(self, seq):
        logits = torch.zeros(1, seq.shape[1], 2, self.vocab)
        logits[0, -1, 0, self.table[seq.shape[1] - 1, 0]] = 1.0
        logits[0, -1, 1, self.table[seq.shape[1] - 1, 1]] = 1.0
        return logits, None


class Copier(torch.nn.Module):
    """Emits the token of the same body one step earlier (what it was fed, its own outputs included)."""

    def __init__(self, bodies: int, vocab: int):
        super().__init__()
        self.bodies, self.vocab = bodies, vocab
        self.config = SimpleNamespace(regression=False, pos="none", block_size=10_000)

    def forward(self, seq):
        logits = torch.zeros(1, seq.shape[1], 2, self.vocab)
        previous = seq[0, seq.shape[1] - self.bodies]
        logits[0, -1, 0, previous[0]] = logits[0, -1, 1, previous[1]] = 1.0
        return logits, None


def test_a_model_that_emits_the_true_tokens_is_off_by_the_bin_width_only(data):
    split = data["val"]
    tokens = np.asarray(split.tokens[1])
    r = rollout(Teller(tokens[1:], 7003), split, 1, prompt_steps=5, steps=30)
    half_diagonal = split.tokenizer.width / np.sqrt(2)
    assert r.error.shape == (30,) and np.all(r.error <= half_diagonal)
    truth = split.continuous(1)
    bodies = int(split.n_planets[1]) + 1
    np.testing.assert_array_equal(r.true, truth[5 * bodies:35 * bodies].reshape(30, bodies, 2))


def test_a_model_that_repeats_each_body_scores_as_repeat_last(data):
    split = data["val"]
    bodies = int(split.n_planets[2]) + 1
    r = rollout(Copier(bodies, 7003), split, 2, prompt_steps=4, steps=25)
    np.testing.assert_allclose(r.error, r.repeat_last, atol=split.tokenizer.width)
    assert r.repeat_last.max() > 10 * split.tokenizer.width  # the bodies do move: the check can fail


def test_sampling_is_reproducible_by_seed_and_errors_are_one_line(data, tmp_path):
    path = tmp_path / "data"
    orbits.simulate("two-body", {"train": 12, "val": 2}, 1, path, progress=False)
    run = tmp_path / "run"
    train(TrainConfig(data=str(path), out=str(run), preset="tiny", max_steps=2, checkpoint_every=2, eval_every=2,
                      batch_size=2, device="cpu", model_overrides={"n_layer": 1, "n_head": 2, "n_embd": 32,
                                                                   "block_size": 64}), progress=False)

    def cli(*args):
        return run_cli("rollout", "--run", run, "--data", path, *args)

    outs = []
    for name in ("a", "b"):
        ok = cli("--steps", "8", "--prompt-steps", "4", "--mode", "sample", "--seed", "3", "--out",
                 str(tmp_path / f"{name}.png"))
        assert ok.returncode == 0, ok.stderr
        outs.append(json.loads((tmp_path / f"{name}.json").read_text()))
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert outs[0]["position_error_au"] == outs[1]["position_error_au"] and len(outs[0]["position_error_au"]) == 8
    gif = cli("--steps", "3", "--prompt-steps", "2", "--out", str(tmp_path / "c.gif"))
    assert gif.returncode == 0 and (tmp_path / "c.gif").read_bytes()[:3] == b"GIF"

    for args, message in ((("--steps", "40", "--prompt-steps", "4"), "the model reads at most 64 tokens"),
                          (("--steps", "900"), "but the sequence holds"),
                          (("--steps", "2", "--index", "7"), "--index 7 is out of range"),
                          (("--steps", "2", "--mode", "sample", "--temperature", "0"), "--temperature must be > 0")):
        bad = cli(*args, "--out", str(tmp_path / "bad.png"))
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert cli("--steps", "2", "--out", str(tmp_path / "x.jpg")).returncode == 2
    assert not list(tmp_path.glob("bad.*")) and not (tmp_path / "x.jpg").exists()
