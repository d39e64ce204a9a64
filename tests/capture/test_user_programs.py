"""Gaps found by small ordinary PyTorch programs written against ember (user-style code:
collections dicts, dict views, Enum and NamedTuple classes, user operators / comparisons / hash,
module.parameters() as an iterator, objects as dict keys, itertools, regexes). Each is compared
with eager, with the graph / break / fallback counts from ``ember.stats()``. (The lead's own
findings are in test_lead_findings.py.)"""
import collections
import dataclasses
import enum
import itertools
import operator
import re
import typing

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import (REFERENCE, CompileCounter, assert_same, check_module_same, check_raises_same,
                                check_same, clone_inputs, compile, stats)

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class _Color(enum.IntEnum):
    RED = 1
    BLUE = 2


def _counts():
    s = stats()
    return s["graphs"], s["graph_breaks"], s["fallbacks"]


# -- collections dict subclasses: constants, `|`, replayed mutations -------------------------------

def counter_membership(x):
    c = collections.Counter(a=1)
    o = collections.OrderedDict(b=1, a=2)
    return x + ("a" in c), len(c), list(c.keys()), "b" in o, c == collections.Counter(a=1)


def defaultdict_lambda_membership(x):
    d = collections.defaultdict(int)
    d2 = collections.defaultdict(lambda: x)
    return d2["q"] * 2, "zz" in d, "q" in d2


def dict_unions(x):
    c = collections.Counter(a=3) | collections.Counter(a=1, b=2)  # Counter's |: the larger count
    o = collections.OrderedDict(b=1) | {"a": 2}
    p = {"z": 0} | collections.OrderedDict(b=1)  # OrderedDict.__ror__ answers
    d = collections.defaultdict(list, a=[1]) | {"b": [2]}
    e = {"q": 1} | collections.defaultdict(int, r=2)
    o2 = collections.OrderedDict(a=1)
    o2 |= {"c": 3}
    d["zz"].append(1)
    e["new"] += 1
    return x, c, o, p, d, e, o2


def counter_mutated_after_break(x):
    c = collections.Counter(a=1)  # (constructing it breaks: the rest gets the real Counter)
    return x, c.setdefault("b", 7), c.pop("a"), c.get("zz"), c


def _same_repr(fn, *args):
    expected = fn(*clone_inputs(args))
    actual = compile(fn)(*clone_inputs(args))
    assert repr(actual) == repr(expected)  # (types and order of the containers too)
    assert stats()["fallbacks"] == 0


@pytest.mark.parametrize("fn", [counter_membership, defaultdict_lambda_membership, dict_unions,
                                counter_mutated_after_break])
def test_collections_dicts_agree(fn):
    _same_repr(fn, torch.ones(1))


def regex_in_frame(x):
    m = re.match(r"layer\.(\d+)\.weight", "layer.12.weight")
    return x + (int(m.group(1)) if m else -1)


def test_regex_functions_are_called_not_traced():
    # re.match on constants is called at trace time (its code, which reads re's pattern cache, is
    # not traced) and the Match's methods fold on constants: no break at all
    check_same(regex_in_frame, torch.ones(2), graphs=1, fullgraph=True)
    s = stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


# -- module .device property (next(self.parameters())); tensor methods across a break --------------

class _DeviceModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @property
    def device(self):
        return next(self.parameters()).device

    def forward(self, x):
        return self.fc(x.to(self.device))


def test_module_device_property_from_parameters():
    check_module_same(_DeviceModel, torch.randn(2, 4))
    assert _counts() == (1, 0, 0)


def parameters_is_a_generator(x, m):
    ps = m.parameters()
    first = next(ps)
    rest = list(ps)
    return x @ first.t(), len(rest), [n for n, _ in m.named_parameters()], sum(1 for _ in m.modules())


def test_module_parameters_is_an_iterator():
    check_same(parameters_is_a_generator, torch.ones(1, 2), nn.Sequential(nn.Linear(2, 2), nn.ReLU()))


def tensor_methods_across_a_break(x, y):
    to, add_, mul = x.to, y.add_, x.__mul__
    print("graph break")
    return to(torch.float64), add_(1), mul(3)


def test_tensor_bound_methods_across_a_break(capsys):
    # The bound method of this call's tensor must not be baked into the resume function's graph.
    counter = CompileCounter()
    compiled = compile(tensor_methods_across_a_break, backend=counter)
    for _ in range(3):
        x, y = torch.randn(3), torch.randn(3)
        x2, y2 = x.clone(), y.clone()
        assert_same(compiled(x2, y2), tensor_methods_across_a_break(x, y))
        assert_same(y2, y)
    assert stats()["fallbacks"] == 0 and stats()["recompiles"] == 0


# -- objects with their own __eq__/__hash__ as dict keys -------------------------------------------

class _Key:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, _Key) and other.n == self.n

    def __hash__(self):
        return hash(self.n)


