"""``d.keys()`` / ``d.items()`` as sets: set operators and comparisons against sets, user set
subclasses, other views and any iterable, compared with eager (variables/dict_views.py)."""
import collections
import operator

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class MySet(set):
    pass


OPS = [operator.and_, operator.or_, operator.xor, operator.sub, operator.iand, operator.ior, operator.ixor,
       operator.isub, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def _other(kind):
    return {"set": {"b", "z", ("a", 1)}, "myset": MySet({"a", ("b", 2)}), "keys": {"b": 0, "q": 1}.keys(),
            "items": {"a": 1, "c": 3}.items(), "list": ["a", ("a", 1), 5]}[kind]


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("view", ["keys", "items"])
@pytest.mark.parametrize("other", ["set", "myset", "keys", "items", "list"])
def test_view_operator(op, view, other):
    def fn(x, d):
        v = getattr(d, view)()
        o = _other(other)
        out = [op(v, o)]
        if not isinstance(o, list):
            out.append(op(o, v))
        return x + 1, out

    d = {"a": 1, "b": 2}
    if other == "list" and op not in (operator.eq, operator.ne) and op in OPS[8:]:
        check_raises_same(fn, torch.randn(2), d)  # `view < list` is a TypeError
        return
    check_same(fn, torch.randn(2), d)
    assert stats()["graph_breaks"] == 0


def set_inplace_with_view(x, d):
    s = {"z"}
    alias = s
    s |= d.keys()      # set.__ior__ refuses a view: s is rebound to a new set, alias unchanged
    s -= d.keys()
    return x + 1, s, alias, s is alias


def view_contains(x, d):
    return x + 1, 2 in d.values(), 7 in d.values(), ("a", 1) in d.items()


def values_tensor_contains(x, d):
    return x + 1, x in {"k": x}.values()


@pytest.mark.parametrize("fn", [set_inplace_with_view, view_contains, values_tensor_contains])
def test_view_misc(fn):
    check_same(fn, torch.randn(2), {"a": 1, "b": 2})
    assert stats()["graph_breaks"] == 0


def view_with_non_iterable(x, d):
    return d.keys() | 1


def test_view_with_non_iterable_raises():
    check_raises_same(view_with_non_iterable, torch.randn(2), {"a": 1})


def items_with_tensor_values(x):
    d = {"a": x}
    u = d.items() | {("b", 1)}
    return x * 2, len(u), ("b", 1) in u


def test_items_with_tensor_values_break():
    check_same(items_with_tensor_values, torch.randn(2), graphs=None, fullgraph=False)


# -- dicts: ==, | and |= across dict subclasses, OrderedDict's own methods, defaultdict() -----------
class SimpleDict(dict):
    pass


def subclass_ops(x):
    d = SimpleDict({"a": 1, "b": 2})
    r = [d == {"a": 1, "b": 2}, d != {"a": 1}, {} == d]
    e = d | {"c": 3}          # dict's `|` gives a plain dict
    r += [type(e).__name__, e]
    alias = d
    d |= {"z": 0}             # in place
    r += [d, alias is d, type(d).__name__]
    return x + 1, r


def ior_pairs(x):
    p = {"a": 1}
    p |= [("q", 5)]           # `|=` takes what update() takes
    return x + 1, p


def ordered_methods(x):
    import collections
    o = collections.OrderedDict.fromkeys("abcde")
    o.move_to_end("b")
    s1 = "".join(o)
    collections.OrderedDict.move_to_end(o, "a", last=False)
    s2 = "".join(o)
    first = o.popitem(last=False)
    last = o.popitem()
    other = collections.OrderedDict.fromkeys("edc")
    return x + 1, s1, s2, first, last, list(collections.OrderedDict.keys(o)), o == other, dict(o) == dict(other)


def dict_eq_identity(x):
    y = {"k": x, "n": 1}
    return x + 1, y == {"k": x, "n": 1}, y != {"k": x, "n": 2}


def defaultdict_without_factory(x):
    import collections
    d = collections.defaultdict()
    try:
        d[1] += 42
    except KeyError:
        d[1] = 1
    return x + 1, d, d.default_factory


@pytest.mark.parametrize("fn", [subclass_ops, ior_pairs, ordered_methods, dict_eq_identity,
                                defaultdict_without_factory])
def test_dict_operations(fn):
    check_same(fn, torch.randn(2))
    assert stats()["graph_breaks"] == 0


def dict_or_int(x):
    return {"a": x} | 1


def move_missing(x):
    import collections
    collections.OrderedDict(a=1).move_to_end("zz")


@pytest.mark.parametrize("fn", [dict_or_int, move_missing])
def test_dict_operation_errors(fn):
    check_raises_same(fn, torch.randn(2))


def dict_eq_tensor_values(x):
    return x + 1, {"k": x} == {"k": x + 0}


def test_dict_eq_on_tensor_values_breaks():
    check_raises_same(dict_eq_tensor_values, torch.randn(2))  # eager: a tensor's truth is ambiguous


def dunder_methods(x):
    d1, d2, d3 = SimpleDict({"a": 1, "b": 2}), SimpleDict({"a": 1, "b": 2}), SimpleDict({"b": 3, "c": 4})
    r = [d1.__eq__(d2), d1.__eq__(d3), dict.__eq__(d1, d2), SimpleDict.__eq__(d1, d3), d1.__ne__(d3), d1.__eq__(1)]
    r += [d1.__or__(d3), d3.__or__(d1), dict.__or__(d1, d3), d1.__or__(1), type(d1.copy()).__name__]
    d5 = SimpleDict(d1)
    r += [d5.__ior__(d3.items()) is d5, d5]

    def gen(d):
        yield from d.items()

    d6 = {"q": 0}
    r += [d6.__ior__(gen(d3)) is d6, d6]
    return x + 1, r


def test_dict_dunder_methods():
    check_same(dunder_methods, torch.randn(2))
    assert stats()["graph_breaks"] == 0


class _SD(dict):
    pass


class _Logged(dict):
    def __setitem__(self, k, v):
        super().__setitem__(k, (v, "logged"))


def fromkeys_variants(x):
    a = dict.fromkeys("ab", 0)
    b = _SD.fromkeys([1, 2])
    c = collections.OrderedDict.fromkeys("xy", x)
    d = _Logged.fromkeys("k", 1)   # through the subclass's __setitem__
    return x + 1, a, b, type(b).__name__, c, d, dict.fromkeys.__name__


def test_fromkeys_on_subclasses():
    check_same(fromkeys_variants, torch.ones(2))
    assert stats()["graph_breaks"] == 0
