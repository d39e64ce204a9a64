"""Compiled autograd over assorted autograd Node kinds (eager forward): activation checkpointing,
in-place ops on views (CopySlices), convolutions and batch norm (channels-last too), LSTMs,
bfloat16 parameters, embeddings; a sparse gradient runs eagerly with a warning."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import ember
from ember_test_helpers import REFERENCE

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's compiled autograd")

ca = ember.compiled_autograd


@pytest.fixture(autouse=True)
def _fresh():
    ca.reset()
    yield
    ca.disable()


def _dense(g):
    return g.to_dense() if g is not None and g.is_sparse else g


def run_both(build, step, steps=3, backend="aot_eager"):
    torch.manual_seed(0)
    ref = build()
    model = copy.deepcopy(ref)
    for _ in range(steps):
        ref.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        step(ref).backward()
        with ca.enable(backend):
            step(model).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None
            else:
                torch.testing.assert_close(_dense(p.grad), _dense(q.grad), atol=1e-5, rtol=1e-4)


def mlp():
    return nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))


X = torch.randn(4, 16)


def _inplace_views(m):
    h = m[0](X)
    h[:, :4].mul_(2)
    h = h.view(2, 32).t()
    h.tanh_()
    return h.sum()


CASES = {
    "checkpoint": (mlp, lambda m: checkpoint(m, X, use_reentrant=False).sum()),
    "inplace_views": (mlp, _inplace_views),
    "embedding": (lambda: nn.Embedding(10, 4), lambda m, i=torch.tensor([1, 2, 1]): m(i).pow(2).sum()),
    "conv_bn": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()),
                lambda m, i=torch.randn(2, 3, 8, 8): m(i).sum()),
    "channels_last": (lambda: nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last),
                      lambda m, i=torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last): m(i).pow(2).sum()),
    "lstm": (lambda: nn.LSTM(8, 8, batch_first=True), lambda m, i=torch.randn(2, 5, 8): m(i)[0].sum()),
    "bf16": (lambda: nn.Linear(8, 8).to(torch.bfloat16),
             lambda m, i=torch.randn(3, 8, dtype=torch.bfloat16): m(i).float().pow(2).sum()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_kinds(case):
    build, step = CASES[case]
    run_both(build, step)
    c = ca.counters
    assert c.fallbacks == 0 and c.traced == 1 and c.cache_hits == 2


def test_channels_last_grad_keeps_the_parameter_layout():
    build, step = CASES["channels_last"]
    m = build()
    with ca.enable("eager"):
        step(m).backward()
    assert m.weight.grad.stride() == m.weight.stride()


def test_sparse_gradient_runs_eagerly():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_both(lambda: nn.Embedding(10, 4, sparse=True), lambda m, i=torch.tensor([1, 2, 1]): m(i).sum())
    assert ca.counters.fallbacks == 3 and ca.counters.traced == 0
    assert sum("sparse" in str(w.message) for w in caught) == 1  # warned once
