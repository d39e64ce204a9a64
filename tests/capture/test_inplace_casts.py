"""An in-place op whose result dtype cannot be cast to ``self``'s raises as in eager, on every backend
(capture/inplace_ops.py). ``int_tensor.mul_(1.5)`` and ``int_tensor *= 1.5`` used to truncate the
input silently under aot_eager (the functional graph computes ``mul`` and copies it back)."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import assert_same, compile


def _mul_method(x):
    x.mul_(1.5)
    return x


def _imul(x):
    x *= 1.5
    return x


def _pow_half(x):
    x.pow_(0.5)
    return x


def _bool_add(x):
    b = x > 1
    b.add_(1)
    return b


def _allowed(x):
    x.mul_(2)
    x += 1
    x //= 2
    y = x.float()
    y.mul_(2.5)
    y += x
    h = x.half()
    h.mul_(torch.tensor(2.0, dtype=torch.float64))  # (a 0-d tensor does not promote)
    x.lt_(1.5)
    return x, y, h


def _outcome(fn, x):
    try:
        return fn(x), x
    except RuntimeError as e:
        return "raised", type(e), x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_mul_method, _imul, _pow_half, _bool_add, _allowed])
def test_inplace_cast_matches_eager(fn, backend):
    expected = _outcome(fn, torch.tensor([1, 2]))
    actual = _outcome(compile(fn, backend=backend), torch.tensor([1, 2]))
    if expected[0] == "raised":
        assert actual[0] == "raised" and actual[1] is expected[1]
        assert_same(actual[2], expected[2])  # the input is left as eager leaves it
    else:
        assert_same(actual, expected)
