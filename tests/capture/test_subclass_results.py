"""What a traced program sees of tensors computed from tensor subclasses (torch's rules, compared
with eager): torch's default ``__torch_function__`` gives every tensor an op returns the most
derived subclass among its arguments, so ``type(y)``, ``isinstance`` and the subclass's own
methods (one shadowing a Tensor method included) are the subclass's; a subclass that overrides
``__torch_function__`` decides the result's class at run time, so a question about that class is
a graph break, never a guess."""
import pytest
import torch

import ember
from ember_test_helpers import assert_same


class Plain(torch.Tensor):
    def double(self):  # shadows Tensor.double (a dtype conversion)
        return self * 2

    @property
    def twice(self):
        return self + self


class Overriding(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if getattr(func, "__name__", "") == "add":
            return out.as_subclass(torch.Tensor)  # add gives plain tensors
        return out


def _same_as_eager(fn, *args, backend):
    ember.reset()
    got = ember.compile(fn, backend=backend)(*args)
    assert_same(got, fn(*args))
    return got


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_default_torch_function_results_are_the_subclass(backend):
    def f(x):
        y = x * 3
        z = y.sum(0)
        return z, type(y).__name__, isinstance(z, Plain), type(z) is Plain, y.dtype

    _same_as_eager(f, torch.ones(2, 2).as_subclass(Plain), backend=backend)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_subclass_methods_and_properties_shadow_tensor_ones(backend):
    def f(x):
        y = x + 1
        d = y.double()
        return d, d.dtype, y.twice, x.double().dtype

    _same_as_eager(f, torch.ones(3).as_subclass(Plain), backend=backend)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_overriding_torch_function_result_class_is_not_guessed(backend):
    def f(x):
        y = x * 2
        z = y.add(1)
        return z, type(z).__name__, type(y).__name__, isinstance(z, Overriding)

    _same_as_eager(f, torch.ones(3).as_subclass(Overriding), backend=backend)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dispatch_wrapper_subclass_inputs_compile_and_differentiate(backend):
    """A ``__torch_dispatch__`` wrapper subclass (two tensors in one): the graph runs on it as it
    is (each aten op through the subclass, as eager), with gradients — no internal error."""
    import warnings
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")

    def f(x):
        return (x * x + 1).sin().sum()

    def run(fn):
        a = torch.ones(3, requires_grad=True)
        out = fn(two_tensor.TwoTensor(a, a * 2))
        out.backward()
        return out.a, out.b, a.grad

    ember.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run(ember.compile(f, backend=backend))
    assert not [w for w in caught if "ember" in str(w.message)]
    assert_same(got, run(f))


class Sized(torch.Tensor):
    def __len__(self):
        return 99

    def __bool__(self):
        return False


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_builtins_call_the_subclass_dunders(backend):
    def f(x):
        y = x * 2
        return len(x), len(y), bool(y)  # (assert_same cannot compare a tensor whose bool() lies)

    _same_as_eager(f, torch.ones(2).as_subclass(Sized), backend=backend)
