"""The GPT and its attentions: interface, parameter count, causality, finiteness, independent references."""

import math

import pytest
import torch

from orbitlaw import models
from orbitlaw.kernels import registry

SMALL = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 48}


def test_reference_model_has_108_53m_parameters():
    model = models.build_model("gpt-109m")
    assert round(model.num_parameters() / 1e6, 2) == 108.53
    c = model.config
    assert (c.n_layer, c.n_head, c.n_embd, c.block_size, c.pos) == (12, 12, 768, 999, "learned")


def test_build_model_interface_shapes():
    model = models.build_model("tiny", attention="lssar", embed_init="normal", **SMALL)
    tokens = torch.randint(0, 7000, (3, 20, 2))
    logits, loss = model(tokens, tokens)
    assert logits.shape == (3, 20, 2, 7003)
    assert loss.ndim == 0 and math.isfinite(loss.item())
    assert abs(loss.item() - math.log(7003)) < 0.5  # near-uniform at initialisation
    # tiny's own Fourier init reads each token back out: far below uniform on targets = inputs
    assert models.build_model("tiny", attention="lssar", **SMALL)(tokens, tokens)[1].item() < math.log(7003) - 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"preset": "huge"}, "unknown model preset"),
        ({"attention": "linear"}, "unknown attention"),
        ({"attention": "lssar", "p": 0.0}, "p must be > 0"),
        ({"attention": "lssar", "p": -3.0}, "p must be > 0"),
        ({"pos": "alibi"}, "unknown position encoding"),
        ({"bogus": 1}, "unknown model setting"),
        ({"embed_init": "xavier"}, "unknown embedding init"),
        ({"num_bins": 8000}, "num_bins must be in"),
    ],
)
def test_bad_model_settings(kwargs, message):
    preset = kwargs.pop("preset", "tiny")
    with pytest.raises(ValueError, match=message):
        models.build_model(preset, **kwargs)


def test_context_longer_than_learned_block_is_refused():
    model = models.build_model("tiny", **SMALL)
    with pytest.raises(ValueError, match="longer than the learned-position block"):
        model(torch.zeros(1, 49, 2, dtype=torch.long))


VARIANTS = [(a, None) for a in models.ATTENTIONS] + [("softmax", 5), ("lssar", 5), ("relu", 4)]


