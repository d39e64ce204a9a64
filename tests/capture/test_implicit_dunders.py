"""Implicit protocol calls (``obj[k]``, ``obj[k] = v``, ``del obj[k]``, ``len(obj)``, ``k in obj``)
look their method up on the type, as Python does: past the instance dict and ``__getattr__``, and
without one the program sees eager's TypeError — never the AttributeError of a lookup on the object
(which an ``except AttributeError`` would catch: a wrong answer)."""
import typing
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import assert_same


class Plain:
    pass


class InstanceDunders:
    def __init__(self):
        self.__getitem__ = lambda k: 100
        self.__len__ = lambda: 7
        self.__contains__ = lambda k: True


class GetattrHook:
    def __getattr__(self, name):
        return lambda *a: 5


class Real:
    def __getitem__(self, k):
        return k * 2

    def __len__(self):
        return 3

    def __contains__(self, k):
        return k == 1


class ShadowedReal(Real):
    def __init__(self):
        self.__getitem__ = lambda k: 100  # ignored by `obj[k]`
        self.__len__ = lambda: 100


class LenModule(nn.Module):
    def __len__(self):
        return 4


class InstanceLenModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.__dict__["__len__"] = lambda: 9


def _setitem(o):
    o[0] = 1
    return 0


def _delitem(o):
    del o[0]
    return 0


OPS = {
    "getitem": lambda o: o[2],
    "setitem": _setitem,
    "delitem": _delitem,
    "len": lambda o: len(o),
    "contains": lambda o: int(1 in o),
    "class_getitem": lambda o: len(Callable[[int], bool].__args__),
}
OBJECTS = {"plain": Plain, "instance": InstanceDunders, "getattr_hook": GetattrHook, "real": Real,
           "shadowed_real": ShadowedReal,
           "len_module": LenModule, "instance_len_module": InstanceLenModule}


def _catching(op):
    def f(x, o):
        try:
            return x + op(o), "ok"
        except AttributeError:
            return x - 1, "AttributeError"
        except TypeError:
            return x - 2, "TypeError"
    return f


def _made_inside(op, cls):
    def f(x):
        try:
            return x + op(cls()), "ok"
        except AttributeError:
            return x - 1, "AttributeError"
        except TypeError:
            return x - 2, "TypeError"
    return f


@pytest.mark.parametrize("obj", sorted(OBJECTS))
@pytest.mark.parametrize("op", sorted(OPS))
def test_implicit_protocol_matches_eager(op, obj):
    cls = OBJECTS[obj]
    for fn, args, made_inside in ((_catching(OPS[op]), (torch.ones(1), cls()), False),
                                  (_made_inside(OPS[op], cls), (torch.ones(1),), True)):
        ember.reset()
        expected = fn(*args)
        actual = ember.compile(fn, backend="eager")(*args)
        assert_same(actual, expected)
        if not made_inside:  # (a module made in the frame cannot live across the break: eager frame)
            assert ember.stats()["fallbacks"] == 0


class InstanceContext:
    def __init__(self):
        self.__enter__ = lambda: 100
        self.__exit__ = lambda *a: True


class ShadowedContext:
    def __init__(self):
        self.__enter__ = lambda: 100  # ignored by `with`

    def __enter__(self):
        return 3

    def __exit__(self, *exc):
        return False


def _with(o):
    with o as v:
        return v


@pytest.mark.parametrize("cls", [Plain, GetattrHook, InstanceContext, ShadowedContext])
def test_with_looks_up_enter_exit_on_the_type(cls):
    for fn, args in ((_catching(_with), (torch.ones(1), cls())), (_made_inside(_with, cls), (torch.ones(1),))):
        ember.reset()
        expected = fn(*args)
        actual = ember.compile(fn, backend="eager")(*args)
        assert_same(actual, expected)
        assert ember.stats()["fallbacks"] == 0


T = TypeVar("T")


class Box(Generic[T]):
    pass


def _subscript_with_typevar(x):
    from torch.utils._ordered_set import OrderedSet
    a = OrderedSet[T]  # collections.abc's __class_getitem__ (types.GenericAlias)
    b = Box[T]  # typing.Generic's
    c = list[T]  # a builtin's
    s = typing.cast(OrderedSet[int], OrderedSet([3, 1, 2]) & OrderedSet([2, 3]))  # (its __and__ casts)
    return x + len(s), a, b, c, a.__args__[0] is T, list(s)


