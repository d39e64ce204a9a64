"""``key in d`` looks at the keys only: a dict holding a symbolic number (a float automatic dynamic
made a symbol, such as an optimizer group's lr) keeps it symbolic.

Before: ``in`` folded the whole dict as a constant, reading every value, which specialised the
symbol (a guard on its value): every new value recompiled (``"differentiable" in group`` inside
``Optimizer.step``, with an lr scheduler changing the lr each step).
"""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile, reset, stats


def scaled(x, group):
    if "scale" in group and "missing" not in group:
        return x * group["scale"]
    return x


def test_key_in_dict_keeps_a_dynamic_float_symbolic():
    reset()
    counter = CompileCounter()
    fn = compile(scaled, backend=counter)
    for s in (0.5, 0.25, 0.125, 2.0, 3.0):
        x = torch.randn(3)
        assert_same(fn(x, {"scale": s, "other": 1}), scaled(x, {"scale": s, "other": 1}))
    assert counter.frame_count == 2, counter  # static, then the value a symbol
    assert stats()["recompiles"] == 1


def test_key_in_dict_answers_as_eager():
    reset()
    fn = compile(scaled, backend="eager")
    x = torch.randn(3)
    for group in ({"scale": 0.5}, {"scale": 0.5, "missing": 1}, {}, {"scale": 2.0, "missing": None}):
        assert_same(fn(x, dict(group)), scaled(x, dict(group)))
