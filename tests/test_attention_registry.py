"""The attention registry (orbitlaw.kernels.registry): every variant by name, its fast path against its PyTorch
reference, and the ablation variants against a row-by-row loop written from the formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from orbitlaw import models
from orbitlaw.cli import build_parser
from orbitlaw.kernels import lssar_reference, registry
from orbitlaw.kernels.weights import ADAPTIVE_P_KEYS, adaptive_power

SHAPE = (2, 3, 13, 8)


def qkv(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*SHAPE, generator=g, dtype=dtype) for _ in range(3)]


@pytest.mark.parametrize("name", registry.NAMES)
@pytest.mark.parametrize("window, chunk", [(None, None), (5, None), (None, 4), (4, 3)])
def test_every_attention_runs_as_its_reference_defines(name, window, chunk):
    q, k, v = qkv()
    out = registry.attention(name, q, k, v, p=3.0, window=window, chunk_size=chunk)
    ref = registry.reference(name, q, k, v, p=3.0, window=window, chunk_size=chunk)
    assert out.shape == q.shape and out.dtype == q.dtype
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
    # and the same as the unchunked, unwindowed weights say: W @ v (LASER: log(W exp(v - m)) + m)
    if window is None:
        w = registry.weights(name, q, k, p=3.0)
        m = v.amax(dim=-2, keepdim=True)
        full = torch.log(w @ torch.exp(v - m)) + m if registry.get(name).laser else w @ v
        torch.testing.assert_close(out, full, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_attention_trains_in_float32(name):
    q, k, v = (t.float().requires_grad_() for t in qkv(1))
    registry.attention(name, q, k, v, chunk_size=5).square().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def _row_weights(name: str, q, k, i: int, p: float) -> torch.Tensor:
    """Weights of query row i (0-based) over keys 0..i, straight from the formulas (docs/protocol.md, "Attentions", and
    the LSSAR write-up's ablations), one row at a time: (B, H, i + 1)."""
    n, d, T = i + 1, q.shape[-1], q.shape[-2]
    s = torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, :n]) / math.sqrt(d)
    cos = torch.einsum("bhd,bhjd->bhj", F.normalize(q[:, :, i], dim=-1), F.normalize(k[:, :, :n], dim=-1))
    S = math.log(d) * math.log(n) * cos
    phi = {"softmax-rw": torch.exp(s), "sigmoid-l1-rw": torch.sigmoid(s - math.log(T)), "relu-l1": torch.relu(S),
           "lssa-noscale": F.softplus(cos), "lssar-adaptive": F.softplus(S), "lssar": F.softplus(S)}[name]
    total = phi.sum(-1, keepdim=True)
    a = phi / torch.where(total > 0, total, torch.ones_like(total))
    if name in ("relu-l1", "lssa-noscale"):
        return a
    power = max(1.0, p * math.log(n) / math.log(ADAPTIVE_P_KEYS)) if name == "lssar-adaptive" else p
    r = torch.relu(n * a - (1.0 if n > 3 else 0.0)) ** power
    r_sum = r.sum(-1, keepdim=True)
    return torch.where(r_sum > 0, r / torch.where(r_sum > 0, r_sum, torch.ones_like(r_sum)), a)


@pytest.mark.parametrize("name", ["softmax-rw", "sigmoid-l1-rw", "relu-l1", "lssa-noscale", "lssar-adaptive", "lssar"])
def test_ablations_match_their_formulas_row_by_row(name):
    q, k, v = qkv(2)
    p = 15.0 if name == "lssar-adaptive" else 3.0
    out = registry.attention(name, q, k, v, p=p)
    for i in range(q.shape[-2]):
        torch.testing.assert_close(out[:, :, i], torch.einsum("bhj,bhjd->bhd", _row_weights(name, q, k, i, p),
                                                              v[:, :, :i + 1]), rtol=1e-9, atol=1e-9)


def test_the_registry_reference_of_lssar_is_the_kernels_reference():
    q, k, v = qkv(3)
    for window in (None, 6):
        torch.testing.assert_close(registry.reference("lssar", q, k, v, p=15.0, window=window),
                                   lssar_reference(q, k, v, p=15.0, window=window), rtol=1e-12, atol=1e-12)


def test_relu_as_phi_has_dead_rows_and_normalised_variants_sum_to_one():
    q, k, _ = qkv(4)
    w = registry.weights("relu-l1", q, k)
    assert torch.all(w[:, :, 0] == 0)  # log n_1 = 0: the first row's scores are all 0, relu kills them
    for name in registry.NAMES:
        if name in ("sigmoid", "relu", "relu-l1"):
            continue
        torch.testing.assert_close(registry.weights(name, q, k).sum(-1), torch.ones(SHAPE[:3], dtype=torch.float64))


def test_adaptive_power_is_p_at_1024_keys_and_grows_with_log_n():
    n = torch.tensor([1.0, 64.0, 1024.0, 16384.0], dtype=torch.float64)
    p = adaptive_power(n, 15.0).squeeze(1)
    assert p[0] == 1.0 and p[2] == pytest.approx(15.0) and p[3] == pytest.approx(15.0 * 14 / 10)
    assert p[1] == pytest.approx(15.0 * 6 / 10)


def test_one_entry_is_every_place_an_attention_is_chosen():
    names = set(registry.NAMES)
    assert set(models.ATTENTIONS) == names
    train = next(a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions
                 if a.dest == "attention")
    assert set(train.choices) == names
    for name in registry.NAMES:  # a GPT builds and runs with each
        model = models.build_model("tiny", attention=name, pos="rope", n_layer=1, n_embd=32, n_head=2, block_size=16)
        logits, _ = model(torch.randint(0, 100, (1, 9, 2)))
        assert torch.isfinite(logits).all()
    with pytest.raises(ValueError, match="unknown attention 'lssb'; choose one of softmax"):
        registry.attention("lssb", *qkv())
