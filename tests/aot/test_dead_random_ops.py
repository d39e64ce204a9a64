"""A random op whose result the program never uses still draws its numbers in eager (a dead
dropout branch: CANINE's char-level output when only the pooled output is used). The training
partition keeps it in the forward, so every later random op draws what eager draws."""
import pytest
import torch
import torch.nn.functional as F

import ember


def dead_then_live(x, w):
    h = x @ w
    F.dropout(h, p=0.5, training=True)  # dead, but consumes random numbers in eager
    torch.rand(3)  # dead too
    return F.dropout(h, p=0.5, training=True).sum(0)


def _run(fn, grad):
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    w = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)).requires_grad_(grad)
    torch.manual_seed(123)
    out = fn(x, w)
    after = torch.rand(2)
    grads = None
    if grad:
        out.sum().backward()
        grads = w.grad
    return out, after, grads


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("grad", [False, True])
def test_dead_random_ops_draw_as_in_eager(backend, grad):
    ref = _run(dead_then_live, grad)
    ember.reset()
    got = _run(ember.compile(dead_then_live, backend=backend), grad)
    for a, b in zip(got, ref):
        if a is not None:
            torch.testing.assert_close(a, b)
    assert ember.stats()["graphs"] == 1