def test_class_subscript_with_typevar_is_traced():
    """``Cls[T]`` for a ``TypeVar`` read from outside: the alias made at trace time (one graph)."""
    x = torch.ones(2)
    expected = _subscript_with_typevar(x)
    actual = ember.compile(_subscript_with_typevar, backend="eager", fullgraph=True)(x)
    assert torch.equal(actual[0], expected[0])
    assert actual[1:] == expected[1:]


def _typing_forms(x):
    def foo(c: typing.Callable[[T], T], y: T) -> T:  # annotations evaluated when foo is made
        return c(y)

    a = typing.List[int]
    b = typing.Dict[str, typing.Optional[torch.Tensor]]
    return foo(torch.sum, x), a, b, typing.Callable[[T], T].__args__[0] is T


def test_typing_special_forms_subscripted_in_the_frame():
    """``typing.List[int]``, ``Callable[[T], T]``: typing's cached aliases, made at trace time."""
    x = torch.randn(3)
    expected = _typing_forms(x)
    actual = ember.compile(_typing_forms, backend="eager", fullgraph=True)(x)
    assert torch.equal(actual[0], expected[0])
    assert actual[1:] == expected[1:]


def _abc_callable_annotations(x):
    import collections.abc as cabc

    def wrapper(f: cabc.Callable[[T], typing.Any]) -> cabc.Callable[..., int]:  # (torch's pytree)
        return f

    def nested(f: Callable[[int, list[T]], Callable[[], None]]):
        return f

    return x * 2, wrapper.__annotations__, nested.__annotations__, Callable[[T], int].__args__[0] is T


def test_abc_callable_subscripted_with_an_argument_list():
    """``collections.abc.Callable[[T], Any]`` (its own ``GenericAlias`` subclass, with a list of
    argument types): made at trace time, as ``torch.utils._pytree.tree_map_only``'s nested
    definitions need; was a break (``__getitem__ of class Callable``), an error under fullgraph."""
    x = torch.randn(3)
    expected = _abc_callable_annotations(x)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    actual = ember.compile(_abc_callable_annotations, backend=backend, fullgraph=True)(x)
    assert torch.equal(actual[0], expected[0])
    assert actual[1:] == expected[1:]
    assert len(graphs) == 1


def _callable_of_a_tensor(x):
    try:
        return x + 1, Callable[[x], int]
    except TypeError as e:
        return x - 1, type(e).__name__


def test_abc_callable_with_a_non_type_argument_matches_eager():
    x = torch.randn(3)
    assert_same(ember.compile(_callable_of_a_tensor, backend="eager")(x), _callable_of_a_tensor(x))


def _pytree_map_only(xs):
    import torch.utils._pytree as pytree
    return pytree.tree_map_only(torch.Tensor, lambda t: t * 2, xs)


def test_pytree_tree_map_only_is_one_graph():
    xs = {"a": [torch.ones(2), "s"], "b": (torch.arange(3.0), 4)}
    expected = _pytree_map_only(xs)
    actual = ember.compile(_pytree_map_only, backend="eager", fullgraph=True)(xs)
    assert_same(actual, expected)


def _aliases_called(x):
    d = dict[str, typing.Any]()  # (torch's flex_attention builds its metadata so)
    d["n"] = 2
    lst = list[int]([1, 2])
    s = set[str](("a",))
    t = tuple[int, ...]((3, 4))
    return x * d["n"] + sum(lst) + len(s) + sum(t), d, lst, s, t, frozenset[int]()


def test_calling_a_builtin_container_alias_makes_the_container():
    """``dict[str, Any]()``: the alias calls its class (one graph under fullgraph; was a break,
    ``calling Constant(dict[str, typing.Any])``)."""
    x = torch.randn(3)
    expected = _aliases_called(x)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    actual = ember.compile(_aliases_called, backend=backend, fullgraph=True)(x)
    assert_same(actual, expected)
    assert len(graphs) == 1


def _user_generic_alias_called(x):
    b = Box[int]()
    return x + 1, type(b) is Box, b.__orig_class__ == Box[int]


def test_calling_a_user_generic_alias_matches_eager():
    x = torch.randn(3)
    assert_same(ember.compile(_user_generic_alias_called, backend="eager")(x), _user_generic_alias_called(x))