def value_keyed_objects(x, outside):
    d = {_Key(1): x, _Key(2): x * 2}
    try:
        v = d[_Key(2)]  # an equal, distinct key finds the entry
    except KeyError:
        v = x * 100
    return v, _Key(1) in d, len({_Key(1), _Key(1)}), {outside: 1}.get(_Key(5), 0)


@dataclasses.dataclass
class _Unhashable:
    n: int


def unhashable_dataclass_key(x):
    return {_Unhashable(1): x}


def test_objects_with_value_equality_as_keys():
    check_same(value_keyed_objects, torch.ones(1), _Key(5), graphs=None, fullgraph=False)
    check_raises_same(unhashable_dataclass_key, torch.ones(1))


# -- operators and str/repr on user objects ---------------------------------------------------------

class _Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if not isinstance(other, _Vec):
            return NotImplemented
        return _Vec(self.t + other.t)

    def __mul__(self, k):
        return _Vec(self.t * k)

    __rmul__ = __mul__

    def __neg__(self):
        return _Vec(-self.t)

    def __abs__(self):
        return _Vec(self.t.abs())

    def __iadd__(self, other):
        self.t = self.t + other.t * 10
        return self

    def __repr__(self):
        return f"_Vec({self.t.shape[0]})"


class _SubVec(_Vec):
    def __rmul__(self, k):  # a subclass's reflected method goes first
        return _SubVec(self.t * k * 100)

    def __str__(self):
        return "sub!"


class _Plain:
    pass


_OUTSIDE_VEC = _Vec(torch.ones(2))


def user_operators(x):
    v = _Vec(x) + _Vec(x) * 2
    w = 3 * -v
    a = abs(w)
    z = _Vec(x)
    alias = z
    z += _Vec(x)
    s = _SubVec(x)
    r = _Vec(x) * 2 + _OUTSIDE_VEC
    try:
        _Vec(x) + 1
    except TypeError as e:
        msg = str(e)
    try:
        _Plain() * 2
    except TypeError as e:
        msg2 = str(e)
    return w.t, a.t, alias.t, repr(w), str(w), str(s), repr(s), (2 * s).t, r.t, msg, msg2


def test_user_operators_and_str():
    check_same(user_operators, torch.randn(2, requires_grad=True))
    assert _counts() == (1, 0, 0)


# -- Enum classes: lookup by value and name, iteration, membership ----------------------------------

class _Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class _Perm(enum.Flag):
    R = 1
    W = 2


def enum_lookups(x):
    act = _Act("tanh")
    y = torch.tanh(x) if act is _Act.TANH else torch.relu(x)
    return (y * _Color(2), act.value, _Act["RELU"], [m.name for m in _Act], len(_Act), _Act.RELU in _Act,
            list(_Color), _Perm(3), _Perm.W in _Perm(3))


def enum_bad_value(x):
    return _Act("nope")


def test_enum_classes():
    check_same(enum_lookups, torch.randn(3, requires_grad=True))
    assert _counts() == (1, 0, 0)
    check_raises_same(enum_bad_value, torch.ones(1))


# -- dict views are live; changing a dict's/set's size while iterating raises ----------------------

def live_dict_views(x):
    d = {"a": x, "b": 2}
    ks, vs, its = d.keys(), d.values(), d.items()
    d["c"] = 3
    d["a"] = x * 2
    return (list(ks), len(vs), "c" in ks, ("b", 2) in its, [v for v in vs][0], list(its)[-1],
            sorted(ks), dict(its)["a"], type(ks).__name__)


def dict_grows_while_iterating(x):
    d = {"a": 1, "b": 2}
    try:
        for k, v in d.items():
            d[k + "x"] = v
    except RuntimeError as e:
        return x + 1, str(e), d
    return x, d


def dict_value_change_while_iterating_is_fine(x):
    d = {"a": 1, "b": 2}
    for k in d:
        d[k] = d[k] * 10
    return x * d["a"], d


def set_grows_while_iterating(x):
    s = {1, 2}
    try:
        for v in s:
            s.add(v + 10)
    except RuntimeError as e:
        return x, str(e)
    return x + 1, s


@pytest.mark.parametrize("fn", [live_dict_views, dict_grows_while_iterating,
                                dict_value_change_while_iterating_is_fine, set_grows_while_iterating])
def test_dict_views_and_iteration_while_mutating(fn):
    check_same(fn, torch.randn(2, requires_grad=True), graphs=None)
    assert stats()["fallbacks"] == 0 and stats()["graph_breaks"] == 0


def dict_views_escape_and_cross_a_break(x, d):
    ks = d.keys()
    it = iter(d.items())
    first = next(it)
    print("graph break")
    rest = list(it)
    d["new"] = 1
    return x * len(ks), first, rest, ks



def test_dict_views_escape_and_cross_a_break():
    check_same(dict_views_escape_and_cross_a_break, torch.ones(1), {"a": 1, "b": 2}, graphs=None,
               fullgraph=False)
    assert stats()["fallbacks"] == 0



