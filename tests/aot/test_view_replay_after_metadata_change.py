"""Outputs that are views of a tensor whose metadata the program changed afterwards (``v = y[:, 1:];
y.t_()``): the epilogue regenerates such a view from its base by replaying the view chain, which
is only right while the base keeps the layout the view was taken from. On a square ``y`` the
replay on the transposed base has the right shape and the wrong elements (a wrong answer before
the replay's strides and offset were checked against the graph's own view). Compared with eager:
values, strides, the input, gradients; static and symbolic sizes. With grad, a write through such
a view (``v = y[:, :2]; y.t_(); v.mul_(3)``) runs eagerly at a graph break: functionalization
replays it onto the new layout and its backward is wrong (torch.compile's too)."""
from __future__ import annotations

import warnings

import pytest
import torch

import ember


def _clone_then_t(x):
    y = x.clone()
    v = y[:, 1:]
    y.t_()
    return y, v


def _input_view_then_t(x):
    v = x[:, 1:]
    x.t_()
    return v


def _view_then_unsqueeze(x):
    y = x * 2
    v = y[1:]
    y.unsqueeze_(0)
    return v, y


def _diagonal_then_transpose(x):
    y = x.clone()
    v = y.diagonal()
    y.transpose_(0, 1)
    return v, y[0]


def _view_mutated_after_t(x):
    y = x.clone()
    v = y[:, :2]
    y.t_()
    v.mul_(3)
    return y, v


def _select_after_t(x):
    y = x * 1
    a = y.view(-1)
    y.t_()
    return a, y[0]


@pytest.mark.parametrize("fn", [_clone_then_t, _input_view_then_t, _view_then_unsqueeze, _diagonal_then_transpose,
                                _view_mutated_after_t, _select_after_t], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_views_of_a_base_whose_metadata_changed(fn, dynamic, grad):
    if grad and fn is _input_view_then_t:
        pytest.skip("t_() of a leaf that requires grad is an error in eager too")
    compiled = ember.compile(fn, backend="aot_eager", dynamic=dynamic)
    # (with grad, _select_after_t's view of the transposed base is refused by the AOT layer:
    # an internal error, so outside strict mode the frame runs eagerly, with a warning)
    refused = grad and fn is _select_after_t
    with ember.config.patch(strict=not refused), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare(fn, compiled, grad)


def _compare(fn, compiled, grad):
    for n in (4, 3, 4, 5):
        x1 = torch.randn(n, 4)
        x2 = x1.clone()
        if grad:
            x1.requires_grad_()
            x2.requires_grad_()
        out, expected = compiled(x1), fn(x2)
        out = out if isinstance(out, tuple) else (out,)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for a, b in zip(out, expected):
            assert a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            torch.testing.assert_close(a, b)
        torch.testing.assert_close(x1, x2)
        assert x1.stride() == x2.stride()
        if grad:
            sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in out).backward()
            sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in expected).backward()
            torch.testing.assert_close(x1.grad, x2.grad)