@pytest.mark.parametrize("attention, window", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_variant_is_causal_with_finite_gradients(attention, window, dtype):
    torch.manual_seed(0)
    model = models.build_model("tiny", attention=attention, window=window, **SMALL).to(dtype)
    tokens = torch.randint(0, 7000, (2, 40, 2))
    changed = tokens.clone()
    changed[:, 25:] = torch.randint(0, 7000, (2, 15, 2))
    a, loss = model(tokens, tokens)
    b, _ = model(changed, changed)
    if attention == "laser":
        # LASER's shift m (the max of V over the sequence) cancels exactly in real arithmetic; later
        # tokens move earlier outputs only by rounding (relative to the logits' scale).
        scale = a[:, :25].abs().max().item()
        torch.testing.assert_close(a[:, :25], b[:, :25], rtol=2e-2 if dtype == torch.bfloat16 else 1e-5,
                                   atol=(1e-2 if dtype == torch.bfloat16 else 1e-5) * max(scale, 1.0))
    else:
        assert torch.equal(a[:, :25], b[:, :25]), "outputs before t=25 depend on later tokens"
    assert not torch.equal(a[:, 25:], b[:, 25:])
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lssar_p15_rope_at_16x_training_length_is_finite(dtype):
    torch.manual_seed(0)
    model = models.build_model("tiny", attention="lssar", p=15.0, pos="rope", chunk_size=64,
                               **{**SMALL, "block_size": 16}).to(dtype)
    tokens = torch.randint(0, 7000, (1, 16 * 16, 2))
    logits, loss = model(tokens, tokens)
    assert torch.isfinite(logits.float()).all()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_chunked_evaluation_equals_full():
    torch.manual_seed(1)
    for attention in models.ATTENTIONS:
        model = models.build_model("tiny", attention=attention, pos="rope", **SMALL).double()
        tokens = torch.randint(0, 7000, (2, 37, 2))
        full, _ = model(tokens)
        model.config.chunk_size = 8
        chunked, _ = model(tokens)
        torch.testing.assert_close(chunked, full, rtol=1e-10, atol=1e-10, msg=attention)


def _naive(q, k, v, weight):
    B, H, T, D = q.shape
    out = torch.zeros_like(v)
    for i in range(T):
        for j in range(i + 1):
            s = (q[:, :, i] * k[:, :, j]).sum(-1) / math.sqrt(D)
            out[:, :, i] += weight(s, i + 1, T)[..., None] * v[:, :, j]
    return out


def test_sigmoid_and_relu_attention_match_their_formulas():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 3, 11, 8, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(registry.attention("sigmoid", q, k, v),
                               _naive(q, k, v, lambda s, n, T: torch.sigmoid(s - math.log(T))))
    torch.testing.assert_close(registry.attention("relu", q, k, v), _naive(q, k, v, lambda s, n, T: torch.relu(s) / n))
    torch.testing.assert_close(registry.attention("relu", q, k, v, chunk_size=3), registry.attention("relu", q, k, v))


def test_regression_variant():
    model = models.build_model("tiny", regression=True, **SMALL)
    xy = torch.randn(2, 10, 2)
    out, loss = model(xy, xy)
    assert out.shape == (2, 10, 2) and loss.ndim == 0
    loss.backward()


def test_fourier_init_lays_out_x_and_y_and_reads_them_back():
    from orbitlaw.models.gpt import FOURIER_HEAD_RMS

    torch.manual_seed(0)
    model = models.build_model("tiny", embed_init="fourier")
    c = model.config
    bins, half, V = c.position_bins, c.n_embd // 2, c.vocab_size
    assert bins == 7000
    w = model.head.weight.detach()
    for coord, (table, head_rows) in enumerate(((model.wte_x.weight, w[:bins]), (model.wte_y.weight, w[V:V + bins]))):
        own, other = slice(coord * half, (coord + 1) * half), slice((1 - coord) * half, (2 - coord) * half)
        rows = table[:bins].detach()
        assert torch.all(rows[:, other] == 0) and torch.all(head_rows[:, other] == 0)
        assert abs(rows[:, own].pow(2).mean().sqrt().item() - 0.02) < 1e-3  # the normal init's RMS
        assert abs(head_rows[:, own].pow(2).mean().sqrt().item() - FOURIER_HEAD_RMS) < 1e-2
        sim = torch.nn.functional.cosine_similarity(rows[3000:3001], rows[[3001, 3010, 3100, 6000]])
        assert sim[0] > 0.9 and sim[0] > sim[1] > sim[2] > abs(sim[3])  # nearby bins, nearby vectors
    # time-step and pad rows keep the normal init
    assert abs(model.wte_x.weight[bins:].std().item() - 0.02) < 0.01
    # at initialisation the model already reads a token's own position back out (normal init: ~2300 bins off)
    tokens = torch.randint(0, bins, (1, 64, 2))
    for init, bound in (("fourier", 100), ("normal", None)):
        torch.manual_seed(0)
        logits, _ = models.build_model("tiny", embed_init=init)(tokens)
        median = (logits.argmax(-1) - tokens).abs().float().median().item()
        assert median < 100 if bound else median > 1000, (init, median)


def test_the_model_reads_its_vocabulary_from_the_tokeniser():
    from orbitlaw.models.gpt import GPTConfig, vocabulary
    from orbitlaw.orbits.tokenizer import TokenizerSpec

    default = GPTConfig()
    assert {k: getattr(default, k) for k in vocabulary(TokenizerSpec())} == vocabulary(TokenizerSpec())
    assert default.position_bins == TokenizerSpec().num_bins  # one place for the bins: the tokeniser's
    spec = TokenizerSpec(num_bins=100, lo=-5.0, hi=5.0, time_steps=(0.1, 0.2, 0.5))  # three time steps
    config = GPTConfig(**vocabulary(spec), n_layer=1, n_head=1, n_embd=8)
    config.validate()
    assert (config.vocab_size, config.pad_id, config.position_bins) == (104, 103, 100)
    xy = torch.tensor([[-4.99, 0.0, 4.99]], dtype=torch.float64)
    assert config.bin_ids(xy).tolist() == [[int(i) for i in spec.encode(xy.numpy())[0][0]]]