# -- NamedTuple methods/properties and class attributes; alternate constructors of builtins ---------

class _Stats(typing.NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor
    n: int = 0

    def scaled(self, k):
        return _Stats(self.mean * k, self.std * k, self.n)

    @property
    def var(self):
        return self.std ** 2


def namedtuple_methods(x, s_in):
    s = _Stats(x.mean(), x.std(), n=x.numel())
    return (s.scaled(2).mean, s.var, s._fields, s._field_defaults, s_in.var, s_in.scaled(3).std,
            int.from_bytes(b"\x01\x02", "big"), "ab".translate(str.maketrans("a", "z")), float.fromhex("0x1p-2"))


def test_namedtuple_methods_and_builtin_constructors():
    check_same(namedtuple_methods, torch.randn(4, requires_grad=True),
               _Stats(torch.ones(1), torch.ones(1) * 2, 1))
    assert _counts() == (1, 0, 0)


# -- itertools combinatorics over traced values -------------------------------------------------------

def itertools_combinatorics(x):
    ts = [x, x * 2, x * 3]
    pairs = [a * b for a, b in itertools.combinations(ts, 2)]
    perms = [a - b for a, b in itertools.permutations(ts[:2])]
    prod = [a + b for a, b in itertools.product(ts[:2], [1, 2])]
    cwr = list(itertools.combinations_with_replacement("ab", 2))
    rep = list(itertools.product([0, 1], repeat=2))
    nb = [b - a for a, b in itertools.pairwise(ts)]
    sel = list(itertools.compress(ts, [1, 0, 1]))
    acc = list(itertools.accumulate(ts))
    acc2 = list(itertools.accumulate([1, 2, 3], operator.mul, initial=2))
    return sum(pairs), sum(perms), sum(prod), cwr, rep, sum(nb), sel, acc[-1], acc2


def test_itertools_combinatorics():
    check_same(itertools_combinatorics, torch.randn(2, requires_grad=True))
    assert _counts() == (1, 0, 0)


# -- methods a collections dict class overrides are its own, not dict's ---------------------------

def counter_update_from_outside(x, c):
    c.update({"a": 5})  # Counter.update adds counts
    c.subtract({"b": 1})
    return x + c["a"] + c["zz"], c.most_common(1), c.total()


def ordered_dict_from_outside(x, od):
    od["c"] = 3
    k = od.popitem()
    first = od.popitem(last=False)  # (not dict.popitem: refused, a graph break)
    return x, k, first


def defaultdict_copy_keeps_factory(x, d):
    e = d.copy()
    e["new"].append(1)
    return x, e, type(e), e.default_factory


@pytest.mark.parametrize("fn,make", [
    (counter_update_from_outside, lambda: collections.Counter(a=1, b=2)),
    (ordered_dict_from_outside, lambda: collections.OrderedDict(a=1, b=2)),
    (defaultdict_copy_keeps_factory, lambda: collections.defaultdict(list, a=[0])),
])
def test_collections_dicts_from_outside(fn, make):
    d_eager, d_comp = make(), make()
    expected = fn(torch.ones(1), d_eager)
    actual = compile(fn)(torch.ones(1), d_comp)
    assert repr(actual) == repr(expected) and repr(d_comp) == repr(d_eager)
    assert stats()["fallbacks"] == 0


def defaultdict_missing_key_from_outside(x, d):
    try:
        v = d["missing"]
    except KeyError:
        v = "keyerror"
    return x, v


def test_defaultdict_from_outside_calls_its_factory():
    compiled = compile(defaultdict_missing_key_from_outside)
    d = collections.defaultdict(None)
    assert compiled(torch.ones(1), d)[1] == "keyerror"
    d.default_factory = int  # guarded: recompiles
    assert compiled(torch.ones(1), d)[1] == 0 and dict(d) == {"missing": 0}
    assert stats()["fallbacks"] == 0


@dataclasses.dataclass(frozen=True)
class _FrozenCfg:
    k: int = 2
    name: str = "a"


def frozen_dataclass_hash(x):
    f = _FrozenCfg(3)
    return x.repeat(f.k), hash(f) == hash(_FrozenCfg(3)), hash(f) == hash((3, "a")), f == _FrozenCfg(3)


def test_hash_of_frozen_dataclass():
    check_same(frozen_dataclass_hash, torch.randn(2, requires_grad=True))
    assert _counts() == (1, 0, 0)


@dataclasses.dataclass(order=True)
class _Version:
    major: int
    minor: int = 0


def user_comparisons(x):
    a, b = _Version(1, 2), _Version(1, 3)
    try:
        _Plain() < _Plain()
    except TypeError as e:
        msg = str(e)
    return (x * (a < b), a == _Version(1, 2), a != b, a >= b, a <= _Version(1, 2),
            msg)


def test_user_comparisons():
    check_same(user_comparisons, torch.randn(2, requires_grad=True))
    assert _counts() == (1, 0, 0)
