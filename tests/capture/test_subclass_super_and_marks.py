"""Tensor subclasses: ``super().to(...)`` inside a subclass's own ``to`` reached TensorBase.to, a C
method ember kept as the bare descriptor; called (at the break it causes) without the tensor, it
raised TypeError where eager works. And ``mark_dynamic`` on a subclass input (kept static, as
parameters are) left a guard that the fresh entry itself failed: an internal error, the frame
then ran eagerly."""
import torch

import ember
from ember_test_helpers import CompileCounter, compile


class KeepsShape(torch.Tensor):
    def to(self, *args, **kwargs):
        new = super().to(*args, **kwargs)
        new.kept = getattr(self, "kept", tuple(new.shape))
        return new


class CloneTwice(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            return out * 2 if func is torch.clone else out


def _plain(t):
    return t.as_subclass(torch.Tensor)


def test_super_to_of_a_tensor_subclass():
    def fn(x):
        y = x.to("cpu")
        return x + 1, y * 2, y.kept

    base = torch.randn(2, 3)
    expected = fn(base.clone().as_subclass(KeepsShape))
    got = compile(fn, backend=CompileCounter())(base.clone().as_subclass(KeepsShape))
    assert type(got[0]) is type(expected[0]) is KeepsShape
    torch.testing.assert_close(_plain(got[0]), _plain(expected[0]))
    torch.testing.assert_close(_plain(got[1]), _plain(expected[1]))
    assert got[2] == expected[2] == (2, 3)


def test_super_c_method_with_dtype_argument():
    class Half(torch.Tensor):
        def to(self, *args, **kwargs):
            return super().to(*args, **kwargs) + 1

    def fn(x):
        return x.to(torch.float64) * 3

    a = torch.arange(4.0).as_subclass(Half)
    expected = fn(a)
    got = compile(fn, backend=CompileCounter())(a)
    assert got.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(_plain(got), _plain(expected))


def test_mark_dynamic_on_a_subclass_input():
    def fn(x):
        return torch.clone(x) * x.size(0)

    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for n in (4, 5):
        x = torch.ones(n, 3).as_subclass(CloneTwice)
        ember.mark_dynamic(x, 0)
        torch.testing.assert_close(_plain(compiled(x)), _plain(fn(x)))
    assert ember.stats()["fallbacks"] == 0
    assert counter.frame_count == 2  # (subclass inputs stay static: one graph per size)
