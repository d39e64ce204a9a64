"""Assigning a ``__slots__`` member of a user object from outside the frame: recorded like an
instance attribute and replayed after the graph (was a graph break, EB0032: 2 graphs; torch.compile
2.13 does not break: 1 graph)."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


class SlottedChild(Slotted):
    __slots__ = ("c",)


class SlotsAndDict:
    __slots__ = ("a", "__dict__")


def write_then_read(x, s):
    s.a = x * 2
    return s.a + 1


def write_unset_slot(x, s):
    s.b = x + 1
    return s.a * s.b if isinstance(s.a, torch.Tensor) else s.b


def child_slots(x, s):
    s.c = x
    s.a = x + 1
    return s.c * s.a


def int_into_slot(x, s):
    s.b = 3
    return x + s.b


def slot_and_dict(x, s):
    s.a = x
    s.other = x * 2
    return s.a + s.other


def read_unset_slot(x, s):
    try:
        return s.b
    except AttributeError:
        return x - 1


CASES = [(write_then_read, Slotted), (write_unset_slot, Slotted), (child_slots, SlottedChild),
         (int_into_slot, Slotted), (slot_and_dict, SlotsAndDict), (read_unset_slot, Slotted)]


def _make(cls):
    obj = cls.__new__(cls)
    if cls is not SlotsAndDict:
        Slotted.__init__(obj, torch.ones(3))
    return obj


def _state(obj):
    names = [n for k in type(obj).__mro__ for n in vars(k).get("__slots__", ()) if n != "__dict__"]
    out = {n: getattr(obj, n) for n in names if hasattr(obj, n)}
    out.update(getattr(obj, "__dict__", {}))
    return out


@pytest.mark.parametrize("fn,cls", CASES, ids=[c[0].__name__ for c in CASES])
def test_slot_write(fn, cls):
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for _ in range(2):
        x = torch.randn(3)
        se, sc = _make(cls), _make(cls)
        assert_same(compiled(x, sc), fn(x, se))
        state_c, state_e = _state(sc), _state(se)
        assert list(state_c) == list(state_e)
        for k in state_e:
            assert_same(state_c[k], state_e[k])
    assert cnt.frame_count == 1  # torch.compile: 1 graph, no break
    assert ember.stats()["graph_breaks"] == 0


def test_slot_write_is_seen_after_a_break():
    def fn(x, s):
        s.a = x * 2
        torch._dynamo.graph_break()
        return s.a + 1
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    se, sc = Slotted(None), Slotted(None)
    x = torch.randn(3)
    assert_same(compiled(x, sc), fn(x, se))
    assert_same(sc.a, se.a)
    assert cnt.frame_count == 2
