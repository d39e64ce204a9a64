"""A custom ``autograd.Function`` whose output is a view (forward returns its argument, or a view of
it): eager's autograd refuses an in-place write to that output ("Output 0 of F is a view and is
being modified inplace"). The AOT runtime returns such an output as a view; a compiler that returns
a fresh tensor for it (Inductor) made the write succeed where eager raises.
"""
from __future__ import annotations

import pytest
import torch

import ember


class ReturnsArgument(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ReturnsView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return g.view(2, 3) * 3


def write_to_output(x):
    out = ReturnsArgument.apply(x * 1)
    out.mul_(2)
    return out.sum()


def write_to_view_output(x):
    out = ReturnsView.apply(x + 0)
    out.add_(1)
    return out.sum()


def read_only(x):
    return (ReturnsView.apply(x + 0) * 2).sum() + ReturnsArgument.apply(x * 3).sum()


def _run(fn):
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    try:
        out = fn(x)
        out.backward()
    except RuntimeError as e:
        return ("raised", "is a view and is being modified inplace" in str(e))
    return out.detach(), x.grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [write_to_output, write_to_view_output, read_only], ids=lambda f: f.__name__)
def test_custom_function_view_output_refuses_writes_as_eager(fn, backend):
    expected = _run(fn)
    ember.reset()
    got = _run(ember.compile(fn, backend=backend))
    if isinstance(expected[0], str):
        assert got == expected
    else:
        assert not isinstance(got[0], str), got
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)
