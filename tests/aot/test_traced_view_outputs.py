"""Outputs fresh to the program that the traced forward makes as views.

``y = y + y; y.view(-1).sub_(1); return y``: functionalization regenerates ``y`` as a
view of the updated flat tensor, so the compiled forward returns a view of an
intermediate it does not return. autograd forbids mutating such an output of an
autograd.Function in place; eager allows it (``y`` is not a view there). Each case
mutates the outputs after the call (or after a graph break) and compares values,
gradients and errors with eager.
"""
from __future__ import annotations

import sys

import pytest
import torch

import ember


def _run(fn, backend, after):
    torch.manual_seed(0)
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.rand(12, dtype=torch.float64, requires_grad=True)
    if backend is not None:
        ember.reset()
        fn = ember.compile(fn, backend=backend)
    try:
        outs = fn(x, y)
        after(outs)
        sum(o.sum() for o in outs).backward()
    except RuntimeError as e:
        return ("raised", str(e).split(".")[0]), None
    return [o.detach().clone() for o in outs], (x.grad, y.grad)


def _check(fn, after, backend):
    ref_out, ref_grads = _run(fn, None, after)
    out, grads = _run(fn, backend, after)
    if ref_grads is None or grads is None:
        assert out == ref_out
        return
    for a, b in zip(out, ref_out):
        torch.testing.assert_close(a, b)
    for a, b in zip(grads, ref_grads):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)


def flat_sub(x, y):
    y = y * 2
    v = y.view(-1)
    v.sub_(2)
    return y, v


def reshape_mul(x, y):
    y = (y * 3).view(3, 4)
    y.view(-1)[2:].mul_(2)
    return (y, x * y)


def transpose_then_add(x, y):
    t = (x * 2).t()
    t.view(-1) if t.is_contiguous() else t.add_(1)
    return (t, t.sin())


def with_break(x, y):
    y = y + y
    v8 = y.view(-1)
    v8.sub_(2)
    print("break", file=sys.stderr)
    y.copy_(y - y.mean())
    return y, v8


def views_of_unreturned_base(x, y):
    # y is not returned; the two views are regenerated from it, which must be a base as in eager
    y = x * 2
    flat = y.view(-1)
    flat.mul_(2.0)
    return flat, y[1:]


def views_of_unreturned_base_break(x, y):
    t = x * 3
    t.view(-1).add_(1)
    tail = t[1:]
    head = t[:1]
    print("break", file=sys.stderr)
    return tail, head, t.sum()


MUTATIONS = {
    "none": lambda outs: None,
    "add_first": lambda outs: outs[0].add_(1),
    "mul_last": lambda outs: outs[-1].mul_(3),
}


@pytest.mark.parametrize("backend", ["aot_eager"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("fn", [flat_sub, reshape_mul, transpose_then_add, with_break, views_of_unreturned_base,
                                views_of_unreturned_base_break], ids=lambda f: f.__name__)
def test_traced_view_outputs_match_eager(fn, mutation, backend):
    _check(fn, MUTATIONS[mutation], backend)
