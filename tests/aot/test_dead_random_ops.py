"""A random op whose result the program never uses still draws its numbers in eager (a dead
dropout branch: CANINE's char-level output when only the pooled output is used). The training
partition keeps it in the forward, so every later random op draws what eager draws. Also: index
writes through a boolean mask whose backward needs the mask's data break the graph."""
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


# ---- writes through a boolean mask whose backward needs the mask's data ----

def _setitem(h, mask, v):
    new = torch.zeros_like(h)
    new[mask] = v * 2
    return new + 1


def _index_put_(h, mask, v):
    new = torch.zeros_like(h)
    new.index_put_((mask,), v * 2)
    return new + 1


def _index_put(h, mask, v):
    return torch.zeros_like(h).index_put((mask,), v * 2) + 1


@pytest.mark.parametrize("fn", [_setitem, _index_put_, _index_put])
def test_boolean_mask_write_with_grad_breaks_instead_of_failing(fn):
    h = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, False, True, True], [False, True, True, False]])
    v1 = torch.randn(5, 3, requires_grad=True)
    v2 = v1.detach().clone().requires_grad_()
    ref = fn(h, mask, v1)
    ref.sum().backward()
    ember.reset()
    out = ember.compile(fn, backend="aot_eager")(h, mask, v2)
    out.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(v2.grad, v1.grad)
    assert ember.stats()["fallbacks"] == 0 and ember.stats()["graph_breaks"] == 1
    with torch.no_grad():  # no autograd: in the graph
        ember.reset()
        torch.testing.assert_close(ember.compile(fn, backend="aot_eager")(h, mask, v2), fn(h, mask, v2))
        assert ember.stats()["graph_breaks"] == 0


def test_real_kernel_strides_differ_from_the_fake_ones():
    """Eval-mode CPU batch_norm on a transposed input returns a contiguous tensor while its fake
    twin keeps the input's layout: the graph's later ``view`` must not fail (PatchTST)."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(32).eval()
    lin = torch.nn.Linear(32, 32)

    def f(x):
        return lin(bn(x.transpose(1, 2)).transpose(1, 2))

    x = torch.randn(4, 4, 32)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            ember.reset()
            torch.testing.assert_close(ember.compile(f, backend="aot_eager")(x), f(x))
