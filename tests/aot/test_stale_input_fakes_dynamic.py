"""An input that does not require grad, written in place with a value that does (``t[1] = y``),
under dynamic shapes.

The frontend's fake for such an input is left requiring grad by the trace, so the AOT compile
cannot use it and fakes the real input afresh, with this call's sizes. The graphs it made were
then served to every later size the frontend's symbolic guards accepted: the backward's
``new_empty_strided(add, [5, 4], ...)`` raised "The size of tensor a (5) must match the size of
tensor b (6)" (fuzz seed 3100045 under --vary). Such a compile now serves its own sizes only;
other sizes compile a variant of their own. Compared with eager over growing sizes: outputs, the
mutated input, and gradients.
"""
from __future__ import annotations

import pytest
import torch

import ember
from ember_test_helpers import assert_same


def select_write(t, y):
    t[1] = y
    return t * 2


def select_write_sin(t, y):
    t[1] = y
    return t.sin() * t


def slice_write(t, y):
    t[1:3] = y
    return t.sum(0) + t[0]


def copy_write(t, y):
    t.copy_(y.expand_as(t))
    return t * t


@pytest.mark.parametrize("fn", [select_write, select_write_sin, slice_write, copy_write])
@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_input_gaining_grad_under_dynamic_shapes(fn, backend):
    compiled = ember.compile(fn, backend=backend)
    for rows in (3, 5, 6, 7):
        x = torch.rand(rows, 4, generator=torch.Generator().manual_seed(rows))
        y_e = torch.rand(4, requires_grad=True)
        y_c = y_e.detach().clone().requires_grad_()
        t_e, t_c = x.clone(), x.clone()
        out_e, out_c = fn(t_e, y_e), compiled(t_c, y_c)
        assert_same(out_c, out_e)
        assert_same(t_c, t_e)
        out_e.sum().backward()
        out_c.sum().backward()
        assert_same(y_c.grad, y_e.grad)
