"""Objects of ``__slots__`` classes made in the frame (set through the slot descriptors, rebuilt the
same way; unknown names and unset slots raise AttributeError), ``torch.utils._ordered_set.OrderedSet``
(a slotted ``MutableSet`` written in Python) compared with sets and lists, and f-strings of user
objects through their Python ``__str__``/``__repr__``."""
import pytest
import torch
from torch.utils._ordered_set import OrderedSet

from ember_test_helpers import REFERENCE, check_same, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class P:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


class Q(P):  # slots below, a __dict__ above
    def __init__(self, a):
        super().__init__(a)
        self.c = 3


def slotted(x):
    p, q = P(x), Q(2)
    q.b = 4
    try:
        p.zz = 1
    except AttributeError as e:
        unknown = str(e)
    try:
        p.b
    except AttributeError as e:
        unset = str(e)
    return p.a + 1, (p.a, q.a, q.b, q.c), unknown, unset, (p, q)


def dict_of_slotted(x):
    q = Q(2)
    q.b = 4
    return x + 1, vars(q)  # only `c`: slots live outside __dict__


def test_dict_of_slotted_object_breaks():
    check_same(dict_of_slotted, torch.ones(2), graphs=None, fullgraph=False)


def test_slotted_objects():
    def fn(x):
        out = slotted(x)
        p, q = out[-1]
        return out[:-1], p.a * 1, q.a, q.b, q.c, hasattr(p, "b")
    check_same(fn, torch.ones(2))
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


def ordered_set(x):
    s = OrderedSet([3, 1, 2])
    s.add(0)
    s.discard(1)
    return (x + 1, list(s), s == {0, 2, 3}, {1, 2} == s, s <= {0, 1, 2, 3, 4}, s != [3, 2, 0], s > {0},
            s == OrderedSet([0, 2, 3]), str(s), f"{s}")


def test_ordered_set():
    check_same(ordered_set, torch.ones(2))
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


class R:
    def __init__(self, a):
        self.a = a

    def __repr__(self):
        return f"R({self.a})"


class S(R):
    def __str__(self):
        return "S!"


def formats(x):
    r, s = R(2), S(3)
    return x + 1, f"{r}|{s}|{s!r}|{r!s:>6}", "%s" % (r,)


def test_format_user_objects():
    check_same(formats, torch.ones(2))
    assert stats()["graph_breaks"] == 0


def format_spec_on_plain_object(x):
    return f"{R(1):>4}"


def test_format_spec_on_object_raises():
    from ember_test_helpers import check_raises_same
    check_raises_same(format_spec_on_plain_object, torch.ones(2))


class _Radd:
    def __add__(self, other):
        return NotImplemented

    def __radd__(self, other):
        return ("radd", other)


def operators_with_builtin_operands(x):
    s = OrderedSet([1, 2, 3])
    s -= [2]          # MutableSet.__isub__ (Python) with a list
    s |= (7,)
    r = [list(s), [1] + _Radd(), "s" + _Radd(), (1,) + _Radd()]
    try:
        s -= [[]]
    except TypeError as e:
        r.append(str(e))
    try:
        _Radd() + [1]
    except TypeError as e:
        r.append(str(e))
    return x + 1, r


def test_user_operators_with_builtin_operands():
    check_same(operators_with_builtin_operands, torch.ones(2))
    assert stats()["graph_breaks"] == 0


# -- classes with a Python __new__ --------------------------------------------------------------------
class _Mock:
    def __new__(cls):
        return super().__new__(cls)

    def __init__(self):
        self.c = 5


class _Doubling:
    def __new__(cls, v):
        obj = object.__new__(cls)
        obj.v = v * 2
        return obj

    def __init__(self, v):
        self.w = v


class _NotAnInstance:
    def __new__(cls, x):
        return x + 1  # not an instance of the class: __init__ is not called

    def __init__(self, x):
        raise RuntimeError("not called")


class _BadNew:
    def __new__(cls, a):
        return super().__new__(cls, a)


def dunder_new(x):
    m, s, o = _Mock(), _Doubling(3), _NotAnInstance(x)
    try:
        _BadNew(1)
    except TypeError as e:
        err = str(e)
    return x + m.c + s.v + s.w, o, (type(m).__name__, m.c), (s.v, s.w), err


def test_python_dunder_new():
    check_same(dunder_new, torch.ones(2))
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


def new_object_escapes(x):
    s = _Doubling(4)
    print("", end="")  # a break: s is rebuilt without running __new__ again
    return x + s.v, s.v, s.w


def test_python_dunder_new_object_across_a_break():
    check_same(new_object_escapes, torch.ones(2), graphs=None, fullgraph=False)


# -- abstract classes cannot be instantiated in the frame either --------------------------------------------
import abc  # noqa: E402


class _Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...

    @property
    @abc.abstractmethod
    def name(self):
        ...


class _Half(_Shape):
    def area(self):
        return 1


class _Square(_Half):
    @property
    def name(self):
        return "sq"


class _AbstractModule(torch.nn.Module, abc.ABC):
    @abc.abstractmethod
    def forward(self, x):
        ...


def abstract_instantiation(x):
    out = []
    for cls in (_Shape, _Half, _Square, _AbstractModule):
        try:
            cls()
            out.append("made")
        except TypeError as e:
            out.append(str(e))
    return x + 1, out, _Square().area(), _Square().name


def test_abstract_classes_raise():
    check_same(abstract_instantiation, torch.ones(2))
    assert stats()["graph_breaks"] == 0


# -- frozen dataclasses as dict keys and set elements (their generated __eq__/__hash__) ------------------
import dataclasses  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _Key:
    x: float
    y: float
    z: int = dataclasses.field(default=0, compare=False)


def dataclass_keys(x, outside):
    dc = _Key(x=3.2, y=2.5)
    d = {dc: 2, _Key(1.0, 2.0, z=9): 3}
    s = {dc, _Key(1.0, 2.0), outside}
    return x + dc.x + d[dc] + len(d) + len(s), _Key(3.2, 2.5) in d, outside in s, d.get(outside)


def test_frozen_dataclass_keys():
    check_same(dataclass_keys, torch.ones(2), _Key(3.2, 2.5))
    assert stats()["graph_breaks"] == 0


def str_format_objects(x):
    r, s = R(2), S(3)
    out = ["v={} {!r} {:>3}".format(r, r, 5), "{a}-{b}".format(a=s, b=1)]
    try:
        "{:>4}".format(r)  # object.__format__ refuses a spec
    except TypeError as e:
        out.append(str(e))
    return x + 1, out


def test_str_format_of_user_objects():
    check_same(str_format_objects, torch.ones(2))
    assert stats()["graph_breaks"] == 0
