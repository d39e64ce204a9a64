"""Symbolic view inputs: guards over their base's sizes.

Faking a view input fakes its ``_base`` too, with symbols of its own (``v._base.size()[i]``). A
trace that checks the view's extent within its base (two views of one tensor, one written in
place) guards those symbols: the base must be among the guarded inputs (else installing the guards
failed: "sources must not be empty"), behind a guard that the input is still a view.
"""
from __future__ import annotations

import pytest
import torch

import ember


def _views_written(x, y):
    v1 = x.view(-1)
    v2 = x.transpose(0, 1)
    y.sum().item()  # break: the resume function takes the two views as inputs
    p = v1 * 2
    v2.add_(1)
    return p


def _two_view_inputs(v1, v2):
    p = v1 * 2
    v2.add_(1)
    return p, v1 + 0


@pytest.mark.parametrize("dynamic", [None, True])
def test_views_of_a_local_across_a_break(dynamic):
    ember.reset()
    compiled = ember.compile(_views_written, backend="aot_eager", dynamic=dynamic)
    for n in (3, 5, 6, 7):
        torch.manual_seed(n)
        x, y = torch.rand(n, 4, dtype=torch.float64), torch.rand(4)
        xe = x.clone()
        assert torch.equal(compiled(x, y), _views_written(xe, y))
        assert torch.equal(x, xe)


@pytest.mark.parametrize("dynamic", [None, True])
def test_view_inputs_then_plain_inputs(dynamic):
    ember.reset()
    compiled = ember.compile(_two_view_inputs, backend="aot_eager", dynamic=dynamic)

    def views(n):
        torch.manual_seed(n)
        b = torch.rand(n, 4, dtype=torch.float64)
        return b.view(-1), b.t()

    for n in (3, 5, 6, None):
        if n is None:  # no longer views: the guard that they are fails, nothing raises
            a = (torch.rand(24, dtype=torch.float64), torch.rand(4, 6, dtype=torch.float64))
            e = tuple(t.clone() for t in a)
        else:
            a, e = views(n), views(n)
        got, want = compiled(*a), _two_view_inputs(*e)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
        assert all(torch.equal(g, w) for g, w in zip(a, e))
