"""Wrong answers found by running PyTorch's test_dicts / test_misc / test_generator against ember,
each now compared with eager (outputs, the objects after the call):

- ``obj.__dict__`` read after the frame assigned attributes (stale keys), or an assignment after
  reading it; on objects and modules;
- an OrderedDict subclass's values in linked order after ``move_to_end``;
- ``operator.isub(s, t)`` & co. and ``operator.setitem`` on containers mutate them (they were
  folded on copies);
- ``{**f()}`` / ``[*f()]`` with a break inside ``f``: the container being filled is a resume
  function's argument, and filling it is a mutation to replay (the result was empty);
- ``__bool__`` returning a non-bool raises eager's TypeError;
- ``obj.__class__ = Other`` on an object made in the frame was ignored.
"""
import collections
import operator

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import REFERENCE, check_raises_same, check_same, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class _Obj:
    def __init__(self):
        self.a = 1
        self.b = 2


def dict_after_write(x, o):
    o.c = 3
    return x + 1, sorted(o.__dict__.keys()), list(o.__dict__.values()), sorted(vars(o))


def write_after_dict(x, o):
    d = o.__dict__
    o.q = 7
    return x + len(d), "q" in d


def dict_then_attr(x, o):
    o.__dict__["z"] = 5
    return x + o.z


def dict_keeps_write_order(x, o):
    o.a = 5          # an existing key keeps its place
    o.n = x          # a new one follows
    d = o.__dict__
    return x + 1, list(d), d["a"], len(d), [k for k, v in d.items() if v is x]


def write_into_dict_after_attr(x, o):
    o.a = 5
    o.__dict__["a"] = 7   # a break: the real __dict__ gets it after o.a = 5 is replayed
    return x + o.a


def ior_on_input_dict(x, o):
    d = o.__dict__
    d |= {"z": 1}         # in place on the caller's dict
    return x + 1


@pytest.mark.parametrize("fn", [dict_after_write, write_after_dict, dict_then_attr, dict_keeps_write_order,
                                write_into_dict_after_attr, ior_on_input_dict])
def test_instance_dict_sees_the_frames_writes(fn):
    check_same(fn, torch.zeros(1), _Obj(), graphs=None, fullgraph=False)
    o_eager, o_ember = _Obj(), _Obj()
    x = torch.zeros(1)
    fn(x, o_eager)
    compile(fn)(x, o_ember)
    assert list(vars(o_ember)) == list(vars(o_eager))  # the object afterwards, in its key order
    assert all(vars(o_ember)[k] is x if vars(o_eager)[k] is x else vars(o_ember)[k] == vars(o_eager)[k]
               for k in vars(o_eager))


def new_object_dict_is_live(x):
    o = _Obj()
    d = o.__dict__
    o.c = 5
    d["a"] = 9
    del o.b
    return x + o.a, list(d), o.c, hasattr(o, "b")


def test_new_object_dict_is_its_attributes():
    check_same(new_object_dict_is_live, torch.zeros(1))
    assert stats()["graph_breaks"] == 0


class _Counting(nn.Module):
    def forward(self, x):
        self.cnt = 5
        return x + len(self.__dict__), "cnt" in self.__dict__


def test_module_dict_sees_the_frames_writes():
    m1, m2 = _Counting(), _Counting()
    x = torch.zeros(1)
    expected = m1(x)
    got = compile(m2)(x)
    assert got[1] == expected[1]
    torch.testing.assert_close(got[0], expected[0])
    assert m2.cnt == 5


class _ODSub(collections.OrderedDict):
    def keys(self):
        return super().keys()


def ordered_values(x, d):
    y = 0
    for idx, value in enumerate(d.values()):
        y = y + (torch.sin(x * value) if idx == 0 else torch.cos(x * value))
    return y, list(d.items())


def test_ordered_dict_subclass_in_linked_order():
    d = _ODSub()
    d[2] = 4
    d[3] = 5
    d.move_to_end(2)
    check_same(ordered_values, torch.randn(4), d)


class _MySet(set):
    pass


@pytest.mark.parametrize("name", ["isub", "ixor", "iand", "ior", "sub", "xor"])
def test_operator_functions_on_sets(name):
    op = getattr(operator, name)

    def f(x):
        s = {"one", "two", "three"}
        u = _MySet({"one", "four"})
        return x, op(s, u), op(u, s), s, u
    check_same(f, torch.zeros(1), graphs=0)


def operator_mutations(x):
    lst, d, t = [1, 2], {"a": 1}, (1,)
    operator.setitem(lst, 0, 5)
    operator.delitem(d, "a")
    operator.iadd(lst, [3])
    operator.iconcat(lst, [4])
    n = 3
    m = operator.iadd(n, 2)
    try:
        operator.iconcat(n, 2)  # not a sequence: eager's TypeError, not an addition
        msg = ""
    except TypeError as e:
        msg = str(e)
    return x, lst, d, n, m, t, operator.iadd(t, (2,)), operator.iconcat(t, (3,)), msg


