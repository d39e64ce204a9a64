"""Checkpoint/rollback of speculated regions (ember/capture/speculation.py): fake tensors changed in
place inside a region that is undone (an autograd.Function's backward traced for its guards, a
forward or cond branch that turns out unsupported) are put back exactly; guards come from each
input's metadata at entry. Compared with eager: results, later shapes/strides, graph counts."""
from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings, strategies as st

import ember
import ember.capture.speculation as speculation
from ember.fake.snapshot import FakeMeta
from ember_test_helpers import CompileCounter, assert_same, check_same, clone_inputs, reset, stats


def _meta(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.requires_grad, t.is_leaf)


@pytest.fixture
def restores(monkeypatch):
    """Every Checkpoint.restore that reports success must leave each recorded fake tensor exactly as
    it was; records how many restores had something to put back."""
    seen = {"restores": 0, "undid": 0}
    original = speculation.Checkpoint.restore

    def checked(self):
        changed = self.fakes is not None and bool(self.fakes.changed())
        ok = original(self)
        seen["restores"] += 1
        seen["undid"] += changed
        if ok:
            for t, m in (self.fakes.entries if self.fakes is not None else []):
                assert FakeMeta.of(t).same(m), (FakeMeta.of(t), m)
        return ok
    monkeypatch.setattr(speculation.Checkpoint, "restore", checked)
    return seen


class SavesAndTransposesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        x.t_()  # only at backward time in eager: the trace of it at apply must not leak
        return g * 2


def test_backward_traced_at_apply_leaves_saved_input_as_it_was(restores):
    def f(x):
        y = SavesAndTransposesInBackward.apply(x)
        return y, x.shape, x.stride(), x.is_contiguous(), x.t().contiguous() + y
    x = torch.arange(9.).reshape(3, 3).requires_grad_()
    reset()
    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter)
    for _ in range(2):
        expected = f(x.detach().clone().requires_grad_())
        actual = compiled(x.detach().clone().requires_grad_())
        assert_same(actual, expected)
        assert actual[2] == (3, 1)  # (was (1, 3): the backward's t_ traced at apply leaked)
    assert counter.frame_count == 1 and stats()["graph_breaks"] == 0 and stats()["recompiles"] == 0
    assert restores["undid"] >= 1


class TransposesThenBreaks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.t_()
        x.unsqueeze_(0)
        torch._dynamo.graph_break()  # unsupported in the traced forward: the apply is rolled back
        return x.sum(0) * 2

    @staticmethod
    def backward(ctx, g):
        return g


def test_forward_with_inplace_metadata_then_unsupported_rolls_back(restores):
    def f(x, y):
        a = x + 1
        out = TransposesThenBreaks.apply(a)
        return out, a.shape, a.stride(), x.shape, x.stride(), y.t().shape, (y * 2).stride()
    reset()
    counter = check_same(f, torch.randn(3, 4), torch.randn(2, 5), graphs=None, fullgraph=False)
    assert stats()["graph_breaks"] >= 1 and stats()["recompiles"] == 0
    assert restores["undid"] >= 1
    assert counter.frame_count >= 1


def test_cond_branch_with_inplace_metadata_op_then_unsupported(restores):
    def tb(a):
        a.t_()          # eager's torch.cond refuses a branch that mutates an operand
        return a.sum(0)

    def fb(a):
        return a.sum(1)

    def f(x, p):
        z = x * 2
        r = torch.cond(p, tb, fb, (z,))
        return r, z.shape, z.stride()
    reset()
    x = torch.randn(3, 3)
    with pytest.raises(Exception) as eager:
        f(x.clone(), torch.tensor(True))
    with pytest.raises(Exception) as compiled:
        ember.compile(f, backend="eager")(x.clone(), torch.tensor(True))
    assert type(compiled.value) is type(eager.value)
    assert restores["restores"] >= 1


def test_cond_branches_start_from_the_same_tensors(restores):
    def tb(a):
        b = a.clone()
        b.t_()          # a branch-local tensor: allowed; the other branch must not see anything changed
        return b.sum(0)

    def fb(a):
        return a.sum(1) + a.stride(0)

    def f(x):
        return torch.cond(x.sum() > 0, tb, fb, (x,)), x.stride()
    reset()
    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter)
    for sign in (1, -1):
        x = torch.randn(3, 3).abs() * sign
        assert_same(compiled(x.clone()), f(x.clone()))
    assert counter.frame_count == 1 and stats()["graph_breaks"] == 0


