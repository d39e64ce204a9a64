"""In-place view ops on a graph input that leave its metadata as it was (``y.unsqueeze_(0); ...;
y.squeeze_(0)``, ``t_()`` twice): nothing to apply to the input afterwards, but the joint trace
must still run the program on an alias of the primal (as for any metadata mutation), else the
in-place view ops rebase the primal's own history and every gradient through what was computed
in between is lost (fuzz seeds 2000057 and 10 more: a silently wrong gradient, 1 where eager
gives 11). Compared with eager: outputs, the input after the call, and the leaf's gradient,
in one graph and across a graph break, through ember.compile and through the AOT backend under
torch.compile.
"""
from __future__ import annotations

import pytest
import torch

import ember
from ember.backends.aot import aot_eager


def _unsqueeze_squeeze(y):
    y.unsqueeze_(0)
    t = y.sum(0) + 1
    y.squeeze_(0)
    return t, y


def _t_twice(y):
    y.t_()
    t = (y * 2).sin()
    y.t_()
    return t, y * 3


def _transpose_twice_then_mutate(y):
    y.transpose_(0, 1)
    t = y[0] * 2
    y.transpose_(0, 1)
    y.mul_(2)
    return t, y


def _restored_then_break(y):
    y.unsqueeze_(0)
    t = y.sum(0) + 1
    y.squeeze_(0)
    torch._dynamo.graph_break()
    y -= t * 0.5
    return t, y


def _restored_only(y):
    y.t_()
    y.t_()
    return y * 2


CASES = [_unsqueeze_squeeze, _t_twice, _transpose_twice_then_mutate, _restored_then_break, _restored_only]


def _run(fn, compiled):
    leaf = torch.arange(12.0, dtype=torch.float64).reshape(3, 4).requires_grad_()
    y = leaf * 1
    out = compiled(y)
    loss = sum((o * torch.arange(1, o.numel() + 1, dtype=o.dtype).view(o.shape)).sum() for o in out) \
        if isinstance(out, tuple) else out.sum() * 7
    (loss + (y * y).sum()).backward()
    outs = out if isinstance(out, tuple) else (out,)
    return [o.detach() for o in outs], y.detach(), y.stride(), leaf.grad


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("via", ["ember", "torch.compile"])
def test_metadata_restored_input_keeps_gradients(fn, via):
    if via == "ember":
        compiled = ember.compile(fn, backend="aot_eager")
    else:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=aot_eager)
    with ember.config.patch(strict=True):
        got = _run(fn, compiled)
    ref = _run(fn, fn)
    for a, b in zip(ref[0], got[0]):
        torch.testing.assert_close(b, a)
    torch.testing.assert_close(got[1], ref[1])
    assert got[2] == ref[2]
    torch.testing.assert_close(got[3], ref[3])
