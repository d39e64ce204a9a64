"""In-place view ops on a graph input (``t_``, ``unsqueeze_`` then ``squeeze_``) bump its version
counter in eager, so a tensor saved for the backward before them, in the same graph or before the
call, makes eager's backward raise "modified by an inplace operation". The compiled graph changes
the input's metadata only in its epilogue, keeping the counter (what the graph saves must stay
valid): ember's backward quietly computed a gradient where eager raises (fuzz seed 2100095), or
failed with a size mismatch. Now eager_backward_check also runs for such inputs (same graph: the
frame runs eagerly) and the runtime bumps their version before the graph runs (before the call).
Compared with eager: the backward's error or the gradient, and that the version moved.
"""
from __future__ import annotations

import pytest
import torch

import ember


def _saved_then_t(y):
    z = y.sin()
    y.t_()
    return z, y * 2


def _saved_then_restored(y):
    z = y.sin()
    y.unsqueeze_(0)
    y.squeeze_(0)
    return z


def _t_then_saved(y):
    y.t_()
    return y.sin()


def _saved_between(y):
    y.unsqueeze_(0)
    z = y.sin() + y.sum(0)
    y.squeeze_(0)
    return z


def _t_only(y):
    y.t_()
    return y.sum()


def _restored_only(y):
    y.unsqueeze_(0)
    y.squeeze_(0)
    return y * 2


CASES = [_saved_then_t, _saved_then_restored, _t_then_saved, _saved_between, _t_only, _restored_only]


def _run(fn, saved_before: bool):
    leaf = torch.arange(12.0, dtype=torch.float64).reshape(3, 4).requires_grad_()
    y = leaf * 1
    before = y._version
    pre = y.cos() if saved_before else None   # saves y for its backward
    out = fn(y)
    out = out if isinstance(out, tuple) else (out,)
    moved = y._version > before
    loss = sum(o.sum() for o in out) + (pre.sum() if saved_before else 0)
    try:
        loss.backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e), e
        return "raised", moved
    return leaf.grad, moved


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("saved_before", [False, True])
@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_inplace_view_ops_on_input_bump_its_version(fn, saved_before, backend):
    ref = _run(fn, saved_before)
    with ember.config.patch(strict=True):
        got = _run(ember.compile(fn, backend=backend), saved_before)
    assert got[1] == ref[1]
    if isinstance(ref[0], str):
        assert got[0] == ref[0]
    else:
        assert not isinstance(got[0], str), "ember's backward raised where eager's does not"
        torch.testing.assert_close(got[0], ref[0])