def test_operator_functions_mutate_containers():
    check_same(operator_mutations, torch.zeros(1), graphs=0)


def _make():
    torch._dynamo.graph_break()
    return {0: torch.tensor(3)}


def _make_list():
    torch._dynamo.graph_break()
    return [torch.tensor(1), torch.tensor(2)]


def merge_after_break():
    return {**_make()}, [*_make_list(), 3]


def test_container_filled_after_a_break():
    check_same(merge_after_break, graphs=None, fullgraph=False)
    assert stats()["fallbacks"] == 0


class _BadBool:
    def __init__(self, x):
        self.x = x

    def __bool__(self):
        self.x = 1.2
        return self.x


def truth_of_bad_bool(a, obj):
    if not obj:
        return a + obj.x
    return a - obj.x


def test_bool_returning_float_raises():
    check_raises_same(truth_of_bad_bool, torch.rand(4), _BadBool(0.5))


class _Base:
    def __init__(self, x):
        self.x = x


class _Derived(_Base):
    pass


def reassign_class(x):
    obj = _Base(5)
    obj.__class__ = _Derived
    return x + 1, isinstance(obj, _Derived), type(obj).__name__


def test_class_assignment_on_new_object():
    check_same(reassign_class, torch.ones(1), graphs=None, fullgraph=False)


def dict_dunders(x):
    a = {"a": 1, "b": 2}
    b = {"c": x}
    a.__ior__(b)
    c = a.__or__({"z": 1})
    d = {"q": 1}.__ror__({"r": 2})
    it = list(a.__iter__())
    o = collections.OrderedDict(a=1)
    o.__ior__({"k": 2})
    cnt = collections.Counter(a=3)
    cnt.__ior__(collections.Counter(a=1, b=2))  # Counter's own |=: the larger count
    return a, c, d, it, o, a.__or__(3), cnt


def test_dict_dunder_methods():
    check_same(dict_dunders, torch.ones(1), graphs=None, fullgraph=False)
    assert stats()["fallbacks"] == 0


# -- nn.Module attribute lookup order and overridden __call__ (test_modules.py) -----------------------

class _Shadowing(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = 3

    def linear(self, x):  # a method named like the submodule below: Python finds the method first
        return x

    def forward(self, x):
        return x * 4


class _ShadowingChild(_Shadowing):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)  # registered in _modules: the class's method shadows it
        self.a = 2
        self.scale = 1

    def scale(self, x):  # shadowed by the instance attribute
        raise RuntimeError("should not be called")

    def forward(self, x):
        return self.linear(x) * self.a * self.scale


def test_module_attribute_lookup_follows_python():
    m = _ShadowingChild()
    x = torch.randn(3, 3)
    torch.testing.assert_close(compile(m, fullgraph=True)(x), m(x))


class _OwnCall(nn.Module):
    def __call__(self, x):
        return 5 * self.forward(x)

    def forward(self, x):
        return x * 3


class _CallsSuper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __call__(self, *args, **kwargs):  # like transformers' GradientCheckpointingLayer
        return super().__call__(*args, **kwargs) * 2

    def forward(self, x):
        return self.lin(x)


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.own = _OwnCall()
        self.sup = _CallsSuper()
        self.sup.register_forward_hook(lambda m, i, o: o + 1)

    def forward(self, x):
        return self.own(x) + self.sup(x)


def test_overridden_module_call_is_inlined():
    m = _Outer()
    x = torch.randn(2, 4)
    torch.testing.assert_close(compile(m, fullgraph=True)(x), m(x))


# -- objects of __slots__ classes made in the frame (test_misc's test_inspect_signature_bind) ---------

def _inner(a, b, *ar, c=10, d=11, **kw):
    pass


def signature_bind(x, apply_defaults):
    import inspect
    sig = inspect.signature(_inner)
    bound = sig.bind(1, 2, 3, d=12, e=15)  # a BoundArguments: __slots__, no __dict__
    bound.arguments["d"] = 13
    if apply_defaults:
        bound.apply_defaults()
    return repr(bound), bound.args, bound.kwargs, x + 1


class _Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def slotted(x):
    p = _Slotted(x * 2)
    try:
        p.other = 1  # eager: AttributeError (no __dict__)
    except AttributeError:
        return p.v + 1, p
    return p.v


@pytest.mark.parametrize("apply_defaults", [False, True])
def test_slotted_objects_escape_without_crash(apply_defaults):
    check_same(signature_bind, torch.ones(1), apply_defaults, graphs=None, fullgraph=False)


def test_slotted_object_made_in_frame():
    x = torch.ones(2)
    expected = slotted(x)
    got = compile(slotted)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert type(got[1]) is _Slotted
    torch.testing.assert_close(got[1].v, expected[1].v)
