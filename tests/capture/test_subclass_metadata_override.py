"""A tensor subclass whose own __torch_function__ answers a metadata read (``t.ndim``, ``t.dim()``,
``t.size(1)``): eager returns the override's answer. ember folded the fake tensor's metadata into
the graph as a constant (a wrong answer: ``a * a.ndim`` multiplied by 2 instead of 10). Now such a
read is checked against the override and breaks when the override answers for it; pass-through
overrides keep one graph. A subclass torch cannot make a fake tensor of (``size`` shadowed by a
class attribute) runs eagerly instead of failing inside the compiler."""
import torch

from ember_test_helpers import CompileCounter, check_same, compile


class NDimIsTen(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func == torch.Tensor.ndim.__get__:
            return 10
        return super().__torch_function__(func, types, args, kwargs)


class DimAndSize(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.dim:
            return 7
        if func is torch.Tensor.size and len(args) == 2:
            return 100
        return super().__torch_function__(func, types, args, kwargs)


class PassThrough(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs)


class ShadowsSize(torch.Tensor):
    size: int = 10

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs)


def _sub(cls, *shape):
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape).as_subclass(cls)


def _eager_vs_compiled(fn, *args):
    counter = CompileCounter()
    expected = fn(*args)
    actual = compile(fn, backend=counter)(*args)
    again = compile(fn, backend=counter)(*args)
    for got in (actual, again):
        _same(got, expected)
    return counter


def _same(got, expected):
    assert type(got) is type(expected)
    if isinstance(expected, tuple):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
    else:
        assert got == expected


def test_overridden_ndim_of_an_input():
    _eager_vs_compiled(lambda a: a * a.ndim, _sub(NDimIsTen, 2, 2))
    _eager_vs_compiled(lambda a: (a + 1) * a.ndim + 1, _sub(NDimIsTen, 2, 2))


def test_overridden_ndim_of_an_intermediate():
    _eager_vs_compiled(lambda a: (a.sin() * 2).ndim + a.sum(), _sub(NDimIsTen, 3))


def test_overridden_dim_and_size_methods():
    _eager_vs_compiled(lambda a: a * a.dim(), _sub(DimAndSize, 2, 3))
    _eager_vs_compiled(lambda a: a * a.size(1), _sub(DimAndSize, 2, 3))
    _eager_vs_compiled(lambda a: (a.cos() * a.size(0), a.shape[1]), _sub(DimAndSize, 2, 3))


def test_pass_through_override_keeps_one_graph():
    counter = _eager_vs_compiled(lambda a: a * a.ndim + a.dim() * a.size(1) + a.shape[0], _sub(PassThrough, 2, 3))
    assert counter.frame_count == 1


def test_plain_tensors_unaffected():
    check_same(lambda a: a * a.ndim + a.dim() * a.size(1), torch.randn(2, 3), graphs=1)


def test_subclass_without_a_fake_tensor_runs_eagerly():
    a = _sub(ShadowsSize, 2, 2)
    fn = lambda t: (t + t.size).as_subclass(torch.Tensor)  # noqa: E731
    counter = CompileCounter()
    torch.testing.assert_close(compile(fn, backend=counter)(a), fn(a))
    assert counter.frame_count == 0
