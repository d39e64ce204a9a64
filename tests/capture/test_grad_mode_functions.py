"""Grad mode set by function calls rather than ``with`` (test_ctx_manager.py): a user context manager
whose ``__enter__``/``__exit__`` call ``torch._C._set_grad_enabled``, a ``contextmanager`` doing the
same, a bare ``torch._C._set_grad_enabled(False)`` left on at return, ``torch.no_grad(fn)`` without
the call; and a redundant ``no_grad()`` under no_grad adds no node to the graph."""
import contextlib

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, check_same, compile

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own graphs")


class _SetGrad:
    def __init__(self, mode):
        self.prev = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prev)


@contextlib.contextmanager
def _set_grad(mode):
    prev = torch.is_grad_enabled()
    try:
        yield torch._C._set_grad_enabled(mode)
    finally:
        torch._C._set_grad_enabled(prev)


def user_grad_contexts(x):
    with _SetGrad(False):
        y = x * 2
    with _set_grad(False):
        z = x * 3
    return y, z, x * 4, y.requires_grad, z.requires_grad


def wrapped_without_call(x):
    def inner(v):
        return v.sin()
    f = torch.no_grad(inner)
    return f(x), torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [user_grad_contexts, wrapped_without_call])
def test_grad_mode_by_function_calls(fn):
    check_same(fn, torch.randn(3, requires_grad=True))
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [user_grad_contexts, wrapped_without_call])
def test_grad_mode_by_function_calls_aot(fn):
    x = torch.randn(3, requires_grad=True)
    expected = fn(x)
    got = compile(fn, backend="aot_eager", fullgraph=True)(x)
    for g, e in zip(got, expected):
        if isinstance(e, torch.Tensor):
            assert g.requires_grad == e.requires_grad
            torch.testing.assert_close(g, e)
        else:
            assert g == e
    assert torch.is_grad_enabled()


def leaves_grad_off(x):
    torch._C._set_grad_enabled(False)
    return x * 2


def test_grad_mode_left_off_at_return():
    x = torch.randn(3, requires_grad=True)
    try:
        expected = leaves_grad_off(x)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        got = compile(leaves_grad_off, fullgraph=True)(x)
        assert not torch.is_grad_enabled()
        assert got.requires_grad == expected.requires_grad
        torch.testing.assert_close(got, expected)
    finally:
        torch.set_grad_enabled(True)


def redundant_no_grad(a, b):
    x = a + 1
    with torch.no_grad():
        x = x + b
    return x + 2


def test_redundant_grad_mode_adds_no_node():
    counter = CompileCounter()
    with torch.no_grad():
        check_same(redundant_no_grad, torch.randn(2), torch.randn(2), counter=counter)
    assert counter.op_count == 3


# ---- a grad-mode object held across a graph break (made before it, entered after it) ----

def _made_then_entered(x):
    x = x + 1
    ctx = torch.set_grad_enabled(True)
    torch._dynamo.graph_break()
    with ctx:
        y = x * 2
    return y, y.requires_grad, torch.is_grad_enabled(), type(ctx).__name__, ctx.prev


def _set_then_break(x):
    ctx = torch.set_grad_enabled(False)
    print("", end="")
    y = x * 2
    return y.requires_grad, type(ctx).__name__, ctx.prev


def _no_grad_object_across_break(x):
    c = torch.no_grad()
    print("", end="")
    with c:
        y = x * 2
    return y.requires_grad, type(c).__name__


@pytest.mark.parametrize("fn", [_made_then_entered, _set_then_break, _no_grad_object_across_break])
@pytest.mark.parametrize("outer", [False, True])
def test_grad_mode_object_live_across_a_break(fn, outer):
    import ember
    results = []
    for f in (fn, ember.compile(fn)):
        x = torch.ones(2, requires_grad=True)
        try:
            with torch.set_grad_enabled(outer):
                r = f(x)
                results.append((r[1:] if fn is _made_then_entered else r, torch.is_grad_enabled()))
        finally:
            torch.set_grad_enabled(True)
    assert results[0] == results[1]
    assert ember.stats()["fallbacks"] == 0
