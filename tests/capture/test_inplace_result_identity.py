"""The result of an in-place op (``w -= ...``, ``w.add_(...)``, ``out=``) is the argument itself: what
the program reads through it afterwards (``.grad``, leafness, its own attributes, identity) is the
argument's. A manual SGD step read ``w.grad`` as None after ``w -= lr * w.grad`` (wrong answer)."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def _w(n=3):
    w = torch.ones(n, requires_grad=True)
    w.grad = torch.arange(float(n)) + 1
    return w


def _run(fn, make, graphs=1):
    eager_in, comp_in = make(), make()
    expected = fn(*eager_in)
    cnt = CompileCounter()
    actual = compile(fn, backend=cnt)(*comp_in)
    assert_same(actual, expected)
    assert_same(list(comp_in), list(eager_in))
    assert cnt.frame_count == graphs
    return actual, comp_in


def test_grad_read_after_isub_is_the_inputs_grad():
    def step(w, lr):
        with torch.no_grad():
            w -= lr * w.grad
        g = w.grad
        return (g + 1) if g is not None else 0, w.grad is None

    _run(step, lambda: [_w(), 0.1])


def test_grad_read_through_the_result_of_an_inplace_method():
    def step(w):
        with torch.no_grad():
            v = w.mul_(2)
        return v.grad * 3, v.is_leaf, v.requires_grad, v.grad_fn is None

    _run(step, lambda: [_w()])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_inplace_result_is_the_input_object(backend):
    def f(x):
        y = x.add_(1)
        x += 1
        return y is x, x

    x = torch.ones(2)
    same, out = compile(f, backend=backend)(x)
    assert same is True and out is x
    assert_same(x, torch.full((2,), 3.0))


def test_own_attribute_through_inplace_and_out_results():
    def f(a, o):
        r = torch.mul(a, 2, out=o)
        return r is o, r.tag, a.mul_(3).tag

    def make():
        a, o = torch.ones(2), torch.empty(2)
        a.tag, o.tag = "a", 7
        return [a, o]

    _run(f, make)


def test_manual_sgd_momentum_over_calls():
    def step(ws, bufs, lr, mom):
        with torch.no_grad():
            for w, b in zip(ws, bufs):
                b.mul_(mom).add_(w.grad)
                w -= lr * b
                w.grad.zero_()
        return [w.grad for w in ws]

    def make():
        return [[_w(), _w(2)], [torch.zeros(3), torch.zeros(2)], 0.1, 0.9]

    eager_in, comp_in = make(), make()
    c = compile(step)
    for _ in range(3):
        assert_same(c(*comp_in), step(*eager_in))
    assert_same(comp_in, eager_in)
