"""Inductor lowers an alias op (``t.detach()``) to its input, so an inference graph returning ``t``
and ``t.detach()`` handed back one tensor object for both: ``requires_grad_`` on the detached one
(after a graph break) made ``t`` require grad too, and what was computed from it (an input written
from it) as well (a wrong answer: fuzz seed 4400009). The repeat is now a new alias."""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's inductor backend wrapper")


def _detach_then_leaf(y):
    t2 = y * 2
    y.add_(1)
    leaf = t2.detach().requires_grad_(True)   # (a graph break: t2 and its detach are graph returns)
    g, = torch.autograd.grad((leaf * leaf).sum(), leaf)
    t4 = t2 + g
    y.copy_(t2 * -1.5)
    return t4, t2.requires_grad


def _returns_alias(y):
    t = y.sin()
    return t, t.detach(), t


def test_detached_return_is_its_own_object_under_inductor():
    compiled = compile(_detach_then_leaf, backend="inductor")
    y_e, y_c = torch.rand(4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    y_c.copy_(y_e)
    expected, got = _detach_then_leaf(y_e), compiled(y_c)
    assert_same(got, expected)
    assert_same(y_c, y_e)
    assert y_c.requires_grad is False

    a, b, c = compile(_returns_alias, backend="inductor")(torch.rand(3, dtype=torch.float64))
    assert a is not b and a is c          # (the same object where eager's is, a new one where not)
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
