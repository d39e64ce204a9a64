"""What a tensor subclass's class decides at run time, answered by the trace from the trackers'
classes rather than the fake tensors' (capture: ``variables/subclass_metadata.py``,
``subclass_result_class`` in ``variables/tensor.py``):

- ``torch.overrides.has_torch_function`` (and ``_unary`` / ``_variadic``): True for a subclass
  with a ``__torch_function__`` (a fake tensor is no subclass: the folded answer was False, so a
  library function's ``handle_torch_function`` path was skipped);
- the result of an op on a ``__torch_dispatch__`` wrapper subclass: its class is decided by the
  dispatch, so ``isinstance`` of it is a graph break, not "a plain tensor";
- ``x.data`` of a subclass goes through its ``__torch_function__``, which gives the result the
  subclass (the graph read it as a plain tensor)."""
import torch
import torch.utils._pytree as pytree
from torch.overrides import handle_torch_function, has_torch_function, has_torch_function_unary

from ember_test_helpers import check_same, compile, CompileCounter


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Plain(torch.Tensor):
    pass


class NoTF(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl


def _logged():
    return torch.randn(3).as_subclass(Logged)


def test_has_torch_function_of_subclasses():
    def f(x, y, z, w):
        return (has_torch_function((x,)), has_torch_function((y, x)), has_torch_function_unary(z),
                torch.overrides.has_torch_function_variadic(x, w), has_torch_function((w,)), x + 1)
    p = torch.nn.Parameter(torch.randn(3))
    check_same(f, torch.randn(3), _logged(), torch.randn(3).as_subclass(Plain), p)
    check_same(f, torch.randn(3), torch.randn(3).as_subclass(NoTF), torch.randn(3), p)


def scaled_add(x, y):
    if has_torch_function((x, y)):
        return handle_torch_function(scaled_add, (x, y), x, y)
    return x + 2 * y


class Intercepts(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is scaled_add:
            return "intercepted"
        return super().__torch_function__(func, types, args, kwargs or {})


def test_handle_torch_function_path_of_a_library_function():
    def f(x, y):
        return scaled_add(x, y), scaled_add(y, y)
    x, y = torch.randn(3).as_subclass(Intercepts), torch.randn(3)
    expected = f(x, y)
    got = compile(f, backend=CompileCounter())(x, y)
    assert got[0] == expected[0] == "intercepted"
    torch.testing.assert_close(got[1], expected[1])


def test_has_torch_function_under_disabled_subclass_dispatch():
    def f(x):
        return has_torch_function((x,)), x * 2
    counter = CompileCounter()
    c = compile(f, backend=counter)
    x = _logged()
    assert c(x)[0] is True
    with torch._C.DisableTorchFunctionSubclass():
        assert c(x)[0] is f(x)[0] is False
    assert c(x)[0] is True


class Wrapper(torch.Tensor):
    """A __torch_dispatch__ wrapper: every aten op returns a Wrapper again."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda a: a.elem if isinstance(a, Wrapper) else a  # noqa: E731
        out = func(*pytree.tree_map(unwrap, args), **pytree.tree_map(unwrap, kwargs or {}))
        return pytree.tree_map(lambda o: Wrapper(o) if isinstance(o, torch.Tensor) else o, out)

    __torch_function__ = torch._C._disabled_torch_function_impl


def test_isinstance_of_a_result_on_a_dispatch_wrapper():
    def f(x):
        y = x * 2 + 1
        return y.elem if isinstance(y, Wrapper) else y
    x = Wrapper(torch.randn(3))
    expected = f(x)
    got = compile(f, backend=CompileCounter())(x)
    assert type(got) is type(expected) is torch.Tensor
    torch.testing.assert_close(got, expected)


def test_data_of_a_subclass_keeps_its_class():
    def f(x):
        d = x.data
        return d + 1, type(d).__name__, isinstance(x.data, Logged)
    check_same(f, torch.randn(3).as_subclass(Plain))
    # (an override decides its results' class at run time: the type() read is a break)
    check_same(f, _logged(), fullgraph=False, graphs=None)
    check_same(lambda x: (x.data * 2, x.data), _logged())


class ScalarLike:
    """A tensor-like object (no Tensor subclass) with a __torch_function__, as in torch's docs."""

    def __init__(self, n, value):
        self.n, self.value = n, value

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.mean:
            return float(args[0].value) / args[0].n
        return NotImplemented


def test_tensor_like_object_through_torch_functions():
    def f(s, x):
        try:
            y = torch.nn.functional.relu(s)  # (NotImplemented: a TypeError, as in eager)
        except TypeError:
            y = x.relu()
        return y, torch.mean(s), has_torch_function((s,)), torch._C._is_torch_function_enabled()
    check_same(f, ScalarLike(3, 2.0), torch.randn(2), fullgraph=False, graphs=None)
    with torch._C.DisableTorchFunctionSubclass():
        check_same(lambda x: (torch._C._is_torch_function_enabled(), x + 1), torch.randn(2))


def test_own_attributes_of_tensors_not_the_fakes():
    # (x.__dict__ and vars(x) showed the fake tensor's internals; x.fake_mode was the fake's)
    def f(x):
        try:
            missing = x.fake_mode
        except AttributeError:
            missing = "no fake_mode"
        return dict(vars(x)), x.__dict__.get("a"), missing, x * 2
    tagged = torch.randn(2).as_subclass(Plain)
    tagged.a = 1
    check_same(f, tagged, fullgraph=False, graphs=None)
    check_same(f, torch.randn(2), fullgraph=False, graphs=None)


def test_methods_of_a_wrapper_subclass_made_in_the_frame():
    # (its fake is the wrapper class itself, holding fake tensors: its own methods are real)
    import warnings
    from torch.masked import masked_tensor

    def f(d, m):
        mt = masked_tensor(d, m)
        return mt.sum().get_data() if hasattr(mt.sum(), "get_data") else mt.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dynamic in (None, True):
            d, m = torch.randn(4), torch.tensor([True, False, True, True])
            expected = f(d, m)
            got = compile(f, backend=CompileCounter(), dynamic=dynamic)(d, m)
            assert type(got) is type(expected) is torch.Tensor
            torch.testing.assert_close(got, expected)