@pytest.mark.parametrize("dynamic", [None, True])
def test_guards_use_entry_metadata_after_t_(dynamic):
    def f(x):
        x.t_()
        return x.sum(0) * x.stride(0), x.shape
    reset()
    counter = check_same(f, torch.randn(3, 4), graphs=1, dynamic=dynamic)
    assert stats()["recompiles"] == 0
    if dynamic:
        reset()
        counter = CompileCounter()
        compiled = ember.compile(f, backend=counter, dynamic=True)
        for shape in ((3, 4), (5, 6), (7, 2)):
            x = torch.randn(*shape)
            assert_same(compiled(x.clone()), f(x.clone()))
        assert counter.frame_count == 1 and stats()["recompiles"] == 0
    # inputs the guards must tell apart: a transposed input (other strides), a size-1 dimension
    compiled = ember.compile(f, backend=counter, dynamic=dynamic)
    for x in (torch.randn(6, 5).t(), torch.randn(1, 5), torch.randn(3, 4)):
        assert_same(compiled(x.clone() if x.is_contiguous() else x.t().clone().t()),
                    f(x.clone() if x.is_contiguous() else x.t().clone().t()))


def test_guards_use_entry_metadata_after_squeeze_and_unsqueeze():
    def f(x, y):
        x.squeeze_(1)
        y.unsqueeze_(0)
        return x * 2, y + 1, x.stride(), y.stride()
    reset()
    check_same(f, torch.randn(3, 1, 4), torch.randn(4), graphs=1)
    assert stats()["recompiles"] == 0


# ---- property: random in-place metadata ops in a region that is always rolled back ---------------

OPS = ["t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "as_strided_", "mul_", "detach_",
       "requires_grad_", "set_"]


def _apply(kind, a, b, k):
    d = max(a.dim(), 1)
    if kind == "t_":
        a.t_() if a.dim() <= 2 else a.transpose_(0, 1)
    elif kind == "transpose_":
        a.transpose_(k % d, (k + 1) % d)
    elif kind == "squeeze_":
        a.squeeze_(k % d)
    elif kind == "unsqueeze_":
        a.unsqueeze_(k % (a.dim() + 1))
    elif kind == "resize_":
        a.resize_(2, 3)
    elif kind == "as_strided_":
        a.as_strided_((2, 2), (1, 2), k % 3)
    elif kind == "mul_":
        a.mul_(2)
    elif kind == "detach_":
        a.detach_()
    elif kind == "requires_grad_":
        a.requires_grad_(bool(k % 2))
    elif kind == "set_":
        a.set_(b)


def _program(ops):
    """A Function whose backward (traced at apply, then dropped) runs ``ops`` on its saved tensors;
    the frame then reads every tensor's metadata and computes with them."""
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            y = x * w
            ctx.save_for_backward(x, w, y)
            return y

        @staticmethod
        def backward(ctx, g):
            saved = list(ctx.saved_tensors)
            for kind, i, j, k in ops:
                _apply(kind, saved[i % 3], saved[j % 3], k)
            return g, g

    def f(x, w, z):
        y = Fn.apply(x, w)
        v = z[1:]
        return (y + 1, [_meta(t) for t in (x, w, y, z, v)], (x * 2).stride(), (z.t() + 1).shape)
    return f


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2), st.integers(0, 2), st.integers(0, 5)),
                min_size=1, max_size=6))
def test_property_backward_region_rollback_restores_every_fake(ops):
    restores = {"n": 0}
    original = speculation.Checkpoint.restore

    def checked(self):
        ok = original(self)
        restores["n"] += 1
        if ok:
            for t, m in (self.fakes.entries if self.fakes is not None else []):
                assert FakeMeta.of(t).same(m), (ops, FakeMeta.of(t), m)
        return ok
    speculation.Checkpoint.restore = checked
    try:
        reset()
        f = _program(ops)
        x, w, z = torch.randn(2, 2), torch.randn(2, 2, requires_grad=True), torch.randn(3, 2)
        compiled = ember.compile(f, backend="eager")
        for _ in range(2):  # the second call: the same graph, guards from entry metadata
            args = (x.clone(), w.detach().clone().requires_grad_(), z.clone())
            assert_same(compiled(*clone_inputs(args)), f(*clone_inputs(args)))
        assert stats()["recompiles"] == 0
        assert restores["n"] >= 1
    finally:
        speculation.Checkpoint.restore = original


def test_property_seeded_forward_failure_rollback():
    """Random in-place metadata ops in a Function's forward on a tensor computed in the frame, then
    an unsupported call: the apply is rolled back (and runs eagerly); the frame's results and the
    metadata it reads equal eager."""
    rng = random.Random(1234)
    for _ in range(12):
        ops = [(rng.choice(["t_", "transpose_", "squeeze_", "unsqueeze_", "mul_"]), 0, 0, rng.randint(0, 5))
               for _ in range(rng.randint(1, 4))]

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                for kind, i, j, k in ops:
                    _apply(kind, a, a, k)
                torch._dynamo.graph_break()
                return a * 3

            @staticmethod
            def backward(ctx, g):
                return g

        def f(x):
            a = x + 1
            out = Fn.apply(a)
            return out, _meta(a), _meta(x), (a * 2).shape
        reset()
        x = torch.randn(2, 3, 1)
        compiled = ember.compile(f, backend="eager")
        for _ in range(2):
            assert_same(compiled(x.clone()), f(x.clone()))
        assert stats()["recompiles"] == 0
