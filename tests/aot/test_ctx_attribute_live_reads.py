"""A tensor argument a custom ``autograd.Function`` keeps as a ctx attribute (``ctx.w = w``).

Eager's backward reads such a tensor when it runs, with no version check: changed in place
between forward and backward, the backward sees the new value. An AOT backend traces the
user's backward into the backward graph; the input must reach it live and unversioned, not
through ``save_for_backward`` (whose version check would raise "modified by an inplace
operation"). Where eager *does* check (the same tensor saved by another op of the frame), the
error stays. Each case compares values, gradients and errors with eager.
"""
from __future__ import annotations

import pytest
import torch

import ember


class Stash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        ctx.y = x * 1  # an intermediate kept as an attribute: no one can change it
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w + ctx.y, None


class StashAndSave(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, s):
        ctx.w = w
        ctx.save_for_backward(s)
        return x * w * s

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * ctx.w * s, None, None


def stash(x, w, s):
    return Stash.apply(x, w).sum()


def stash_twice(x, w, s):
    return (Stash.apply(x, w) * Stash.apply(x * 2, w)).sum()


def stash_and_save(x, w, s):
    return StashAndSave.apply(x, w, s).sum()


def stash_and_graph_saves(x, w, s):
    # w is also saved by the frame's own mul: eager's backward checks its version there
    return (Stash.apply(x, w) + x * w).sum()


CASES = [stash, stash_twice, stash_and_save, stash_and_graph_saves]
CHANGES = {
    "none": lambda w, s: None,
    "w_add_": lambda w, s: w.add_(10),
    "s_mul_": lambda w, s: s.mul_(3),
}


def _run(fn, change):
    x = torch.linspace(0.5, 2.0, 3, requires_grad=True)
    w = torch.full((3,), 2.0)
    s = torch.tensor([1.0, 2.0, 3.0])
    try:
        out = fn(x, w, s)
        change(w, s)
        out.backward()
    except RuntimeError as e:
        return ("raised", "modified by an inplace operation" in str(e))
    return out.detach(), x.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_ctx_attribute_read_live_as_eager(fn, change, backend):
    if backend == "inductor" and change != "w_add_":
        pytest.skip("inductor: the case that reads the changed tensor is enough (compile time)")
    expected = _run(fn, CHANGES[change])
    ember.reset()
    got = _run(ember.compile(fn, backend=backend), CHANGES[change])
    if isinstance(expected[0], str):
        assert got == expected
    else:
        assert not isinstance(got[0], str), got
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)


def test_ctx_attribute_read_after_second_change_with_retain_graph():
    def run(fn):
        x = torch.ones(3, requires_grad=True)
        w = torch.full((3,), 2.0)
        out = fn(x, w, None)
        w.add_(1)
        out.backward(retain_graph=True)
        first = x.grad.clone()
        w.mul_(5)
        out.backward()
        return first, x.grad

    expected = run(stash)
    ember.reset()
    got = run(ember.compile(stash, backend="aot_eager"))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
