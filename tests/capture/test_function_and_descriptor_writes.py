"""Attribute writes the frame makes through Python machinery: ``functools.wraps`` on a nested
function (``__name__``, ``__doc__``, ``__wrapped__``, the wrapped function's ``__dict__``), plain
attributes on nested functions, property setters and descriptor ``__set__``/``__get__`` written in
Python on objects from outside; each compared with eager, including the objects afterwards."""
import functools

import pytest
import torch

from ember_test_helpers import REFERENCE, check_same, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


def _deco(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k) + 1
    return wrapper


def _base(x):
    """doc"""
    return x * 2


_base.tag = "T"


def wraps_in_frame(x):
    w = _deco(_base)

    def inner(y):
        return y
    inner.__name__ = "renamed"
    inner.extra = 5
    return (w(x), w.__name__, w.__doc__, w.__wrapped__ is _base, w.tag, inner.__name__, inner.extra,
            sorted(w.__dict__), w, inner)


def test_functools_wraps_on_nested_function():
    expected = wraps_in_frame(torch.ones(2))
    got = compile(wraps_in_frame)(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:8] == expected[1:8]
    w, inner = got[8], got[9]  # the escaped functions keep what the frame assigned
    assert (w.__name__, w.__doc__, w.tag, w.__wrapped__) == ("_base", "doc", "T", _base)
    assert (inner.__name__, inner.extra) == ("renamed", 5)
    torch.testing.assert_close(w(torch.ones(2)), torch.full((2,), 3.0))
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


def bad_name(x):
    def g():
        pass
    g.__name__ = 3
    return x


def test_function_name_must_be_str():
    from ember_test_helpers import check_raises_same
    check_raises_same(bad_name, torch.ones(2))


class Box:
    def __init__(self):
        self._v = 1

    @property
    def value(self):
        return self._v

    @value.setter
    def value(self, v):
        self._v = v * 2


class Desc:
    def __init__(self):
        self.store = {}

    def __get__(self, obj, owner=None):
        return self if obj is None else self.store.get(id(obj), 0)

    def __set__(self, obj, v):
        self.store[id(obj)] = v + 100


class Holder:
    d = Desc()


def setters(x, b, h):
    b.value = 5
    h.d = 3
    return x + b.value + h.d


def test_property_and_descriptor_setters():
    b1, h1, b2, h2 = Box(), Holder(), Box(), Holder()
    expected = setters(torch.ones(2), b1, h1)
    got = compile(setters)(torch.ones(2), b2, h2)
    torch.testing.assert_close(got, expected)
    assert (b2._v, h2.d) == (b1._v, h1.d) == (10, 103)
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


# -- attributes the program set on tensors (param.tag = ...): read from the real tensor, guarded ----------
def tensor_attr(x):
    if hasattr(x, "foo"):
        return x + x.foo
    return x - 1


def test_tensor_instance_attributes():
    fn = compile(tensor_attr)
    x = torch.ones(2)
    x.foo = 5
    torch.testing.assert_close(fn(x), tensor_attr(x))
    y = torch.ones(2)
    torch.testing.assert_close(fn(y), tensor_attr(y))
    y.foo = 3  # set after the compile: the absence was guarded
    torch.testing.assert_close(fn(y), tensor_attr(y))


def test_parameter_attribute_through_module():
    m = torch.nn.Linear(2, 2)
    m.weight.scale = 3.0

    def f(x):
        return m(x) * getattr(m.weight, "scale", 1.0), hasattr(m.bias, "scale")
    check_same(f, torch.ones(2))


class _Cached:
    def __init__(self):
        self.n = 0

    @functools.cached_property
    def val(self):
        self.n += 1
        return 7


def read_cached(x, c):
    return x + c.val + c.val, c.n


def test_cached_property_without_pending_writes_compiles():
    c1, c2 = _Cached(), _Cached()
    expected = read_cached(torch.ones(2), c1)
    got = compile(read_cached)(torch.ones(2), c2)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and c2.n == c1.n == 1
    assert stats()["graph_breaks"] == 0
