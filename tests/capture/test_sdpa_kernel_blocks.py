"""``with torch.nn.attention.sdpa_kernel(backends):`` traced as graph nodes that set the backends
(capture/variables/sdpa_kernels.py), with graph breaks inside the block resumed: was a graph break
at the block (EB0025, everything from there on eager: 1 graph), now as torch.compile 2.13 (2 graphs
around a break inside; one graph and fullgraph=True without one)."""
import pytest
import torch
from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel

import ember
from ember_test_helpers import CompileCounter, assert_same

SEEN = []


@torch.compiler.disable
def _record():  # (a graph break that records the backends it runs under)
    SEEN.append(sorted(b.name for b in _cur_sdpa_kernel_backends()))


def _attn(x):
    return torch.nn.functional.scaled_dot_product_attention(x, x, x)


def no_break(x):
    with sdpa_kernel([SDPBackend.MATH]):
        y = _attn(x)
    return y + 1


def break_inside(x):
    y = x * 2
    with sdpa_kernel(SDPBackend.MATH):
        z = _attn(y)
        _record()  # (a graph break: runs inside the block)
        w = _attn(z)
    return w + x


def callee_breaks(x):
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        a = _attn(x)
        b = _inner(x)
        c = _attn(x) * 2
    return a + b + c


def _inner(x):
    _record()
    return _attn(x) - 1


@sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION])
def _decorated(x):  # (decorated outside: a fresh manager for each call, ContextDecorator)
    return _attn(x) * 3


@sdpa_kernel(backends=SDPBackend.MATH)
def _decorated_breaks(x):
    y = _attn(x)
    _record()
    return _attn(y)


def calls_decorated(x):
    return _decorated(x) + _decorated(x * 2)


def calls_decorated_that_breaks(x):
    return _decorated_breaks(x + 1) - 1


# (program, torch.compile's graph count)
CASES = [(no_break, 1), (break_inside, 2), (callee_breaks, 3), (calls_decorated, 1),
         (calls_decorated_that_breaks, 2)]  # (the last: torch.compile 2.13 makes 6)


@pytest.mark.parametrize("fn,graphs", CASES, ids=[c[0].__name__ for c in CASES])
def test_sdpa_kernel_block(fn, graphs):
    before = _cur_sdpa_kernel_backends()
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for _ in range(2):
        x = torch.randn(2, 2, 4, 8)
        SEEN.clear()
        expected = fn(x)
        seen_eager = list(SEEN)
        SEEN.clear()
        actual = compiled(x)
        assert_same(actual, expected, rtol=1e-5, atol=1e-5)
        assert SEEN == seen_eager
        assert _cur_sdpa_kernel_backends() == before
    assert cnt.frame_count == graphs
    assert ember.stats()["fallbacks"] == 0


@pytest.mark.parametrize("fn", [no_break, calls_decorated])
def test_fullgraph_without_break(fn):
    """(a function decorated with ``@sdpa_kernel(...)`` was a break: its manager, remade for each
    call, ran sdpa_kernel's generator, which sets torch's global state)"""
    compiled = ember.compile(fn, backend="eager", fullgraph=True)
    x = torch.randn(2, 2, 4, 8)
    assert_same(compiled(x), fn(x), rtol=1e-5, atol=1e-5)


def test_exception_inside_restores_the_backends():
    def fn(x):
        with sdpa_kernel(SDPBackend.MATH):
            y = _attn(x)
            torch._dynamo.graph_break()
            if y.shape[0] == 2:
                raise ValueError("boom")
        return y
    before = _cur_sdpa_kernel_backends()
    for f in (fn, ember.compile(fn, backend="eager")):
        with pytest.raises(ValueError, match="boom"):
            f(torch.randn(2, 2, 4, 8))
        assert _cur_sdpa_kernel_backends() == before
