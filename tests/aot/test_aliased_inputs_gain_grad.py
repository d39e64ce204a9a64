"""Inputs that alias each other, none requiring grad, where the program writes a value that requires
grad into one of them (``t[2] = y``): in eager the written tensor, and every view of its base, then
require grad and pass gradients to ``y``. The synthetic base ember builds for such inputs must be
their common autograd base (a fresh tensor over the storage lost that history: outputs without grad,
``y.grad`` None; fuzz seed 930037)."""
import pytest
import torch

import ember


def write_into_base(v, t, y):
    v.sub_(1)
    t[2] = y
    return v, t


def write_into_view(v, t, y):
    v[1] = y[1:] * 2
    return t * 1, v


def write_twice_then_read(v, t, y):
    v.mul_(2)
    t[0] = y
    t[1] = y * y
    return (v * t[:, 1:]).sum(), t


def _views_of_one_base(y):
    t = torch.arange(12.0).reshape(3, 4)
    return t[:, 1:], t, y


def _views_without_common_base(y):
    t = torch.arange(12.0).reshape(3, 4)
    alias = torch.empty(0).set_(t.untyped_storage(), 0, (3, 4), (4, 1))  # (no autograd base in common)
    return alias[:, 1:], t, y


def _run(fn, make):
    y_leaf = torch.tensor([1.0, -2.0, 3.0, 0.5], requires_grad=True)
    outs = fn(*make(y_leaf * 1))
    flags = [o.requires_grad for o in outs]
    sum(o.sum() for o in outs if o.requires_grad).backward()
    return [o.detach() for o in outs], flags, y_leaf.grad


@pytest.mark.parametrize("make", [_views_of_one_base, _views_without_common_base], ids=lambda f: f.__name__)
@pytest.mark.parametrize("fn", [write_into_base, write_into_view, write_twice_then_read], ids=lambda f: f.__name__)
def test_aliased_inputs_written_a_grad_value_match_eager(fn, make):
    ember.reset()
    compiled = ember.compile(fn, backend="aot_eager")
    expected = _run(fn, make)
    for _ in range(2):
        got = _run(compiled, make)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
        torch.testing.assert_close(got[2], expected[2])
