"""NumPy scalar arguments whose value changes between calls (capture/variables/numpy_arrays.py,
``_unspecialized_scalar``): a 0-d graph input traced as a NumPy scalar from the first compile, so
a scale that changes every call compiles once, as with torch.compile (checked there: 1 frame). Each call is compared with
eager: the Python type (np.float32 vs tensor vs float), dtype and value of every output.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, reset, stats

from .test_numpy_interop import same

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own NumPy capture (counts are ember's)")


def _calls(fn, arg_sets, *, dynamic=None):
    reset()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, dynamic=dynamic)
    for args in arg_sets:
        expected = fn(*args)
        same(compiled(*args), expected)
    return counter.frame_count, stats()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("scalar", [np.float32, np.float64, np.int64, np.int32, np.uint8])
def test_scale_argument_compiles_once_with_eager_promotion(dtype, scalar):
    # eager reads the NumPy scalar as a Python number: int32 tensor * np.float64 is float32
    t = (torch.arange(1, 7) % 5).to(dtype).reshape(2, 3)

    def fn(x, s):
        return x * s, x + s, s - x, x / s, x > s, x // s
    frames, s = _calls(fn, [(t, scalar(v)) for v in (1, 2, 3, 5, 7)])
    assert frames == 1 and s["graph_breaks"] == 0, s


def test_in_place_operators_with_a_scalar_argument():
    # eager: `x += s` writes x (the caller's tensor); an int tensor *= a float scalar raises
    def fn(x, s):
        x += s
        x *= s
        y = x
        y -= s
        return x, y
    for dtype in (torch.float32, torch.int64, torch.float64):
        reset()
        compiled = compile(fn, backend="aot_eager")
        for v in (1, 2, 3):
            s = np.int64(v) if dtype is torch.int64 else np.float32(v / 3)
            x1, x2 = torch.ones(3, dtype=dtype), torch.ones(3, dtype=dtype)
            same(compiled(x1, s), fn(x2, s))
            same(x1, x2)
    reset()
    compiled = compile(fn, backend="aot_eager")
    for v in (1.5, 2.5):
        with pytest.raises(RuntimeError, match="can't be cast"):
            compiled(torch.ones(3, dtype=torch.int64), np.float64(v))

    def scalar_left(x, s):
        s += x  # rebinds s to a tensor; x unchanged
        return s, x
    _calls(scalar_left, [(torch.ones(3), np.float32(v)) for v in (1, 2, 3)])


def test_numpy_results_stay_numpy_scalars():
    def fn(x, s):
        return x + 1, s, s * 2, s + 1.5, np.int64(3) * s, s / 2
    frames, s = _calls(fn, [(torch.ones(2), np.int32(v)) for v in range(1, 6)])
    assert frames == 1, s
    frames, s = _calls(fn, [(torch.ones(2), np.float32(v) / 3) for v in range(1, 6)])
    assert frames == 1, s
    frames, s = _calls(fn, [(torch.ones(2), np.float32(v)) for v in range(3)], dynamic=True)
    assert frames == 1, s


def test_uses_that_need_the_value_are_specialised():
    # a shape, an index, a branch, range(), a torch function taking a number: the value, guarded
    cases = [
        (lambda x, n: x[:n] * 2, lambda v: (torch.arange(10.0), np.int64(v))),
        (lambda x, n: x.view(n, -1), lambda v: (torch.arange(12.0), np.int64(12 // v))),
        (lambda x, s: x.clamp(min=s), lambda v: (torch.arange(6.0), np.float32(v))),
        (lambda x, n: sum(x * i for i in range(n)), lambda v: (torch.ones(2), np.int64(v))),
        (lambda x, s: x + 1 if s > 2 else x - 1, lambda v: (torch.ones(2), np.float64(v))),
        (lambda x, s: torch.tensor(s) + x, lambda v: (torch.ones(2), np.float32(v))),
        # eager infers float64 from the np.float64 in the list (a Python float would give float32)
        (lambda x, s: torch.tensor([s, 1.0]) + x, lambda v: (torch.ones(2), np.float64(v))),
        (lambda x, s: (torch.full((2,), s), torch.arange(s), x.new_tensor([s])), lambda v: (torch.ones(2), np.int8(v))),
        (lambda x, s: (x * float(s), int(s)), lambda v: (torch.ones(2), np.float64(v + 0.5))),
    ]
    for fn, make in cases:
        _calls(fn, [make(v) for v in (1, 2, 3, 4)])


def test_integer_division_by_a_scalar_argument():
    # positive divisor: guarded positive, traced; zero: NumPy's 0 (and warning), as eager
    def fn(a, b):
        return a % b, a // b, np.arange(6) % b
    with np.errstate(all="ignore"):
        frames, s = _calls(fn, [(17, np.int64(v)) for v in (3, 4, 5, 6)])
        assert frames == 1, s
        _calls(fn, [(17, np.int64(v)) for v in (3, 4, 0, -2)])

    def shifted(x, a, b):
        return x + (a % b)
    frames, s = _calls(shifted, [(torch.ones(4), 4096, np.int64(8))] * 2, dynamic=True)
    assert frames == 1 and s["graph_breaks"] == 0, s


def test_half_and_complex_tensors_with_a_scalar_argument_break():
    # eager computes with the scalar at another precision than a 0-d tensor would: eager runs it
    for dtype in (torch.float16, torch.bfloat16, torch.complex64):
        _calls(lambda x, s: x * s, [(torch.ones(3, dtype=dtype) / 3, np.float64(v) / 7) for v in (1, 2, 3)])
        assert stats()["graph_breaks"] >= 1
