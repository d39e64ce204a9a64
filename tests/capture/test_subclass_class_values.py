"""A plain value a tensor subclass keeps on its class (``scale = 3``, ``tag = "q8"``), read off a
tensor of that class in the frame: eager's answer is the class's value unless the tensor's own
``__dict__`` holds the name; a change of either (the class value reassigned, the instance given its
own value) between calls gives the new answer, with no graph break. Also ``t.as_subclass(torch.Tensor)``
in the frame (a plain tensor aliasing ``t``; its graph call used to fail to generate code)."""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile

FULL = not REFERENCE  # (torch.compile breaks at as_subclass)


class Scaled(torch.Tensor):
    scale = 3
    tag = "q8"


class ScaledWithTF(torch.Tensor):
    """The same, with a pass-through ``__torch_function__`` of its own."""
    scale = 5

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Shadowing(torch.Tensor):
    """A class value shadowing one of Tensor's own properties: eager reads the class's."""
    ndim = 10


def use_scale(x):
    return x.as_subclass(torch.Tensor) * x.scale


def use_tag(x):
    if x.tag == "q8":
        return x.as_subclass(torch.Tensor) + 1
    return x.as_subclass(torch.Tensor) - 1


def test_class_value_read_off_input_subclass():
    fn = compile(use_scale, fullgraph=FULL)
    x = torch.arange(4.0).as_subclass(Scaled)
    assert_same(fn(x), use_scale(x))
    t = compile(use_tag, fullgraph=FULL)
    assert_same(t(x), use_tag(x))


def test_class_value_read_with_own_torch_function():
    fn = compile(lambda x: x.scale + torch.ones(2), fullgraph=FULL)
    x = torch.ones(2).as_subclass(ScaledWithTF)
    assert_same(fn(x), x.scale + torch.ones(2))
    assert_same(fn(x), torch.full((2,), 6.0))


def test_class_value_changed_between_calls():
    class Local(torch.Tensor):
        scale = 2

    fn = compile(use_scale, fullgraph=FULL)
    x = torch.arange(3.0).as_subclass(Local)
    assert_same(fn(x), use_scale(x))
    Local.scale = 7
    assert_same(fn(x), use_scale(x))
    assert_same(fn(x), torch.arange(3.0) * 7)


def test_instance_value_shadows_class_value():
    class Local(torch.Tensor):
        scale = 2

    fn = compile(use_scale, fullgraph=FULL)
    x = torch.arange(3.0).as_subclass(Local)
    y = torch.arange(3.0).as_subclass(Local)
    y.scale = 11
    assert_same(fn(x), torch.arange(3.0) * 2)
    assert_same(fn(y), torch.arange(3.0) * 11)  # its own value, not the class's
    x.scale = 4  # given one after the first call
    assert_same(fn(x), torch.arange(3.0) * 4)


def test_class_value_of_subclass_tensor_computed_in_frame():
    def f(x):
        y = x + 1  # a Scaled too (torch's default __torch_function__)
        return y.as_subclass(torch.Tensor) * y.scale, y.tag

    fn = compile(f, fullgraph=FULL)
    x = torch.arange(4.0).as_subclass(Scaled)
    assert_same(fn(x), f(x))


def test_value_assigned_in_frame_wins_over_class_value():
    def f(x):
        x.scale = 9  # (may run eagerly, at a break: the answer is what matters)
        return x.as_subclass(torch.Tensor) * x.scale

    fn = compile(f)
    x = torch.arange(3.0).as_subclass(Scaled)
    out = fn(x)
    assert_same(out, torch.arange(3.0) * 9)
    assert x.__dict__["scale"] == 9 and Scaled.scale == 3


def test_class_value_shadowing_tensor_property():
    if REFERENCE:
        pytest.skip("torch.compile refuses a subclass attribute shadowing a Tensor property")
    fn = compile(lambda x: x.as_subclass(torch.Tensor) + x.ndim, fullgraph=FULL)
    x = torch.ones(2, 2).as_subclass(Shadowing)
    assert_same(fn(x), torch.ones(2, 2) + 10)


def unwrap(x):
    y = x.as_subclass(torch.Tensor)
    return y * 2, type(y) is torch.Tensor, isinstance(y, Scaled), type(y + 1).__name__


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_as_subclass_to_plain_tensor(backend):
    fn = compile(unwrap, backend=backend, fullgraph=FULL)
    x = torch.arange(4.0).as_subclass(Scaled)
    out = fn(x)
    assert_same(out, unwrap(x))
    assert type(out[0]) is torch.Tensor
    w = torch.ones(3, requires_grad=True)
    g = compile(lambda t: (t.as_subclass(torch.Tensor) * 3).sum(), backend=backend, fullgraph=FULL)
    g(w.as_subclass(Scaled)).backward()
    assert_same(w.grad, torch.full((3,), 3.0))


@pytest.mark.skipif(REFERENCE, reason="torch.compile answers type(y).__name__ 'Tensor' (eager: 'Other')")
def test_as_subclass_to_other_class_answers_as_eager():
    class Other(torch.Tensor):
        pass

    def f(x):
        y = x.as_subclass(Other)
        return y * 2, type(y).__name__

    fn = compile(f)
    x = torch.arange(3.0)
    out = fn(x)
    assert_same(out[1], "Other")
    assert type(out[0]) is Other and torch.equal(out[0].as_subclass(torch.Tensor), torch.arange(3.0) * 2)


class WithSettableNdim(torch.Tensor):
    """A property with a setter shadowing Tensor.ndim, backed by an instance value."""

    def __init__(self, *args, **kwargs):
        self._ndim = 10

    @property
    def ndim(self):
        return self._ndim

    @ndim.setter
    def ndim(self, value):
        self._ndim = value


def test_settable_property_read_off_input_subclass():
    def f(x):
        return x.as_subclass(torch.Tensor) + x.ndim

    fn = compile(f, fullgraph=FULL)
    x = WithSettableNdim(torch.ones(2, 2))
    assert_same(fn(x), torch.ones(2, 2) + 10)
    x.ndim = 3  # through the setter: the instance value changes, the next call sees it
    assert_same(fn(x), torch.ones(2, 2) + 3)
