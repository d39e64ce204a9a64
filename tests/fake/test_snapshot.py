"""FakeSnapshot: random in-place metadata ops on fake tensors, then restore, leave every tensor
exactly as before (size, stride, storage offset, storage, requires_grad, is_leaf, version)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

from ember.fake.snapshot import FakeMeta, FakeSnapshot


def _tensors(mode):
    x = mode.from_tensor(torch.randn(3, 4))                      # leaf, no grad
    w = mode.from_tensor(torch.randn(3, 4, requires_grad=True))  # leaf that requires grad
    z = mode.from_tensor(torch.randn(2, 1, 3))                   # leaf with a size-1 dim
    with mode:
        y = w * 2                                                # non-leaf
        v = x[1:]                                                # view of a leaf
        yv = y[0]                                                # view of a non-leaf
        u = (w + 1).detach()                                     # leaf made by detach
    return [x, w, z, y, v, yv, u]


def _meta(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage()._cdata,
            t.requires_grad, t.is_leaf, t.grad_fn is None, t._version)


def _op(draw_kind, a, b, k, mode):
    """One in-place metadata (or autograd-state) op of kind ``draw_kind`` on ``a``; ``b`` the other
    tensor some ops take; ``k`` a small number picking dims/shapes."""
    d = max(a.dim(), 1)
    if draw_kind == "t_":
        a.t_() if a.dim() <= 2 else a.transpose_(0, 1)
    elif draw_kind == "transpose_":
        a.transpose_(k % d, (k + 1) % d)
    elif draw_kind == "squeeze_":
        a.squeeze_() if k % 2 else a.squeeze_(k % d)
    elif draw_kind == "unsqueeze_":
        a.unsqueeze_(k % (a.dim() + 1))
    elif draw_kind == "resize_":
        a.resize_([(2, 6), (12,), (4, 4), (1, 2, 3)][k % 4])
    elif draw_kind == "as_strided_":
        a.as_strided_((2, 2), (1, 2), k % 3)
    elif draw_kind == "set_":
        a.set_(b)
    elif draw_kind == "set_storage":
        a.set_(b.untyped_storage(), k % 2, (2,), (1,))
    elif draw_kind == "detach_":
        a.detach_()
    elif draw_kind == "requires_grad_":
        a.requires_grad_(bool(k % 2))
    elif draw_kind == "add_grad":   # a leaf without grad gains a grad_fn
        with torch.enable_grad():
            a.add_(torch.zeros((), requires_grad=True))
    elif draw_kind == "mul_":
        a.mul_(2)


KINDS = ["t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "as_strided_", "set_", "set_storage",
         "detach_", "requires_grad_", "add_grad", "mul_"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 6), st.integers(0, 6), st.integers(0, 7)),
                min_size=1, max_size=8))
def test_random_inplace_metadata_ops_are_undone(ops):
    mode = FakeTensorMode()
    ts = _tensors(mode)
    before = [_meta(t) for t in ts]
    snap = FakeSnapshot.take(ts)
    with mode:
        for kind, i, j, k in ops:
            try:
                _op(kind, ts[i], ts[j], k, mode)
            except (RuntimeError, AssertionError, IndexError):
                pass  # what eager refuses (a leaf that requires grad changed in place, a bad shape)
    ok = snap.restore()
    if ok:
        assert [_meta(t) for t in ts] == before, ops
    else:
        # only a view whose autograd history changed cannot be put back; restore says so
        assert any(t._base is not None for t in snap.changed()), ops


def test_restore_of_a_transposed_leaf_and_a_leaf_given_history():
    mode = FakeTensorMode()
    x, w, z, y, v, yv, u = _tensors(mode)
    before = [_meta(t) for t in (x, w, y, u)]
    snap = FakeSnapshot.take([x, w, y, u])
    with mode:
        x.t_()
        u.add_(w)           # u gains a grad_fn
        y.detach_()         # y loses its grad_fn
        y.unsqueeze_(0)
    assert not u.is_leaf and y.is_leaf and x.shape == (4, 3)
    assert snap.restore()
    assert [_meta(t) for t in (x, w, y, u)] == before
    assert u.is_leaf and not u.requires_grad and y.grad_fn is not None


def test_restore_reports_a_view_it_cannot_put_back():
    mode = FakeTensorMode()
    x, w, z, y, v, yv, u = _tensors(mode)
    snap = FakeSnapshot.take([x, v])
    with mode, torch.enable_grad():
        v.mul_(w[1:])       # the view (and its base) gain autograd history
    assert not snap.restore()


def test_unchanged_is_cheap_and_true():
    mode = FakeTensorMode()
    ts = _tensors(mode)
    snap = FakeSnapshot.take(ts + ts)
    assert len(snap.entries) == len(ts)
    assert snap.changed() == [] and snap.restore()
    assert all(FakeMeta.of(t).same(m) for t, m in snap.entries)
